"""The CIFAR-10-C style corruptions: shape- and range-preserving, reproducible, stronger with severity."""

from __future__ import annotations

import numpy as np
import pytest

from workers.data.corruptions import CORRUPTIONS, DEFAULT_CORRUPTIONS, corrupt


@pytest.fixture
def images() -> np.ndarray:
    rng = np.random.default_rng(0)
    smooth = rng.uniform(0.2, 0.8, size=(6, 16, 16, 3))
    smooth[:, :, 8:] = 0.1  # an edge, so blurs have something to smear
    return smooth


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corruption_keeps_shape_stays_in_unit_range_and_changes_the_image(
    name: str, images: np.ndarray
) -> None:
    out = corrupt(images, name, severity=3, seed=0)
    assert out.shape == images.shape and out.dtype == np.float32
    assert out.min() >= 0.0 and out.max() <= 1.0
    assert np.abs(out - images).mean() > 1e-3


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corruption_is_reproducible_from_its_seed(name: str, images: np.ndarray) -> None:
    np.testing.assert_array_equal(corrupt(images, name, seed=5), corrupt(images, name, seed=5))


@pytest.mark.parametrize(
    "name", ["gaussian_noise", "shot_noise", "impulse_noise", "motion_blur", "brightness", "contrast"]
)
def test_higher_severity_distorts_more(name: str, images: np.ndarray) -> None:
    distortion = [np.abs(corrupt(images, name, severity=s, seed=1) - images).mean() for s in (1, 3, 5)]
    assert distortion[0] < distortion[1] < distortion[2]


def test_brightness_raises_the_value_channel_and_keeps_hue(images: np.ndarray) -> None:
    out = corrupt(images, "brightness", severity=3)
    value_before, value_after = images.max(-1), out.max(-1)
    np.testing.assert_allclose(value_after, np.minimum(value_before + 0.15, 1.0), atol=1e-6)
    # channel ratios (hue and saturation) are unchanged
    np.testing.assert_allclose(out / value_after[..., None], images / value_before[..., None], atol=1e-5)


def test_motion_blur_preserves_flat_regions_and_smears_edges() -> None:
    flat = np.full((2, 12, 12, 1), 0.5)
    np.testing.assert_allclose(corrupt(flat, "motion_blur"), 0.5, atol=1e-6)
    edge = np.zeros((1, 12, 12, 1))
    edge[:, :, 6:] = 1.0
    blurred = corrupt(edge, "motion_blur")
    assert np.abs(blurred - edge)[0, :, 4:8].max() > 0.05


def test_grey_images_work_too_and_defaults_are_the_paper_three() -> None:
    grey = np.random.default_rng(0).uniform(size=(3, 8, 8, 1))
    for name in DEFAULT_CORRUPTIONS:
        assert corrupt(grey, name).shape == grey.shape
    assert DEFAULT_CORRUPTIONS == ("gaussian_noise", "motion_blur", "brightness")


def test_bad_arguments_are_rejected(images: np.ndarray) -> None:
    with pytest.raises(KeyError, match="unknown corruption"):
        corrupt(images, "frost")
    with pytest.raises(ValueError, match="severity"):
        corrupt(images, "contrast", severity=6)
    with pytest.raises(ValueError, match=r"\(N, H, W, C\)"):
        corrupt(images[0], "contrast")


def _shifted_sum_reference(
    images: np.ndarray, angles_deg: np.ndarray, radius: int, sigma: float
) -> np.ndarray:
    """Direct definition: sum_k w_k * image(p + k * direction), bilinear sampling, edge clamping."""
    n, h, w, _ = images.shape
    weights = np.exp(-(np.arange(radius + 1) ** 2) / (2 * sigma**2))
    weights /= weights.sum()
    out = np.zeros_like(images)
    for k, weight in enumerate(weights):
        for i in range(n):
            angle = np.deg2rad(angles_deg[i])
            rows = np.clip(np.arange(h)[:, None] - k * np.sin(angle), 0, h - 1) + np.zeros((1, w))
            cols = np.clip(np.arange(w)[None, :] + k * np.cos(angle), 0, w - 1) + np.zeros((h, 1))
            r0, c0 = np.floor(rows).astype(int), np.floor(cols).astype(int)
            r1, c1 = np.minimum(r0 + 1, h - 1), np.minimum(c0 + 1, w - 1)
            fr, fc = (rows - r0)[..., None], (cols - c0)[..., None]
            image = images[i]
            top = image[r0, c0] * (1 - fc) + image[r0, c1] * fc
            bottom = image[r1, c0] * (1 - fc) + image[r1, c1] * fc
            out[i] += weight * (top * (1 - fr) + bottom * fr)
    return out


def test_motion_blur_equals_gaussian_weighted_shifted_copies_along_a_random_angle() -> None:
    from workers.data.corruptions import CORRUPTIONS as table

    images = np.random.default_rng(2).uniform(size=(4, 14, 14, 3))
    fast = table["motion_blur"](images, 3, np.random.default_rng(9))
    angles = np.random.default_rng(9).uniform(-45.0, 45.0, size=4)
    np.testing.assert_allclose(fast, _shifted_sum_reference(images, angles, radius=10, sigma=2.0), atol=1e-5)
