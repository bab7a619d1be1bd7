"""The fused CPU kernel really builds where a C compiler exists, so the fused-vs-eager tests compare two paths."""

import os
import shutil

from models.norms._kernel_loader import fused_kernels_enabled, load_mixed_norm_library


def test_the_fused_kernel_builds_and_loads_when_gcc_is_present_and_it_is_not_disabled():
    if os.environ.get("NORMLAB_FUSED_NORMS") == "0":
        assert not fused_kernels_enabled()
        assert load_mixed_norm_library() is None
        return
    compiler = os.environ.get("CC") or "gcc"
    assert shutil.which(compiler), f"no C compiler ({compiler}) here: the fused path cannot be tested"
    assert load_mixed_norm_library() is not None


def test_the_kernel_source_ships_inside_the_package():
    from importlib.resources import files

    assert files("models.norms").joinpath("kernels/mixed_norm_cpu.c").is_file()


def test_setting_normlab_fused_norms_to_zero_disables_the_fused_path(monkeypatch):
    monkeypatch.setenv("NORMLAB_FUSED_NORMS", "0")
    assert not fused_kernels_enabled()
