"""`python -m workers.plugins.check`: import a study's plugins and check them, in a child process.

Reads `{"plugins": [stored source, ...], "user_datasets": [declaration, ...], "dim": 16}` as JSON on
stdin and writes one JSON line on stdout: for each plugin, whether it imported, the facts of every record
it registered (`provides`), each of its norm layers' conformance checks and each of its backbones' check
(whose measured sizes go into its facts); for each user dataset, the facts its files gave or the error.
The service runs it under a time and a memory limit (normlab.child.run_limited) and never imports the
plugin itself. Whatever the plugin prints goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from normlab import REGISTRY
from normlab.loading import PluginError, PluginSource, import_plugin, read_entry_point, records_of

__all__ = ["check_plugin", "check_user_dataset_declaration", "main"]


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def check_plugin(source: PluginSource, root: Path, *, dim: int = 16) -> dict[str, Any]:
    """Import one plugin and check what it registered; the result is JSON-ready."""
    from models.plugins.conformance import check_norm_layer

    result: dict[str, Any] = {"ref": source.ref, "ok": False, "stage": "import", "error": None}
    try:
        import_plugin(source, root)
    except (Exception, SystemExit) as exc:  # SystemExit: a script's exit() at import time
        last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" ({Path(last.filename).name}, line {last.lineno})" if last else ""
        result["error"] = f"could not import {source.ref}{where}: {_error(exc)}"
        return result
    provides = records_of(source.label)
    result["provides"] = provides
    if not any(provides.values()):
        result.update(
            stage="lookup", error=f"{source.ref} imported but registered nothing (see normlab.plugin)"
        )
        return result
    checks: list[dict[str, Any]] = []
    failures: list[str] = []
    for facts in provides["norms"]:
        record = REGISTRY.norms.get(facts["name"])
        report = check_norm_layer(record.layer, dim=dim)  # type: ignore[arg-type]
        checks.append({"norm": record.name, "checks": [asdict(c) for c in report.checks], "ok": report.ok})
        functional = next((c for c in report.checks if c.name == "functional"), None)
        # The layer's own declaration, or a failed torch.func check: one seed per trial with it.
        facts["supports_functional"] = bool(record.supports_functional and functional and functional.passed)
        if report.ok:
            facts["parameters"] = _parameter_polynomial(record.layer)
        if not report.ok:
            failures.append(f"norm layer {record.name!r}: {report.describe()}")
    for facts in provides["backbones"]:
        problem = _check_backbone(facts)
        checks.append({"backbone": facts["name"], "ok": problem is None, "problem": problem})
        if problem is not None:
            failures.append(f"backbone {facts['name']!r}: {problem}")
    for facts in provides["datasets"]:
        problem = _check_dataset_plugin(facts["name"])
        if problem is not None:
            failures.append(f"dataset {facts['name']!r}: {problem}")
    result["checks"] = checks
    if failures:
        result.update(stage="checks", error="; ".join(failures))
        return result
    result.update(ok=True, stage=None)
    return result


def _parameter_polynomial(layer: Any) -> list[float]:
    """(c2, c1, c0) with parameters(dim) = c2 * dim**2 + c1 * dim + c0, through three widths: exact for
    the linear and quadratic counts norm layers have (affine vectors, a d x d/4 selector)."""
    import numpy as np

    widths = (16, 32, 64)
    counts = [sum(p.numel() for p in layer(width).parameters()) for width in widths]
    return [float(c) for c in np.polyfit(widths, counts, 2)]


def _check_backbone(facts: dict[str, Any]) -> str | None:
    """Build, run and measure the backbone on its family's datasets (models.plugins.backbone_check); its
    sizes go into its facts, for the memory estimate. The problem, or None."""
    from models.plugins.backbone_check import check_backbone

    record = REGISTRY.backbones.get(facts["name"])
    tasks = [dict(d.task_fields) for d in REGISTRY.datasets if d.family == record.family and d.task_fields]
    report = check_backbone(record, tasks)
    if report.ok:
        facts.update(parameters=report.parameters, activations=report.activations)
    return report.problem


def _check_item(item: Mapping[str, Any], root: Path, *, dim: int) -> dict[str, Any]:
    """One request item: a stored source, or an installed plugin's entry point (read here, not in the API)."""
    if "entry_point" in item:
        try:
            source = read_entry_point(item["entry_point"])
        except (PluginError, Exception) as exc:
            return {
                "ref": f"entry_point:{item['entry_point']}",
                "ok": False,
                "stage": "import",
                "error": _error(exc),
            }
    else:
        source = PluginSource.from_json(item["source"])
    return {**check_plugin(source, root, dim=dim), "source": source.to_json()}


def _check_dataset_plugin(name: str) -> str | None:
    """Build the dataset once (split seed 0) the way a trial would; the problem, or None."""
    from workers.data.registry import get_dataset

    try:
        get_dataset(name)
    except (Exception, SystemExit) as exc:
        return _error(exc)
    return None


def check_user_dataset_declaration(declaration: Mapping[str, Any]) -> dict[str, Any]:
    from workers.data.user_files import check_user_dataset

    name = declaration.get("name")
    try:
        return {"name": name, "ok": True, "facts": check_user_dataset(declaration)}
    except (Exception, SystemExit) as exc:
        return {"name": name, "ok": False, "error": str(exc) if isinstance(exc, ValueError) else _error(exc)}


def _result_channel():  # type: ignore[no-untyped-def]
    """The real stdout, for the JSON line; fd 1 becomes stderr, so a plugin's prints cannot corrupt it."""
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return channel


def register_builtins() -> None:
    """The built-in records, so that a plugin taking a built-in's name fails as it would in a trial."""
    import models.norms  # noqa: F401  (models registers the built-in norm layers and backbones)
    import studies.backbones
    import studies.datasets
    import studies.knobs  # noqa: F401


def main() -> int:
    channel = _result_channel()
    register_builtins()
    request = json.loads(sys.stdin.read())
    dim = int(request.get("dim", 16))
    with tempfile.TemporaryDirectory(prefix="normlab-plugin-check-") as root:
        plugins = [_check_item(item, Path(root), dim=dim) for item in request.get("plugins", ())]
    datasets = [check_user_dataset_declaration(d) for d in request.get("user_datasets", ())]
    channel.write(json.dumps({"plugins": plugins, "user_datasets": datasets}) + "\n")
    channel.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
