"""When `models.norms.mixed.mixed_norm` sends a CUDA call to the Triton kernels: only where their launches
are traced, captured or batched, since a plain eager call is host-bound and the composite is faster there.

The rule itself needs no GPU; tests of the CUDA dispatch are in test_mixed_triton.py.
"""

from __future__ import annotations

import os

import pytest
import torch

from models.norms import mixed


def test_a_plain_eager_call_keeps_the_composite() -> None:
    assert mixed.TRITON_IN_PLAIN_EAGER is False
    assert not mixed._triton_pays_off()


def test_switching_plain_eager_calls_on_sends_them_to_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mixed, "TRITON_IN_PLAIN_EAGER", True)
    assert mixed._triton_pays_off()


def test_a_torch_func_transform_sends_calls_to_the_kernels() -> None:
    seen: list[bool] = []
    torch.func.vmap(lambda t: (seen.append(mixed._triton_pays_off()), t)[1])(torch.zeros(2, 3))
    assert seen == [True]


def test_a_call_traced_by_torch_compile_goes_to_the_kernels() -> None:
    def flagged(x: torch.Tensor) -> torch.Tensor:
        return x + 1 if mixed._triton_pays_off() else x - 1

    torch._dynamo.reset()
    # backend="eager": Dynamo traces the call (what decides the path) without generating code.
    assert torch.compile(flagged, backend="eager", fullgraph=True)(torch.zeros(2)).tolist() == [1.0, 1.0]
    assert flagged(torch.zeros(2)).tolist() == [-1.0, -1.0]


def test_a_call_during_cuda_graph_capture_goes_to_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert mixed._triton_pays_off()


def test_the_environment_chooses_the_gpu_kernel_mode_and_a_typo_names_the_choices() -> None:
    assert mixed.gpu_kernel_mode({}) == "auto"
    assert mixed.gpu_kernel_mode({"NORMLAB_GPU_NORM_KERNELS": " Always "}) == "always"
    assert mixed.gpu_kernel_mode({"NORMLAB_GPU_NORM_KERNELS": "off"}) == "off"
    with pytest.raises(ValueError, match="auto, always, off; got 'sometimes'"):
        mixed.gpu_kernel_mode({"NORMLAB_GPU_NORM_KERNELS": "sometimes"})


def test_importing_with_the_kernels_off_or_always_sets_both_switches() -> None:
    import subprocess
    import sys

    def switches(mode: str) -> str:
        code = "from models.norms import mixed; print(mixed.TRITON_ON_CUDA, mixed.TRITON_IN_PLAIN_EAGER)"
        env = {**os.environ, "NORMLAB_GPU_NORM_KERNELS": mode}
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True
        ).stdout.strip()

    assert switches("off") == "False False"
    assert switches("always") == "True True"
