"""A plugin's own backbone (examples/plugins/tiny_mlp_backbone.py) end to end: the child's check imports
it and reports its facts with its measured sizes; models.build_model builds it by name; it trains with a
built-in method's norm and with a plugin's; a spec naming it validates from the check's facts alone, as
the API validates it, and an unknown model is still refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from torch.nn import functional as F

from models import build_model
from normlab import REGISTRY
from normlab.loading import PluginSource, import_plugin, keep_only_plugins, source_from_files
from studies.datasets import dataset_record
from studies.methods import norm_for_method
from studies.spec import StudySpec
from workers.plugins.check import check_plugin, register_builtins
from workers.training.config import TrainConfig, model_config

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plugins"


def _source(file: str) -> PluginSource:
    return source_from_files(file, {"__init__.py": (EXAMPLES / file).read_text()})


@pytest.fixture(autouse=True)
def _builtins_only_afterwards():
    register_builtins()
    yield
    keep_only_plugins(())


@pytest.fixture
def checked(tmp_path) -> tuple[PluginSource, dict]:
    source = _source("tiny_mlp_backbone.py")
    return source, check_plugin(source, tmp_path)


def _entry(source: PluginSource, result: dict) -> dict:
    """The spec's plugin entry as the server fills it in from the check."""
    return {
        "path": source.ref,
        "package": source.package,
        "sha256": source.sha256,
        "files": dict(source.files),
        "provides": result["provides"],
        "checks": result["checks"],
    }


def test_the_check_reports_the_backbone_s_facts_and_the_sizes_it_measured(checked):
    source, result = checked
    assert result["ok"], result["error"]
    (facts,) = result["provides"]["backbones"]
    assert facts["name"] == "tiny_mlp" and facts["family"] == "image" and facts["source"] == source.label
    assert facts["config_fields"] == [
        "dim",
        "norm",
        "norm_options",
        "image_size",
        "in_channels",
        "num_classes",
    ]
    assert facts["presets"] == {"tiny_mlp_wide": {"dim": 128}}
    # Its largest build: the wide preset on CIFAR-100's 3 x 32 x 32 images and 100 classes, with FiLM's
    # modulator (Linear(128, 32), Linear(32, 256)) as its norm.
    film = 128 * 32 + 32 + 32 * 256 + 256
    assert facts["parameters"] == (3 * 32 * 32 * 128 + 128) + film + (128 * 100 + 100)
    assert facts["activations"] >= 3 * 32 * 32
    assert result["checks"] == [{"backbone": "tiny_mlp", "ok": True, "problem": None}]


@pytest.mark.parametrize("method", ["frozen_ln", "rmsnorm"])
def test_build_model_builds_it_and_one_step_trains_it_with_the_method_s_norm(tmp_path, method):
    import_plugin(_source("rmsnorm.py"), tmp_path)
    import_plugin(_source("tiny_mlp_backbone.py"), tmp_path)
    choice = norm_for_method(method)
    cfg = TrainConfig(method=method, dataset="digits", model="tiny_mlp")
    fields = model_config(
        cfg,
        norm_kind=choice.kind,
        model_fields=dataset_record("digits").task_fields,
        method_options=choice.options,
    )
    torch.manual_seed(0)
    model = build_model("tiny_mlp", fields)
    norm = REGISTRY.norms.get(choice.kind).layer
    assert [type(m) for m in model.modules() if isinstance(m, norm)] == [norm]  # the method's, built once
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))  # a digits-shaped batch
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in model.parameters()]
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    assert build_model("tiny_mlp_wide", fields)[1].out_features == 128  # its preset's width


def test_a_spec_naming_it_validates_from_the_check_s_facts_and_an_unknown_model_is_refused(checked):
    source, result = checked
    keep_only_plugins(())  # as in the API process: the plugin's code is not imported, its facts are all
    entry = _entry(source, result)
    spec = StudySpec.model_validate(
        {
            "name": "t",
            "dataset": "digits",
            "model": "tiny_mlp",
            "methods": ["frozen_ln", "dyt"],
            "plugins": [entry],
        }
    )
    assert "tiny_mlp" not in REGISTRY.backbones
    with spec.plugins_visible():
        assert spec.model.backbone(spec.dataset) == "tiny_mlp"
    wide = StudySpec.model_validate(
        {
            "name": "t",
            "dataset": "digits",
            "model": {"preset": "tiny_mlp_wide", "overrides": {"dim": 64}},
            "methods": ["dyt"],
            "plugins": [entry],
        }
    )
    assert wide.model.overrides == {"dim": 64}
    with pytest.raises(ValidationError, match="unknown model 'tiny_mlq'"):
        StudySpec.model_validate(
            {"name": "t", "dataset": "digits", "model": "tiny_mlq", "methods": ["dyt"], "plugins": [entry]}
        )
    with pytest.raises(ValidationError, match="unknown model 'tiny_mlp'"):  # without the plugin
        StudySpec.model_validate({"name": "t", "dataset": "digits", "model": "tiny_mlp", "methods": ["dyt"]})
    with pytest.raises(ValidationError, match="tiny_mlp has no config field 'depth'"):
        StudySpec.model_validate(
            {
                "name": "t",
                "dataset": "digits",
                "model": {"preset": "tiny_mlp", "overrides": {"depth": 3}},
                "methods": ["dyt"],
                "plugins": [entry],
            }
        )
    with pytest.raises(ValidationError, match="is a image backbone but dataset 'sst2' holds text data"):
        StudySpec.model_validate(
            {"name": "t", "dataset": "sst2", "model": "tiny_mlp", "methods": ["dyt"], "plugins": [entry]}
        )


def test_a_backbone_that_ignores_the_method_s_norm_fails_the_check(tmp_path):
    plugin = (EXAMPLES / "tiny_mlp_backbone.py").read_text()
    fixed = plugin.replace('build_norm(config["norm"], dim, **config["norm_options"])', "nn.LayerNorm(dim)")
    assert fixed != plugin
    result = check_plugin(source_from_files("fixed.py", {"__init__.py": fixed}), tmp_path)
    assert not result["ok"] and result["stage"] == "checks"
    assert "backbone 'tiny_mlp'" in result["error"] and "holds no layernorm layer" in result["error"]
