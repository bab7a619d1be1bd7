"""Write docs/paper_costs.md: the predicted GPU-hours of every paper-size catalog study.

    python scripts/paper_costs.py            # rewrites docs/paper_costs.md
    python scripts/paper_costs.py --check    # exits 1 when the file is out of date (the tests run this)

The figures come from studies.catalog.cost: step rates measured on an H200 (BENCHMARKS.md), extrapolated
where the study's methods, image size or depth differ, and no figure where nothing was measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from studies.catalog import claim_ids, load_catalog_spec, spec_path, study_claim
from studies.catalog.cost import predicted_gpu_cost

OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "paper_costs.md"


def _hours(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def render() -> str:
    lines = [
        "# Paper-size catalog studies: predicted GPU-hours",
        "",
        "Written by `scripts/paper_costs.py` from `studies/catalog/cost.py`. One configuration was measured",
        "(ViT-Lite paper size, 32 x 32 inputs, batch 128, bf16, one eager trial on an NVIDIA H200; see",
        "BENCHMARKS.md); every other figure is extrapolated from it, and the `measured` column says which.",
        "Training samples only, one trial at a time (packing several trials on a GPU, CUDA graphs or seed",
        "batching shorten these several-fold; see BENCHMARKS.md). Claims that share a study are listed once.",
        "",
        "| claim | dataset | trials | GPU-hours, no early stopping | GPU-hours with ASHA | measured | basis |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for claim in claim_ids():
        if study_claim(claim, "paper") != claim or not spec_path(claim, "paper").exists():
            continue
        spec = load_catalog_spec(claim, "paper")
        cost = predicted_gpu_cost(spec)
        measured = (
            "yes" if cost.measured else ("extrapolated" if cost.hours_no_stopping is not None else "no")
        )
        lines.append(
            f"| `{claim}` | {spec.dataset} | {spec.planned_trials()} | {_hours(cost.hours_no_stopping)} | "
            f"{_hours(cost.hours_with_asha)} | {measured} | {cost.basis[0]} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/paper_costs.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT} is out of date: run python scripts/paper_costs.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
