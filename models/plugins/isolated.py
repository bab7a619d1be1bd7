"""The conformance checks on a user's norm layer in a child process, under a time and a memory limit.

`run_isolated("path/to/file.py:factory")` starts `python -m models.plugins.isolated <target>`. The child's
stdout carries JSON lines only: each stage as it starts (`{"stage": "import"}`), then `{"result": {...}}`;
whatever the layer's code prints goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import resource
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import IO, Any, Literal

from normlab.child import last_line, out_of_memory, run_limited

__all__ = ["DEFAULT_MEMORY_MB", "DEFAULT_TIMEOUT_S", "IsolatedResult", "check_target", "run_isolated"]

Stage = Literal["import", "lookup", "checks", "timeout", "memory"]

# Covers the child's whole life: the interpreter, torch and models (about 3 s on a busy 2-core machine),
# then the checks (about 2 s, most of it torch.func's first vmap).
DEFAULT_TIMEOUT_S = 120.0
# RLIMIT_AS caps address space, not resident memory, and mapped shared libraries count in full. Measured
# with the CPU build of torch 2.13 and one thread: a whole run on nn.LayerNorm passes under a 640 MB limit
# (unlimited, its VmPeak is about 0.85 GB: allocators reserve more when they may), and under 512 MB torch
# does not import. A CUDA build maps libtorch_cuda, cuBLAS and cuDNN as well, several GB more (not measured
# here, no CUDA build on hand), so the default leaves room for it; a layer's real allocations for 16
# features are kilobytes, so a runaway one still ends at the limit.
DEFAULT_MEMORY_MB = 8192

MODULE = "models.plugins.isolated"
REPO_ROOT = Path(__file__).resolve().parents[2]
TARGET_FORMS = "'path/to/file.py:factory' or 'package.module:factory'"


@dataclass(frozen=True)
class IsolatedResult:
    ok: bool
    stage: Stage | None = None  # the stage that failed; None when ok
    error: str | None = None
    report: tuple[dict[str, Any], ...] = ()  # the checks (CheckResult fields), when they ran
    summary: str = ""  # ConformanceReport.describe(), when the checks ran

    @property
    def functional(self) -> bool:
        """The layer runs under torch.func; False means seeds_per_trial falls back to 1."""
        return any(check["name"] == "functional" and check["passed"] for check in self.report)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "report": list(self.report)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IsolatedResult:
        return cls(
            ok=bool(data["ok"]),
            stage=data.get("stage"),
            error=data.get("error"),
            report=tuple(data.get("report", ())),
            summary=data.get("summary", ""),
        )


def run_isolated(
    target: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB, dim: int = 16
) -> IsolatedResult:
    """Check the layer `target` names ('path/to/file.py:factory' or 'package.module:factory', the factory
    a callable `factory(dim) -> nn.Module` or a module class taking dim) in a fresh interpreter, killed
    after `timeout_s` and limited to `memory_mb` of address space. The child runs in the current working
    directory, so relative paths and module names resolve as they do here."""
    try:
        parse_target(target)
    except ValueError as exc:
        return IsolatedResult(ok=False, stage="lookup", error=str(exc))
    finished = run_limited(
        [sys.executable, "-m", MODULE, target, "--dim", str(dim)],
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        env=_child_environment(),
    )
    if finished.timed_out:
        stage = _read_lines(finished.stdout)[0]
        where = f"during {stage}" if stage else "while importing torch and the checks"
        return IsolatedResult(ok=False, stage="timeout", error=f"timed out after {timeout_s:g} s ({where})")
    return _interpret(finished.stdout, finished.stderr, finished.returncode, memory_mb=memory_mb)


def parse_target(target: str) -> tuple[str, str]:
    """(file path or module path, factory name); ValueError for any other form."""
    where, colon, name = target.rpartition(":")
    if not colon or not where or not name.isidentifier():
        raise ValueError(f"target {target!r} must name a factory: {TARGET_FORMS}")
    return where, name


def check_target(
    target: str, *, dim: int = 16, on_stage: Callable[[Stage], None] | None = None
) -> IsolatedResult:
    """Import the target, find its factory and run the checks, in THIS process (the child's body; use
    run_isolated for code not yet trusted). `on_stage` hears each stage as it starts."""
    from torch import nn

    from models.plugins.conformance import check_norm_layer

    announce = on_stage or (lambda stage: None)
    try:
        where, name = parse_target(target)
    except ValueError as exc:
        return IsolatedResult(ok=False, stage="lookup", error=str(exc))
    announce("import")
    try:
        module = _import(where)
    except (Exception, SystemExit) as exc:  # SystemExit: a script's exit() at import time
        if isinstance(exc, MemoryError) or out_of_memory(str(exc)):
            return IsolatedResult(
                ok=False, stage="memory", error=_memory_error(f"importing {where}: {_text(exc)}")
            )
        return IsolatedResult(ok=False, stage="import", error=f"could not import {where}: {_text(exc)}")
    announce("lookup")
    factory = getattr(module, name, None)
    if not callable(factory):
        return IsolatedResult(ok=False, stage="lookup", error=f"no callable {name} in {where}")
    if isinstance(factory, nn.Module):  # callable, but calling it would run forward(dim)
        return IsolatedResult(
            ok=False,
            stage="lookup",
            error=f"{name} in {where} is a layer instance; name a factory(dim) or a layer class taking dim",
        )
    announce("checks")
    report = check_norm_layer(factory, dim=dim)
    checks = tuple(asdict(check) for check in report.checks)
    starved = next((check for check in report.failed if out_of_memory(check.detail)), None)
    if starved is not None:  # the limit, not the layer's logic, decided this check
        error = _memory_error(f"in check {starved.name}: {starved.detail}")
        return IsolatedResult(ok=False, stage="memory", error=error, report=checks, summary=report.describe())
    return IsolatedResult(
        ok=report.ok,
        stage=None if report.ok else "checks",
        error=None if report.ok else report.describe(),
        report=checks,
        summary=report.describe(),
    )


def _import(where: str) -> ModuleType:
    if not (where.endswith(".py") or "/" in where or os.sep in where):
        return importlib.import_module(where)
    path = Path(where).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    name = f"normlab_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python source file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up while it executes
    sys.path.insert(0, str(path.parent))  # so the file imports its neighbours, as when run as a script
    spec.loader.exec_module(module)
    return module


def _child_environment() -> dict[str, str]:
    # After the caller's PYTHONPATH: the checks' own package is found from any working directory.
    paths = [p for p in (os.environ.get("PYTHONPATH"), str(REPO_ROOT)) if p]
    return {"PYTHONPATH": os.pathsep.join(paths)}


def _read_lines(stdout: str) -> tuple[Stage | None, IsolatedResult | None]:
    """The last stage the child announced, and its result if it got that far."""
    stage: Stage | None = None
    result = None
    for line in stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if "result" in message:
            result = IsolatedResult.from_dict(message["result"])
        elif "stage" in message:
            stage = message["stage"]
    return stage, result


def _interpret(stdout: str, stderr: str, returncode: int, *, memory_mb: int) -> IsolatedResult:
    stage, result = _read_lines(stdout)
    if result is not None:
        return result
    last = last_line(stderr)
    if out_of_memory(stderr):
        during = f"during {stage}" if stage else "while importing torch and the checks"
        return IsolatedResult(
            ok=False, stage="memory", error=f"ran out of memory (limit {memory_mb} MB) {during}: {last}"
        )
    how = (
        f"was killed by {signal.Signals(-returncode).name}" if returncode < 0 else f"exited with {returncode}"
    )
    if stage is None:
        return IsolatedResult(ok=False, stage="import", error=f"could not import {MODULE} ({how}): {last}")
    return IsolatedResult(ok=False, stage=stage, error=f"the checks process {how} during {stage}: {last}")


def _memory_error(detail: str) -> str:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return f"ran out of memory: {detail}"
    return f"ran out of memory (limit {soft // 2**20} MB): {detail}"


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _result_channel() -> IO[str]:
    """The real stdout, for the JSON lines; fd 1 becomes stderr, so the layer's prints (Python's or a C
    extension's) cannot corrupt them."""
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return channel


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("target", help=TARGET_FORMS)
    parser.add_argument("--dim", type=int, default=16, help="the layer's feature width")
    args = parser.parse_args(argv)
    channel = _result_channel()

    def announce(stage: Stage) -> None:
        channel.write(json.dumps({"stage": stage}) + "\n")

    result = check_target(args.target, dim=args.dim, on_stage=announce)
    channel.write(json.dumps({"result": result.as_dict()}) + "\n")
    channel.flush()
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
