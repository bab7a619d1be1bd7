"""The pixel-space ops of AutoAugment and RandAugment, as torch re-implementations of the PIL ones.

Every op maps (k, C, H, W) images in [0, 1], a per-sample magnitude (k,) and a fill in [0, 1] to images of
the same shape; on uint8 inputs each matches PIL within one grey level (tests compare them), except that
bicubic shear blends into the fill at the edges where PIL cuts off. OPS names them all; a plan
(workers.training.augment_policies) refers to an op by its index in OP_NAMES.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

__all__ = ["OPS", "OP_ID", "OP_NAMES", "Op"]

Op = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


def _grey(u: torch.Tensor) -> torch.Tensor:
    """ITU-R 601 luma as PIL's convert("L") computes it; (k, 1, H, W)."""
    if u.shape[1] == 1:
        return u
    return 0.299 * u[:, 0:1] + 0.587 * u[:, 1:2] + 0.114 * u[:, 2:3]


def _blend(u: torch.Tensor, degenerate: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """PIL ImageEnhance: degenerate + factor * (image - degenerate), clipped; factor (k,)."""
    return (degenerate + factor.view(-1, 1, 1, 1) * (u - degenerate)).clamp(0.0, 1.0)


def _brightness(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    return _blend(u, torch.zeros_like(u), 1.0 + m)


def _color(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    return _blend(u, _grey(u).expand_as(u), 1.0 + m)  # a grey image is its own grey version: no-op


def _contrast(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    mean = _grey(u).mean(dim=(1, 2, 3), keepdim=True)  # (k, 1, 1, 1)
    return _blend(u, mean.expand_as(u), 1.0 + m)


def _sharpness(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # PIL's SMOOTH filter (centre 5, neighbours 1, / 13); border pixels keep their value.
    c = u.shape[1]
    kernel = torch.ones(c, 1, 3, 3, device=u.device, dtype=u.dtype)
    kernel[:, :, 1, 1] = 5.0
    smooth = F.conv2d(u, kernel / 13.0, groups=c)  # (k, C, H - 2, W - 2)
    degenerate = u.clone()
    degenerate[:, :, 1:-1, 1:-1] = smooth
    return _blend(u, degenerate, 1.0 + m)


def _levels(u: torch.Tensor) -> torch.Tensor:
    """[0, 1] -> integer levels 0..255 (the uint8 image PIL would hold)."""
    return (u * 255.0).round().clamp(0, 255).to(torch.int64)


def _posterize(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    bits = m.round().to(torch.int64).view(-1, 1, 1, 1)  # keep the top `bits` bits of each level
    step = torch.pow(2, 8 - bits)
    return (torch.div(_levels(u), step, rounding_mode="floor") * step).to(u.dtype) / 255.0


def _solarize(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # PIL ImageOps.solarize: levels at or above the threshold (0..256) are inverted.
    above = _levels(u) >= m.view(-1, 1, 1, 1)
    return torch.where(above, 1.0 - u, u)


def _invert(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    return 1.0 - u


def _autocontrast(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # Per image and channel: stretch [min, max] to [0, 1]; a flat channel stays as it is.
    low = u.amin(dim=(2, 3), keepdim=True)
    high = u.amax(dim=(2, 3), keepdim=True)
    spread = high - low
    stretched = (u - low) / torch.where(spread > 0, spread, torch.ones_like(spread))
    return torch.where(spread > 0, stretched, u)


def _equalize(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # PIL ImageOps.equalize per image and channel: lut[i] = (step // 2 + #pixels below level i) // step with
    # step = (#pixels - #pixels at the highest level) // 255; identity when step is 0.
    k, c, h, w = u.shape
    levels = _levels(u).view(k, c, h * w)  # (k, C, HW)
    hist = torch.zeros(k, c, 256, device=u.device, dtype=torch.int64)
    hist.scatter_add_(2, levels, torch.ones_like(levels))  # (k, C, 256)
    top_count = hist.gather(2, levels.amax(dim=2, keepdim=True))  # (k, C, 1)
    step = torch.div(h * w - top_count, 255, rounding_mode="floor")
    below = torch.cumsum(hist, dim=2) - hist  # pixels strictly below each level
    safe_step = torch.where(step > 0, step, torch.ones_like(step))
    lut = torch.div(torch.div(step, 2, rounding_mode="floor") + below, safe_step, rounding_mode="floor")
    mapped = lut.clamp(0, 255).gather(2, levels)
    out = torch.where(step > 0, mapped, levels)
    return (out.to(u.dtype) / 255.0).view(k, c, h, w)


def _warp(u: torch.Tensor, matrix: torch.Tensor, shift: torch.Tensor, fill: float, mode: str) -> torch.Tensor:
    """Resample with the output-to-input pixel map `input = matrix @ output + shift` ((k, 2, 2), (k, 2)),
    pixel (x, y) = (column, row) indices; pixels mapped from outside the image get `fill`."""
    h, w = u.shape[-2:]
    # affine_grid works in normalised coordinates: pixel = S norm + c with S = diag(w/2, h/2) and c the
    # centre, so theta = [S^-1 A S | S^-1 (A c + b - c)]. Python scalars: no host-to-device copies.
    sx, sy, cx, cy = w / 2.0, h / 2.0, (w - 1) / 2.0, (h - 1) / 2.0
    a00, a01, a10, a11 = matrix[:, 0, 0], matrix[:, 0, 1], matrix[:, 1, 0], matrix[:, 1, 1]
    row_x = torch.stack([a00, a01 * (sy / sx), (a00 * cx + a01 * cy + shift[:, 0] - cx) / sx], -1)
    row_y = torch.stack([a10 * (sx / sy), a11, (a10 * cx + a11 * cy + shift[:, 1] - cy) / sy], -1)
    theta = torch.stack([row_x, row_y], 1)  # (k, 2, 3)
    grid = F.affine_grid(theta, list(u.shape), align_corners=False)
    # Zero padding of (u - fill), shifted back: the outside reads as `fill`.
    return (F.grid_sample(u - fill, grid, mode=mode, padding_mode="zeros", align_corners=False) + fill).clamp(
        0.0, 1.0
    )


def _eye(m: torch.Tensor) -> torch.Tensor:
    return torch.eye(2, device=m.device, dtype=m.dtype).expand(m.shape[0], 2, 2).clone()


def _shear(axis: int, mode: str) -> Op:
    def shear(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
        # PIL AFFINE (1, m, 0, 0, 1, 0): x_in = x + m * y (and the y analogue) in PIL's pixel-corner
        # coordinates; in pixel-index coordinates (centres at integers) that adds m / 2.
        matrix = _eye(m)
        matrix[:, axis, 1 - axis] = m
        shift = torch.zeros(m.shape[0], 2, device=m.device, dtype=m.dtype)
        shift[:, axis] = 0.5 * m
        return _warp(u, matrix, shift, fill, mode)

    return shear


def _translate(axis: int) -> Op:
    def translate(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
        shift = torch.zeros(m.shape[0], 2, device=m.device, dtype=m.dtype)
        shift[:, axis] = m  # pixels; PIL AFFINE (1, 0, t, 0, 1, 0): x_in = x + t
        return _warp(u, _eye(m), shift, fill, "nearest")

    return translate


def _rotate(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    # PIL rotate(degrees): counter-clockwise about the centre, nearest neighbour. With rows growing
    # downwards the output-to-input map is [[cos, -sin], [sin, cos]] about the centre.
    h, w = u.shape[-2:]
    angle = torch.deg2rad(m)
    cos, sin = torch.cos(angle), torch.sin(angle)
    matrix = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (k, 2, 2)
    cx, cy = (w - 1) / 2.0, (h - 1) / 2.0
    shift = torch.stack([cx - (cos * cx - sin * cy), cy - (sin * cx + cos * cy)], -1)  # about the centre
    return _warp(u, matrix, shift, fill, "nearest")


def _identity(u: torch.Tensor, m: torch.Tensor, fill: float) -> torch.Tensor:
    return u


# Every op either policy may pick; index = op id in a plan.
OPS: dict[str, Op] = {
    "identity": _identity,
    "shear_x": _shear(0, "bicubic"),
    "shear_y": _shear(1, "bicubic"),
    "translate_x": _translate(0),
    "translate_y": _translate(1),
    "rotate": _rotate,
    "brightness": _brightness,
    "color": _color,
    "contrast": _contrast,
    "sharpness": _sharpness,
    "posterize": _posterize,
    "solarize": _solarize,
    "autocontrast": _autocontrast,
    "equalize": _equalize,
    "invert": _invert,
}
OP_NAMES = tuple(OPS)
OP_ID = {name: i for i, name in enumerate(OP_NAMES)}
