"""The registry images the compose stack starts from (python:3.11-slim, postgres:16): pulled when a registry
answers, else stand-ins built here from Debian packages and tagged with the same names.

A stand-in is Debian bookworm (debootstrap --variant=minbase, then `docker import`) with the packages the
image's users rely on: Python 3.11 for python:3.11-slim; PostgreSQL 15 with an entrypoint that keeps the
postgres image's contract (POSTGRES_USER / _PASSWORD / _DB, /docker-entrypoint-initdb.d, pg_isready) for
postgres:16. Each carries the label `org.normlab.stand-in` saying what it is, and a second tag under
`normlab-stand-in/`. Built once, then found by tag: a second run starts at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.docker.docker_stack import DockerError, docker

__all__ = ["STAND_INS", "StandIn", "ensure_base_images"]

STAND_IN_LABEL = "org.normlab.stand-in"
STAND_IN_NAMESPACE = "normlab-stand-in"
DEBIAN_SUITE = "bookworm"
DEBIAN_BASE = f"{STAND_IN_NAMESPACE}/debian:{DEBIAN_SUITE}-minbase"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
STAND_IN_DIR = Path(__file__).resolve().parent / "stand_ins"


@dataclass(frozen=True)
class StandIn:
    image: str  # the name the Dockerfiles and the compose file use
    dockerfile: str  # under tests/docker/stand_ins
    description: str


STAND_INS = (
    StandIn("python:3.11-slim", "python.Dockerfile", "Debian bookworm's Python 3.11, not the official image"),
    StandIn("postgres:16", "postgres.Dockerfile", "Debian bookworm's PostgreSQL 15, not the official 16"),
)


def ensure_base_images(report: Callable[[str], None], *, pull_timeout_s: float = 120) -> dict[str, str]:
    """Make every STAND_INS image available; returns image -> where it came from (for the test output)."""
    origins: dict[str, str] = {}
    missing: list[StandIn] = []
    for stand_in in STAND_INS:
        origin = _pulled_or_cached(stand_in.image, pull_timeout_s)
        if origin is None:
            missing.append(stand_in)
        else:
            origins[stand_in.image] = origin
    if missing:
        _ensure_debian_base(report)
        with ThreadPoolExecutor(max_workers=len(missing)) as pool:
            for stand_in, _ in zip(missing, pool.map(_build_stand_in, missing), strict=True):
                origins[stand_in.image] = f"STAND-IN built here ({stand_in.description})"
    for image, origin in origins.items():
        report(f"base image {image}: {origin}")
    return origins


def _pulled_or_cached(image: str, timeout_s: float) -> str | None:
    try:
        docker("pull", "--quiet", image, timeout=timeout_s)
        return "pulled"
    except (DockerError, subprocess.TimeoutExpired):
        pass
    try:
        label = docker(
            "image", "inspect", "--format", f'{{{{index .Config.Labels "{STAND_IN_LABEL}"}}}}', image
        )
    except DockerError:
        return None
    if label and label != "<no value>":
        return f"STAND-IN, cached ({label})"
    return "cached (registry unreachable)"


def _ensure_debian_base(report: Callable[[str], None]) -> None:
    try:
        docker("image", "inspect", DEBIAN_BASE)
        return
    except DockerError:
        pass
    if shutil.which("debootstrap") is None:
        report("installing debootstrap (apt-get) to build stand-in base images")
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap"],
            check=True,
            capture_output=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            timeout=600,
        )
    report(f"no registry: building {DEBIAN_BASE} with debootstrap from {DEBIAN_MIRROR}")
    with tempfile.TemporaryDirectory(prefix="normlab-debootstrap-") as work:
        rootfs = Path(work) / "rootfs"
        completed = subprocess.run(
            ["debootstrap", "--variant=minbase", DEBIAN_SUITE, str(rootfs), DEBIAN_MIRROR],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if completed.returncode != 0:
            raise DockerError(f"debootstrap failed:\n{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            [
                "docker",
                "import",
                "--change",
                f"LABEL {STAND_IN_LABEL}=debian-{DEBIAN_SUITE}-minbase",
                "--change",
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "-",
                DEBIAN_BASE,
            ],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait() != 0 or imported.returncode != 0:
            raise DockerError(f"docker import of the debootstrap root failed:\n{imported.stderr}")


def _build_stand_in(stand_in: StandIn) -> None:
    repository, _, tag = stand_in.image.partition(":")
    docker(
        "build",
        "-f",
        str(STAND_IN_DIR / stand_in.dockerfile),
        "--build-arg",
        f"DEBIAN_BASE={DEBIAN_BASE}",
        "--label",
        f"{STAND_IN_LABEL}={stand_in.description}",
        "-t",
        stand_in.image,
        "-t",
        f"{STAND_IN_NAMESPACE}/{repository}:{tag or 'latest'}",
        str(STAND_IN_DIR),
        timeout=900,
        env={"DOCKER_BUILDKIT": "0"},
    )
