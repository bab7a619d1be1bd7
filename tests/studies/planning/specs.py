"""Specs the planning tests share: the catalog's MNIST cpu study (with or without a sequential design) and
a CIFAR-10 study at the paper's model size, which the GPU cost model prices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from studies.spec import StudySpec, validate_spec_data

ROOT = Path(__file__).resolve().parents[3]
MNIST_CPU = ROOT / "studies" / "catalog" / "mnist_autonorm_s_level_with_frozen_ln" / "cpu.yaml"


def mnist_cpu(**changes: Any) -> dict[str, Any]:
    """The catalog's MNIST cpu spec as data; `changes` replace top-level fields (None removes one)."""
    data = {**yaml.safe_load(MNIST_CPU.read_text(encoding="utf-8")), **changes}
    return {key: value for key, value in data.items() if value is not None}


def sequential_mnist(**design: Any) -> StudySpec:
    """The MNIST cpu study with a sequential design instead of its 8 seeds (and without its claim, whose
    check judges fixed seeds)."""
    return validate_spec_data(mnist_cpu(seeds=None, claim=None, sequential=design))


def cifar10_paper(**changes: Any) -> StudySpec:
    """Two methods on CIFAR-10 with the paper-size ViT-Lite, which the cost model prices from its H200
    rates."""
    data = {
        "name": "cifar10-paper",
        "dataset": "cifar10",
        "model": "vit_lite_paper",
        "methods": ["autonorm_s", "frozen_ln"],
        "search": {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-3}},
        "num_samples": 4,
        "scheduler": {"type": "asha", "grace_period": 10, "reduction_factor": 3},
        "seeds": [0, 1, 2, 3, 4, 5, 6, 7],
        "budget": {"epochs": 100, "batch_size": 128},
        **changes,
    }
    return validate_spec_data({key: value for key, value in data.items() if value is not None})
