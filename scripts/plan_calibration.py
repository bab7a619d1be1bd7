"""How well the plan predicts wall time: every finished study in one or more stores, its plan's predicted
wall time (the prior, as a plan for a new dataset and model gets it; and, where the same store holds other
finished studies of its dataset and model, the plan from their history) beside the measured one.

    python scripts/plan_calibration.py sqlite:////path/to/normlab.db [more database URLs] --cpus 2

Prints a Markdown table (BENCHMARKS.md's calibration section is this output). The measured wall time is
the study's started_at to finished_at, so it includes the driver's start, tuning and every look; a
sequential study's prediction is for the trials it actually ran, so that the table compares pace, not
the looks' luck.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from studies.planning import Cluster, History, plan_study, read_history, without_study
from studies.spec import StudySpec
from studies.store import StudyStatus, list_studies, list_trials, make_engine, session_scope


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database_urls", nargs="+", help="SQLAlchemy URLs of NormLab stores")
    parser.add_argument("--cpus", type=float, default=2.0, help="CPUs of the cluster the studies ran on")
    return parser.parse_args(argv)


def _ran_as(spec: StudySpec, final_seeds: dict[str, int]) -> StudySpec:
    """A sequential study as the fixed study of the seeds its looks gave: the plan prices what ran."""
    if spec.sequential is None:
        return spec
    most = max(final_seeds.values(), default=len(spec.seeds))
    data = spec.model_dump(mode="json")
    data.pop("sequential")
    data["seeds"] = list(range(most))
    return StudySpec.model_validate(data)


def rows(database_url: str, cluster: Cluster) -> list[list[str]]:
    out = []
    with session_scope(make_engine(database_url), readonly=True) as session:
        for study in list_studies(session):
            if study.status != StudyStatus.SUCCEEDED or not study.started_at or not study.finished_at:
                continue
            spec = StudySpec.model_validate(study.spec)
            finals = list_trials(session, study_id=study.id, phase="final")
            seeds = {m: len({t.seed for t in finals if t.method == m}) for m in spec.methods}
            ran = _ran_as(spec, seeds)
            history = read_history(session, ran)
            others = without_study(history, study.id)  # its own trials would predict it perfectly
            prior = plan_study(ran, history=History(), cluster=cluster, simulations=200).planned.wall_hours
            informed = plan_study(ran, history=others, cluster=cluster, simulations=200).planned.wall_hours
            measured = (study.finished_at - study.started_at).total_seconds() / 3600.0
            out.append(
                [
                    f"`{spec.name}`",
                    spec.dataset,
                    str(len(list_trials(session, study_id=study.id))),
                    _minutes(measured),
                    _minutes(prior),
                    _ratio(prior, measured),
                    _minutes(informed) if informed != prior else "–",
                    _ratio(informed, measured) if informed != prior else "–",
                ]
            )
    return out


def _minutes(hours: float | None) -> str:
    return "–" if hours is None else f"{60 * hours:.1f}"


def _ratio(predicted: float | None, measured: float) -> str:
    return "–" if predicted is None or measured <= 0 else f"{predicted / measured:.2f}"


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    cluster = Cluster(cpus=args.cpus, gpus=0.0, source=f"{args.cpus:g} CPUs (stated)")
    table = [row for url in args.database_urls for row in rows(url, cluster)]
    print(
        "| study | dataset | trials | measured min | prior min | prior / measured | from history min | history / measured |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in table:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
