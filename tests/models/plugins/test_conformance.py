"""check_norm_layer: what a user's norm layer must do before a study may use it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from models.plugins import CHECKS, CheckResult, ConformanceReport, check_norm_layer

DIM = 16


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class HalvesTheWidth(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)[..., : x.shape[-1] // 2]


class AlwaysFloat32(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).float()


class DetachesItsInput(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.detach())


class UnusedParameter(nn.LayerNorm):
    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.gain = nn.Parameter(torch.ones(dim))  # never read in forward


class Noisy(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + 0.01 * torch.randn_like(x)


class CallsItem(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.abs().amax().item()
        return super().forward(x / max(scale, 1.0))


class BranchesOnData(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.mean() > 10:
            return x
        return super().forward(x)


class DeclaresNoFunctional(nn.LayerNorm):
    supports_functional = False


class Raises(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("this layer is broken")


def failed_fatally(report: ConformanceReport) -> set[str]:
    return {check.name for check in report.failed if check.fatal}


def result(report: ConformanceReport, name: str) -> CheckResult:
    return next(check for check in report.checks if check.name == name)


@pytest.mark.parametrize("make_layer", [nn.LayerNorm, RMSNorm], ids=["LayerNorm", "RMSNorm"])
def test_layernorm_and_an_rmsnorm_pass_every_check(make_layer: type[nn.Module]) -> None:
    report = check_norm_layer(make_layer, dim=DIM)
    assert [check.name for check in report.checks] == list(CHECKS)
    assert all(check.passed for check in report.checks), report.describe()
    assert report.ok and report.functional and report.max_seeds_per_trial is None
    assert report.describe() == "all 6 checks passed"


def test_a_layer_that_changes_the_width_fails_shape() -> None:
    report = check_norm_layer(HalvesTheWidth, dim=DIM)
    assert not report.ok
    assert failed_fatally(report) == {"shape"}
    assert result(report, "shape").detail.startswith("(4, 16) gave (4, 8)")
    assert "shape: (4, 16) gave (4, 8)" in report.describe()


def test_a_layer_that_always_returns_float32_fails_dtype() -> None:
    report = check_norm_layer(AlwaysFloat32, dim=DIM)
    assert failed_fatally(report) == {"dtype"}
    assert result(report, "dtype").detail == "float64 input gave float32 output"


def test_a_layer_that_detaches_its_input_fails_input_gradient() -> None:
    report = check_norm_layer(DetachesItsInput, dim=DIM)
    assert failed_fatally(report) == {"input_gradient"}
    assert "no gradient reached the input" in result(report, "input_gradient").detail


def test_an_unused_parameter_gets_no_gradient_and_fails_parameter_gradient() -> None:
    report = check_norm_layer(UnusedParameter, dim=DIM)
    assert failed_fatally(report) == {"parameter_gradient"}
    assert "no gradient for gain" in result(report, "parameter_gradient").detail


def test_a_layer_without_parameters_passes_parameter_gradient_and_says_so() -> None:
    report = check_norm_layer(lambda dim: nn.LayerNorm(dim, elementwise_affine=False), dim=DIM)
    check = result(report, "parameter_gradient")
    assert check.passed and "no trainable parameters" in check.detail
    assert report.ok and report.functional


def test_random_noise_in_forward_fails_deterministic() -> None:
    report = check_norm_layer(Noisy, dim=DIM)
    assert not report.ok
    assert failed_fatally(report) == {"deterministic"}
    assert "differ by up to" in result(report, "deterministic").detail


@pytest.mark.parametrize(
    ("make_layer", "error"),
    [(CallsItem, "calling .item()"), (BranchesOnData, "data-dependent control flow")],
    ids=["item", "control-flow"],
)
def test_a_layer_that_breaks_vmap_fails_functional_without_being_ruled_out(
    make_layer: type[nn.Module], error: str
) -> None:
    report = check_norm_layer(make_layer, dim=DIM)
    functional = result(report, "functional")
    assert not functional.passed and not functional.fatal and not functional.skipped
    assert error in functional.detail
    assert report.ok and not report.functional
    assert report.max_seeds_per_trial == 1
    assert "seeds_per_trial falls back to 1" in report.describe()


def test_a_layer_declaring_supports_functional_false_is_skipped_by_declaration() -> None:
    report = check_norm_layer(DeclaresNoFunctional, dim=DIM)
    functional = result(report, "functional")
    assert (functional.passed, functional.fatal, functional.skipped) == (False, False, True)
    assert "declares supports_functional = False" in functional.detail
    assert report.ok and not report.functional and report.max_seeds_per_trial == 1


def test_a_layer_that_raises_fails_every_check_with_the_exception_text_instead_of_raising() -> None:
    report = check_norm_layer(Raises, dim=DIM)
    assert not any(check.passed for check in report.checks)
    assert all("ValueError: this layer is broken" in check.detail for check in report.checks)
    described = report.describe()
    for name in set(CHECKS) - {"functional"}:
        assert f"{name}: raised ValueError: this layer is broken" in described
    assert "functional (not fatal): raised ValueError: this layer is broken" in described


def test_a_factory_that_returns_no_module_fails_every_check() -> None:
    report = check_norm_layer(lambda dim: torch.ones(dim), dim=DIM)  # type: ignore[arg-type, return-value]
    assert failed_fatally(report) == set(CHECKS) - {"functional"}
    assert "returned Tensor, not a torch.nn.Module" in result(report, "shape").detail


def test_a_layer_returning_no_tensor_fails_shape_with_what_it_returned() -> None:
    class ReturnsTuple(nn.LayerNorm):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
            return x, x

    assert "forward returned tuple, not a Tensor" in result(check_norm_layer(ReturnsTuple), "shape").detail


def test_the_checks_run_at_the_requested_width() -> None:
    widths: list[int] = []

    def make_layer(dim: int) -> nn.Module:
        widths.append(dim)
        return nn.LayerNorm(dim)

    assert check_norm_layer(make_layer, dim=24).ok
    assert set(widths) == {24}


def test_the_callers_random_stream_is_left_as_it_was() -> None:
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    check_norm_layer(Noisy, dim=DIM)
    assert torch.equal(torch.rand(3), expected)
