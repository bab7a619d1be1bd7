"""Training-image augmentation: what it keeps, when it flips, how it replays, and that eval never sees it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance, ImageOps

from studies.spec import KNOBS
from workers.data import DATASETS, get_dataset
from workers.training import TrainConfig, TrainingRun, augment_ops, load_checkpoint, run_training
from workers.training.augment import (
    AUGMENT_POLICIES,
    ImageAugmenter,
    build_augmenter,
    crop_padding_for,
    resolve_augment,
)
from workers.training.checkpoint import CHECKPOINT_FILE

MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
POLICIES = [p for p in AUGMENT_POLICIES if p != "none"]


def _augmenter(policy: str = "crop_flip", *, mirror: bool = False, seed: int = 0, size: int = 32, channels=3):
    return ImageAugmenter(
        policy,
        image_size=size,
        mirror_symmetric=mirror,
        mean=MEAN[:channels],
        std=STD[:channels],
        seed=seed,
    )


def _batch(n: int = 64, size: int = 32, channels: int = 3) -> torch.Tensor:
    return torch.randn(n, channels, size, size, generator=torch.Generator().manual_seed(123))


def _matching_shifts(original: torch.Tensor, out: torch.Tensor, fill: torch.Tensor, pad: int):
    """Every (dy, dx) with |dy|, |dx| <= pad for which `out` is `original` shifted by it, fill elsewhere."""
    c, h, w = original.shape
    padded = fill.view(c, 1, 1).expand(c, h + 2 * pad, w + 2 * pad).clone()
    padded[:, pad : pad + h, pad : pad + w] = original
    return [
        (dy - pad, dx - pad)
        for dy in range(2 * pad + 1)
        for dx in range(2 * pad + 1)
        if torch.equal(padded[:, dy : dy + h, dx : dx + w], out)
    ]


def _black() -> torch.Tensor:
    return -torch.tensor(MEAN) / torch.tensor(STD)


def test_the_policies_are_the_spec_knob_categories():
    assert (
        AUGMENT_POLICIES == KNOBS["augment"].categories == ("none", "crop_flip", "randaugment", "autoaugment")
    )


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("channels, size", [(3, 32), (1, 28), (1, 8)])
def test_every_policy_keeps_shape_dtype_and_the_pixel_range(policy, channels, size):
    augmenter = _augmenter(policy, mirror=True, size=size, channels=channels)
    unit = torch.rand(32, channels, size, size, generator=torch.Generator().manual_seed(0))
    x = (unit - torch.tensor(MEAN[:channels]).view(1, -1, 1, 1)) / torch.tensor(STD[:channels]).view(
        1, -1, 1, 1
    )
    out = augmenter(x)
    assert out.shape == x.shape and out.dtype == x.dtype
    pixels = out * torch.tensor(STD[:channels]).view(1, -1, 1, 1) + torch.tensor(MEAN[:channels]).view(
        1, -1, 1, 1
    )
    assert float(pixels.min()) >= -1e-5 and float(pixels.max()) <= 1 + 1e-5  # still an image in [0, 1]
    assert not torch.equal(out, x)


def test_crop_padding_is_4_px_at_32_and_scales_with_smaller_images():
    assert [crop_padding_for(size) for size in (32, 28, 16, 8)] == [4, 4, 2, 1]


def test_crop_shifts_content_by_at_most_4_px_and_pads_with_black():
    x = _batch(64)
    out = _augmenter("crop_flip", mirror=False)(x)
    shifts = [_matching_shifts(x[i], out[i], _black(), pad=4) for i in range(len(x))]
    assert all(len(found) == 1 for found in shifts), "each output is exactly one shift of its input"
    distinct = {found[0] for found in shifts}
    assert len(distinct) > 20  # offsets are drawn per sample, over the whole 9 x 9 range
    assert max(max(abs(dy), abs(dx)) for dy, dx in distinct) == 4


def test_flips_never_happen_where_classes_are_not_mirror_symmetric():
    x = _batch(64)
    for seed in range(3):
        out = _augmenter("crop_flip", mirror=False, seed=seed)(x)
        assert all(_matching_shifts(x[i], out[i], _black(), pad=4) for i in range(len(x)))
    mirrored = _augmenter("crop_flip", mirror=True)(x)
    flipped = [not _matching_shifts(x[i], mirrored[i], _black(), pad=4) for i in range(len(x))]
    assert all(
        _matching_shifts(x[i].flip(-1), mirrored[i], _black(), pad=4) for i in range(len(x)) if flipped[i]
    )
    assert 16 < sum(flipped) < 48  # about half


def test_digit_datasets_are_registered_as_not_mirror_symmetric_and_never_flip():
    digits = ("mnist", "mnist_5k", "digits", "svhn", "digits_c")
    mirror = ("fashion_mnist", "cifar10", "cifar100", "cifar10_c", "cifar10_c_hendrycks", "fashion_mnist_c")
    assert not any(DATASETS[name].mirror_symmetric for name in digits)
    assert all(DATASETS[name].mirror_symmetric for name in mirror)

    bundle = get_dataset("digits", download=False)
    assert not bundle.mirror_symmetric and bundle.pixel_mean is not None
    augmenter = build_augmenter("crop_flip", bundle, model="vit_lite_tiny", seed=0)
    assert augmenter is not None and not augmenter.flip and augmenter.padding == 1
    x = bundle.train.tensors[0][:128]
    out = augmenter(x)
    fill = -torch.tensor(bundle.pixel_mean) / torch.tensor(bundle.pixel_std)
    assert all(_matching_shifts(x[i], out[i], fill, pad=1) for i in range(len(x)))


@pytest.mark.parametrize("policy", POLICIES)
def test_the_same_seed_gives_the_same_batch_and_another_seed_another(policy):
    x = _batch(32)
    first = _augmenter(policy, mirror=True, seed=5)(x)
    assert torch.equal(first, _augmenter(policy, mirror=True, seed=5)(x))
    assert not torch.equal(first, _augmenter(policy, mirror=True, seed=6)(x))


@pytest.mark.parametrize("policy", POLICIES)
def test_restored_generator_state_replays_the_next_batches(policy):
    x = _batch(16)
    original = _augmenter(policy, mirror=True, seed=1)
    original(x)
    saved = original.state_dict()
    expected = [original(x) for _ in range(3)]
    restored = _augmenter(policy, mirror=True, seed=99)
    restored.load_state_dict(saved)
    assert all(torch.equal(restored(x), batch) for batch in expected)


def test_augmentation_state_of_another_policy_or_none_is_refused():
    with pytest.raises(ValueError, match="ran 'crop_flip', this run 'autoaugment'"):
        _augmenter("autoaugment").load_state_dict(_augmenter("crop_flip").state_dict())
    with pytest.raises(ValueError, match="no augmentation state"):
        _augmenter("crop_flip").load_state_dict(None)


def test_default_policy_is_crop_flip_on_the_paper_preset_only_and_images_only():
    assert resolve_augment(None, model="vit_lite_paper", task="image_classification") == "crop_flip"
    assert resolve_augment(None, model="vit_lite_tiny", task="image_classification") == "none"
    assert resolve_augment(None, model="vit_lite", task="image_classification") == "none"
    assert resolve_augment("autoaugment", model="vit_lite_tiny", task="image_classification") == "autoaugment"
    assert resolve_augment(None, model="encoder_paper", task="token_classification") == "none"
    with pytest.raises(ValueError, match="images only"):
        resolve_augment("crop_flip", model="encoder_paper", task="sequence_classification")
    with pytest.raises(ValueError, match="unknown augment policy"):
        resolve_augment("cutout", model="vit_lite_paper", task="image_classification")


def test_train_config_reads_augment_from_the_knobs_and_rejects_unknown_policies():
    cfg = TrainConfig.from_trial_config({"dataset": "digits", "knobs": {"augment": "randaugment"}})
    assert cfg.augment == "randaugment"
    with pytest.raises(ValueError, match="augment must be one of"):
        TrainConfig(augment="mixup")


# --- the ops against PIL, the library the reference recipe runs them with ------------------------------


def _pil_image() -> tuple[Image.Image, torch.Tensor]:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    pixels[:, :8] //= 3  # uneven histogram, so equalize and autocontrast have work to do
    return Image.fromarray(pixels), torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255.0


def _m(value: float) -> torch.Tensor:
    return torch.tensor([float(value)])


OPS = augment_ops.OPS
PIL_REFERENCES = {
    "posterize": (lambda u: OPS["posterize"](u, _m(5), 0.0), lambda im: ImageOps.posterize(im, 5)),
    "solarize": (lambda u: OPS["solarize"](u, _m(128), 0.0), lambda im: ImageOps.solarize(im, 128)),
    "equalize": (lambda u: OPS["equalize"](u, _m(0), 0.0), ImageOps.equalize),
    "autocontrast": (lambda u: OPS["autocontrast"](u, _m(0), 0.0), ImageOps.autocontrast),
    "invert": (lambda u: OPS["invert"](u, _m(0), 0.0), ImageOps.invert),
    "brightness": (
        lambda u: OPS["brightness"](u, _m(0.5), 0.0),
        lambda im: ImageEnhance.Brightness(im).enhance(1.5),
    ),
    "color": (lambda u: OPS["color"](u, _m(-0.6), 0.0), lambda im: ImageEnhance.Color(im).enhance(0.4)),
    "contrast": (
        lambda u: OPS["contrast"](u, _m(0.5), 0.0),
        lambda im: ImageEnhance.Contrast(im).enhance(1.5),
    ),
    "sharpness": (
        lambda u: OPS["sharpness"](u, _m(0.8), 0.0),
        lambda im: ImageEnhance.Sharpness(im).enhance(1.8),
    ),
    "translate_x": (
        lambda u: OPS["translate_x"](u, _m(3), 128 / 255),
        lambda im: im.transform(im.size, Image.AFFINE, (1, 0, 3, 0, 1, 0), fillcolor=(128, 128, 128)),
    ),
    "translate_y": (
        lambda u: OPS["translate_y"](u, _m(-5), 0.0),
        lambda im: im.transform(im.size, Image.AFFINE, (1, 0, 0, 0, 1, -5)),
    ),
    "rotate": (lambda u: OPS["rotate"](u, _m(10), 0.0), lambda im: im.rotate(10)),
    "shear_x (nearest)": (
        lambda u: augment_ops._shear(0, "nearest")(u, _m(0.3), 0.0),
        lambda im: im.transform(im.size, Image.AFFINE, (1, 0.3, 0, 0, 1, 0)),
    ),
    "shear_y (nearest)": (
        lambda u: augment_ops._shear(1, "nearest")(u, _m(-0.3), 0.0),
        lambda im: im.transform(im.size, Image.AFFINE, (1, 0, 0, -0.3, 1, 0)),
    ),
}


@pytest.mark.parametrize("name", sorted(PIL_REFERENCES))
def test_each_op_matches_pil_on_uint8_images_within_one_level(name):
    ours, theirs = PIL_REFERENCES[name]
    image, unit = _pil_image()
    expected = np.asarray(theirs(image)).astype(np.float64)
    got = ours(unit)[0].permute(1, 2, 0).numpy().astype(np.float64) * 255.0
    # PIL rounds every op to uint8; we stay in float, so up to one level apart.
    assert np.abs(got - expected).max() <= 1.2


# --- inside the training loop ---------------------------------------------------------------------------

RUN = TrainConfig(
    method="autonorm_s",
    dataset="digits",
    model="vit_lite_tiny",
    knobs={"t_freeze": 2, "eps_h": 0.0, "tau": 0.5},
    epochs=3,
    batch_size=32,
    eval_batch_size=256,
    lr=3e-3,
    warmup_epochs=1,
    mixup=0.8,
    augment="randaugment",
    max_steps_per_epoch=3,
    seed=3,
)


def test_training_batches_are_augmented_and_evaluation_batches_never(monkeypatch):
    run = TrainingRun(RUN)
    seen: list[tuple[int, ...]] = []
    real = run.augmenter
    assert real is not None and real.policy == "randaugment"

    def spy(x: torch.Tensor) -> torch.Tensor:
        seen.append(tuple(x.shape))
        return real(x)

    run.augmenter = spy  # type: ignore[assignment]
    run.train_one_epoch()  # trains, then evaluates the validation split
    assert seen == [(32, 1, 8, 8)] * run.steps_per_epoch
    run.evaluate(run.bundle.val)
    run.final_test_metrics()
    assert len(seen) == run.steps_per_epoch


def test_tiny_preset_runs_without_augmentation_unless_asked():
    assert TrainingRun(replace(RUN, augment=None)).augmenter is None
    assert TrainingRun(replace(RUN, augment="none")).augmenter is None


def test_a_resumed_run_replays_the_augmentation_exactly(tmp_path):
    def history(reports):
        return [
            {k: v for k, v in m.items() if k not in ("epoch_time_s", "epoch_cpu_s", "samples_per_s")}
            for m in reports
        ]

    straight: list[dict] = []
    run_training(RUN, checkpoint_dir=tmp_path / "straight", report=lambda m, d: straight.append(m))

    class Stop(Exception):
        pass

    def stop_after_epoch_1(metrics, checkpoint_dir):
        if metrics["epoch"] == 1:
            raise Stop

    with pytest.raises(Stop):
        run_training(RUN, checkpoint_dir=tmp_path / "resumed", report=stop_after_epoch_1)
    assert load_checkpoint(tmp_path / "resumed" / CHECKPOINT_FILE)["augmenter"]["policy"] == "randaugment"
    resumed: list[dict] = []
    run_training(RUN, checkpoint_dir=tmp_path / "resumed", report=lambda m, d: resumed.append(m))
    assert [m["epoch"] for m in resumed] == [2, 3]
    assert history(resumed) == history(straight[-2:])
    final_straight = load_checkpoint(tmp_path / "straight" / CHECKPOINT_FILE)
    final_resumed = load_checkpoint(tmp_path / "resumed" / CHECKPOINT_FILE)
    for name, tensor in final_straight["model"].items():
        assert torch.equal(tensor, final_resumed["model"][name]), name

    # The augmentation matters to the result: the same run without it ends elsewhere.
    plain: list[dict] = []
    run_training(
        replace(RUN, augment="none"), checkpoint_dir=tmp_path / "plain", report=lambda m, d: plain.append(m)
    )
    assert plain[-1]["train_loss"] != straight[-1]["train_loss"]
