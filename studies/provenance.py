"""Which software made a report: installed package versions and the source revision of this checkout."""

from __future__ import annotations

import functools
import importlib.metadata
import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["PROVENANCE_PACKAGES", "git_revision", "package_versions"]

# The software whose versions decide what a report says (the trials' own environment is in MLflow).
PROVENANCE_PACKAGES = (
    "normlab",
    "torch",
    "ray",
    "mlflow",
    "optuna",
    "numpy",
    "scipy",
    "sqlalchemy",
    "fastapi",
    "pydantic",
)
_REPO = Path(__file__).resolve().parents[1]


def package_versions(packages: Sequence[str] = PROVENANCE_PACKAGES) -> dict[str, str]:
    """Installed versions, read from package metadata (nothing is imported)."""
    versions = {}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


@functools.cache
def git_revision() -> str:
    """The source revision of this checkout (+"-dirty" with uncommitted changes); `unknown` for an
    installed tree without .git. Read once per process: the code does not change under a running API."""
    try:
        head = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
