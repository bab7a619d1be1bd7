"""What a claim's verdict depends on, as hashes: a report records them when it is written, and a report
whose recorded hashes differ from the tree's is stale (re-running its study could give another verdict).

Three parts, each a sha256, so a stale report can say why:

- `check_code`: the code that turns a study's trials into a verdict (CHECK_CODE below), hashed over the
  files' paths relative to the source root and their contents (line endings normalised), in path order;
- `catalog_entry`: the claim's own entry of claims.yaml and the convergence level of its spec's dataset,
  canonicalised (key order, comments and layout of the YAML do not count; another claim's entry does not);
- `spec`: the text of the spec file the claim's study runs at the size (its own, or its host's).

The training path (models, workers) is not hashed: it changes what a study measures, not how a verdict
is read from the measurements; a report's git revision records it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from studies.catalog.claims import CLAIMS_FILE
from studies.catalog.convergence import CONVERGENCE_FILE

__all__ = [
    "CHECK_CODE",
    "NO_FINGERPRINT",
    "SOURCE_ROOT",
    "Fingerprint",
    "check_code_files",
    "check_code_hash",
    "claim_fingerprint",
    "staleness",
]

# The folder that holds the `studies` package (the source tree's root, or site-packages when installed).
SOURCE_ROOT = Path(__file__).resolve().parents[2]

# Everything a verdict is computed by, relative to SOURCE_ROOT. Rendering (studies.report.render*,
# studies.tables) and the claim model's parsing are left out: they change how a report reads, not what
# it decides. Each glob and why it is here:
CHECK_CODE: tuple[str, ...] = (
    "studies/claims/**/*.py",  # the checks, their preconditions and sensitivity tables
    "studies/stats/**/*.py",  # intervals, tests, Holm adjustment, power and equivalence sizing
    "studies/evidence/**/*.py",  # the per-trial evidence the checks read (freeze, gates, ranks)
    "studies/report/judge.py",  # runs a claim's preconditions, check, sensitivity and power
    "studies/report/build.py",  # what the verdict is about (scope), the index's grouping
    "studies/convergence.py",  # what "the reference converged" means
    "studies/catalog/lint.py",  # a claim its dataset cannot express is "not tested"
)
NO_FINGERPRINT = "no fingerprint: predates fingerprinting"
_REASONS = {
    "check_code": "check code changed",
    "catalog_entry": "catalog entry changed",
    "spec": "spec changed",
}


@dataclass(frozen=True)
class Fingerprint:
    """The hashes a report's verdict depends on (see the module docstring)."""

    check_code: str
    catalog_entry: str
    spec: str

    @property
    def claim(self) -> str:
        """One hash of the three parts: equal exactly when all three are."""
        return _sha256(f"{self.check_code}\n{self.catalog_entry}\n{self.spec}".encode())

    def to_json(self) -> dict[str, str]:
        return {**asdict(self), "claim": self.claim}

    @classmethod
    def from_json(cls, data: Any) -> Fingerprint | None:
        """The fingerprint a report recorded, or None where it has none (or an unreadable one)."""
        if not isinstance(data, Mapping):
            return None
        parts = {name: value for name in _REASONS if isinstance(value := data.get(name), str) and value}
        return cls(**parts) if len(parts) == len(_REASONS) else None


def check_code_files(root: Path = SOURCE_ROOT, patterns: Iterable[str] = CHECK_CODE) -> list[Path]:
    """The check code's files under `root`, sorted by relative path (compiled caches never count)."""
    found = {path for pattern in patterns for path in root.glob(pattern) if path.is_file()}
    return sorted(found, key=lambda path: path.relative_to(root).as_posix())


def check_code_hash(root: Path = SOURCE_ROOT, patterns: Iterable[str] = CHECK_CODE) -> str:
    digest = hashlib.sha256()
    for path in check_code_files(root, patterns):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(_normalised(path.read_bytes()) + b"\0")
    return digest.hexdigest()


def claim_fingerprint(
    claim_id: str,
    spec_file: Path,
    *,
    check_code: str | None = None,
    claims_file: Path = CLAIMS_FILE,
    convergence_file: Path = CONVERGENCE_FILE,
) -> Fingerprint:
    """The claim's fingerprint for the study `spec_file` runs (studies.catalog.spec_path(claim, size)).
    `check_code`: the check code's hash, when the caller fingerprints many claims against one tree."""
    has_spec = spec_file.is_file()
    spec_text = _normalised(spec_file.read_bytes()) if has_spec else b"(no spec file)"
    dataset = (_yaml(spec_text) or {}).get("dataset") if has_spec else None
    entry = {
        "claim": _claim_entries(claims_file).get(claim_id),
        "convergence": _convergence_levels(convergence_file).get(str(dataset)) if dataset else None,
    }
    return Fingerprint(
        check_code=check_code or check_code_hash(),
        catalog_entry=_sha256(json.dumps(entry, sort_keys=True, default=str).encode()),
        spec=_sha256(spec_text),
    )


def staleness(recorded: Any, current: Fingerprint) -> str | None:
    """Why a report that recorded `recorded` (its provenance's `fingerprint`) is stale against the
    tree's `current` fingerprint; None where it is current."""
    fingerprint = Fingerprint.from_json(recorded)
    if fingerprint is None:
        return NO_FINGERPRINT
    changed = [
        reason for part, reason in _REASONS.items() if getattr(fingerprint, part) != getattr(current, part)
    ]
    return "; ".join(changed) or None


def _normalised(content: bytes) -> bytes:
    """Line endings as LF, so a checkout on Windows hashes as one on Linux."""
    return content.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _yaml(content: bytes) -> Any:
    try:
        data = yaml.safe_load(content)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _claim_entries(claims_file: Path) -> dict[str, Any]:
    """claim id -> its raw entry in claims.yaml (as parsed, so comments and layout do not count)."""
    claims = _parsed(claims_file).get("claims")
    return {str(e.get("id")): e for e in claims if isinstance(e, dict)} if isinstance(claims, list) else {}


def _convergence_levels(convergence_file: Path) -> dict[str, Any]:
    levels = _parsed(convergence_file).get("levels")
    return levels if isinstance(levels, dict) else {}


def _parsed(path: Path) -> dict[str, Any]:
    try:
        content = path.read_bytes()
    except OSError:
        return {}
    return _cached_yaml(content) or {}


@lru_cache(maxsize=8)
def _cached_yaml(content: bytes) -> Any:
    """A catalog file parsed once per content (a page that serves the catalog sees an edit at once)."""
    return _yaml(content)
