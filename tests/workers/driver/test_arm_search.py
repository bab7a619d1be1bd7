"""A sequential grid suggests its trials look by look: every grid point trains the first look's seeds, the
searcher waits while a look's batch is running, and only the points of the pairs still open train on."""

from __future__ import annotations

from ray.tune.search import Searcher

from studies.sequential import LookRecord, SequentialMonitor
from studies.spec.sections import SequentialDesign
from studies.trial_config import GRID_PHASE
from workers.driver.arm_search import ArmSearch, grid_seed_fields
from workers.driver.final_schedule import SequentialFinals

HARD, SAMPLE, BASE = "m [gate=hard]", "m [gate=sample]", "ref [base]"
ARMS = {
    HARD: {"method": "m", "group": "gate=hard", "knobs": {"gate": "hard"}},
    SAMPLE: {"method": "m", "group": "gate=sample", "knobs": {"gate": "sample"}},
    BASE: {"method": "ref", "group": "base", "knobs": {}},
}


def _search(sink: list[LookRecord]) -> ArmSearch:
    design = SequentialDesign(
        test="equivalence", margin=0.05, first_seeds=2, seeds_per_look=2, max_seeds=6, pairs=[[HARD, SAMPLE]]
    )
    monitor = SequentialMonitor(design, methods=list(ARMS), reference=None, higher_is_better=True)
    finals = SequentialFinals(
        monitor,
        final_config=grid_seed_fields,
        seeds_per_trial=1,
        metric_key="test_accuracy",
        sink=lambda record, _: sink.append(record),
    )
    return ArmSearch(arms=ARMS, finals=finals, metric="test_accuracy", mode="max")


def _suggest_all(search: ArmSearch, start: int) -> dict[str, dict]:
    suggested = {}
    while isinstance(config := search.suggest(f"t{start + len(suggested)}"), dict):
        suggested[f"t{start + len(suggested)}"] = config
    return suggested


def test_every_point_trains_the_first_look_then_only_the_open_pair_trains_on():
    looks: list[LookRecord] = []
    search = _search(looks)
    first = _suggest_all(search, 0)
    assert sorted((c["group"], c["seed"]) for c in first.values()) == sorted(
        (g, s) for g in ("gate=hard", "gate=sample", "base") for s in (0, 1)
    )
    assert all(c["phase"] == GRID_PHASE and c["eval_split"] == "test" for c in first.values())
    assert search.suggest("waiting") is None  # the look waits for its batch
    spread = {HARD: [0.90, 0.95], SAMPLE: [0.91, 0.93], BASE: [0.5, 0.5]}  # too wide to decide at 2 seeds
    for trial_id, config in first.items():
        arm = next(a for a, f in ARMS.items() if f["group"] == config["group"])
        search.on_trial_complete(trial_id, {"test_accuracy": spread[arm][config["seed"]]})
    assert len(looks) == 1 and looks[0].open_arms == [HARD, SAMPLE]
    second = _suggest_all(search, 100)
    assert sorted((c["group"], c["seed"]) for c in second.values()) == [
        ("gate=hard", 2),
        ("gate=hard", 3),
        ("gate=sample", 2),
        ("gate=sample", 3),
    ]
    assert search.total_trials == 3 * 6


def test_the_search_finishes_once_every_pair_is_decided():
    looks: list[LookRecord] = []
    search = _search(looks)
    for trial_id, config in _suggest_all(search, 0).items():
        search.on_trial_complete(trial_id, {"test_accuracy": 0.9 + 0.0001 * config["seed"]})
    assert looks[-1].decisions == {f"{HARD} vs {SAMPLE}": "equivalent"}
    assert search.suggest("next") == Searcher.FINISHED
