"""A coded dataset plugin: 8x8 grey images of horizontal or vertical stripes, with noise, in two classes.

Name it in a spec's plugins and train on it like a built-in dataset:

    dataset: toy_stripes
    plugins: [examples/plugins/toy_dataset.py]

`build(split_seed)` returns the whole pool as one training split; NormLab carves the validation and test
splits from it by the study's split seed, scales and standardises the images as it does a built-in image
dataset's, and trains vit_lite_tiny on them. The data itself never depends on the seed: 400 images,
drawn once from a fixed generator, which vit_lite_tiny separates within ten epochs, in seconds on a CPU.
"""

from __future__ import annotations

import numpy as np

from normlab.arrays import ArrayDataset
from normlab.plugin import dataset

SIDE = 8
EXAMPLES = 400
DATA_SEED = 20240611  # fixes the images; the split seed only decides which of them validate and test


@dataset(
    "toy_stripes",
    family="image",
    task="image_classification",
    metric="accuracy",
    classes=2,
    default_model="vit_lite_tiny",
    task_fields={"image_size": SIDE, "in_channels": 1, "num_classes": 2},
    description="400 synthetic 8x8 grey images of horizontal (class 0) or vertical (class 1) stripes.",
)
def build(split_seed: int) -> ArrayDataset:
    rng = np.random.default_rng(DATA_SEED)
    labels = rng.integers(0, 2, size=EXAMPLES)
    phase = rng.integers(0, 2, size=EXAMPLES)  # which rows (or columns) are bright: 0, 2, 4, 6 or 1, 3, 5, 7
    stripes = (np.arange(SIDE)[None, :] + phase[:, None]) % 2  # (N, SIDE): 1 on the bright lines
    rows = np.repeat(stripes[:, :, None], SIDE, axis=2)  # horizontal stripes: constant along each row
    images = np.where(labels[:, None, None] == 0, rows, rows.transpose(0, 2, 1)).astype(np.float64)
    images = 0.2 + 0.6 * images + rng.normal(0.0, 0.15, size=images.shape)  # contrast 0.6, noise 0.15
    pixels = (np.clip(images, 0.0, 1.0) * 255).round().astype(np.uint8)  # (N, 8, 8) grey, 0..255
    return ArrayDataset("image_classification", train=(pixels, labels), classes=2)
