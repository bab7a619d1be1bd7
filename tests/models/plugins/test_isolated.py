"""run_isolated: the conformance checks on a user's layer in a child process, with a time and memory limit."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from models.plugins import CHECKS
from models.plugins.isolated import IsolatedResult, check_target, run_isolated

# Generous: the child imports torch (seconds on a busy machine) before any check. A passing layer also
# pays for torch.func's first vmap, about 2 s more: those tests are marked slow.
TIMEOUT_S = 120.0

RMS_NORM = """
    import torch
    from torch import nn


    class RMSNorm(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
"""


def plugin(tmp_path: Path, source: str, name: str = "my_norm.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.mark.slow
@pytest.mark.process
def test_a_good_layer_file_passes_and_its_prints_do_not_corrupt_the_result(tmp_path: Path) -> None:
    path = plugin(
        tmp_path,
        RMS_NORM
        + """
    print("building a norm", flush=True)


    def make_norm(dim):
        print({"result": "not the result"})
        return RMSNorm(dim)
    """,
    )
    result = run_isolated(f"{path}:make_norm", timeout_s=TIMEOUT_S)
    assert result.ok, result.error
    assert (result.stage, result.error) == (None, None)
    assert [check["name"] for check in result.report] == list(CHECKS)
    assert all(check["passed"] for check in result.report)
    assert result.functional and result.summary == "all 6 checks passed"


@pytest.mark.slow
@pytest.mark.process
def test_a_module_path_naming_a_layer_class_passes() -> None:
    result = run_isolated("torch.nn:LayerNorm", timeout_s=TIMEOUT_S)
    assert result.ok, result.error
    assert result.functional


@pytest.mark.process
def test_a_layer_failing_a_check_reports_stage_checks_and_which_check(tmp_path: Path) -> None:
    path = plugin(
        tmp_path,
        """
        from torch import nn


        class HalvesTheWidth(nn.LayerNorm):
            def forward(self, x):
                return super().forward(x)[..., : x.shape[-1] // 2]
        """,
    )
    result = run_isolated(f"{path}:HalvesTheWidth", timeout_s=TIMEOUT_S)
    assert not result.ok and result.stage == "checks"
    assert result.error is not None and "shape: (4, 16) gave (4, 8)" in result.error
    assert not next(check for check in result.report if check["name"] == "shape")["passed"]


@pytest.mark.process
def test_a_file_that_fails_to_import_reports_the_import_error(tmp_path: Path) -> None:
    path = plugin(tmp_path, "import not_a_real_module\n")
    result = run_isolated(f"{path}:make_norm", timeout_s=TIMEOUT_S)
    assert not result.ok and result.stage == "import" and result.report == ()
    assert (
        result.error == f"could not import {path}: ModuleNotFoundError: No module named 'not_a_real_module'"
    )


@pytest.mark.process
def test_a_missing_factory_is_reported_by_name(tmp_path: Path) -> None:
    path = plugin(tmp_path, RMS_NORM)
    result = run_isolated(f"{path}:make_norm", timeout_s=TIMEOUT_S)
    assert not result.ok and result.stage == "lookup"
    assert result.error == f"no callable make_norm in {path}"


@pytest.mark.process
def test_a_factory_that_sleeps_is_killed_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    path = plugin(
        tmp_path,
        f"""
        import os
        import time

        from torch import nn


        def make_norm(dim):
            with open({str(pid_file)!r}, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)
            return nn.LayerNorm(dim)
        """,
    )
    started = time.monotonic()
    result = run_isolated(f"{path}:make_norm", timeout_s=3)
    assert time.monotonic() - started < 30  # killed, not waited for
    assert not result.ok and result.stage == "timeout"
    assert result.error is not None and result.error.startswith("timed out after 3 s")
    if pid_file.exists():  # the child reached the factory before the limit (torch imported in time)
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text()), 0)


@pytest.mark.process
def test_a_factory_allocating_past_the_memory_limit_reports_memory(tmp_path: Path) -> None:
    # torch.empty reserves address space without touching it: past the limit, harmless without one.
    path = plugin(
        tmp_path,
        """
        import torch
        from torch import nn


        def make_norm(dim):
            table = torch.empty(8 * 2**30, dtype=torch.uint8)
            return nn.LayerNorm(dim)
        """,
    )
    result = run_isolated(f"{path}:make_norm", timeout_s=TIMEOUT_S, memory_mb=2048)
    assert not result.ok and result.stage == "memory"
    assert result.error is not None and result.error.startswith("ran out of memory (limit 2048 MB)")
    assert "can't allocate memory" in result.error


def test_a_target_without_a_factory_name_is_refused_before_any_process_starts() -> None:
    result = run_isolated("my_norm.py", timeout_s=TIMEOUT_S)
    assert result == IsolatedResult(
        ok=False,
        stage="lookup",
        error="target 'my_norm.py' must name a factory: 'path/to/file.py:factory' or 'package.module:factory'",
    )


def test_the_child_body_announces_import_lookup_and_checks_in_order(tmp_path: Path) -> None:
    path = plugin(tmp_path, RMS_NORM, name="announced_norm.py")
    stages: list[str] = []
    result = check_target(f"{path}:RMSNorm", on_stage=stages.append)
    assert result.ok, result.error
    assert stages == ["import", "lookup", "checks"]


def test_a_layer_instance_is_not_taken_for_a_factory(tmp_path: Path) -> None:
    path = plugin(tmp_path, "from torch import nn\n\nnorm = nn.LayerNorm(16)\n", name="instance_norm.py")
    result = check_target(f"{path}:norm")
    assert not result.ok and result.stage == "lookup"
    assert result.error is not None and "is a layer instance" in result.error


def test_results_survive_the_json_round_trip() -> None:
    result = IsolatedResult(
        ok=True,
        report=({"name": "functional", "passed": False, "detail": "x", "fatal": False, "skipped": True},),
        summary="functional (not fatal): x",
    )
    assert IsolatedResult.from_dict(result.as_dict()) == result
    assert not result.functional
