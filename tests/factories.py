"""What tests build again and again, in one place: specs to submit, studies and trial rows in the store."""

from __future__ import annotations

QUICK_SPEC_YAML = """
name: tiny
dataset: digits
model: vit_lite_tiny
methods: [autonorm_s, frozen_ln, dyt]
search:
  lr: {type: loguniform, low: 1.0e-4, high: 1.0e-2}
method_search:
  autonorm_s: {tau: 0.5, t_freeze: {type: int, low: 1, high: 3}}
num_samples: 2
seeds: [0, 1, 2]
budget: {epochs: 4, batch_size: 32}
"""
