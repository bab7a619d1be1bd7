"""Which final trials a compare study runs: every seed batch at once, or a sequential design's looks, where a
look waits for every trial of its batch and only arms with an open comparison train the next seeds."""

from __future__ import annotations

from studies.sequential import LookRecord, SequentialMonitor
from studies.spec.sections import SequentialDesign
from workers.driver.final_schedule import FixedFinals, SequentialFinals, seed_values
from workers.driver.trial_configs import StudyTrialConfigs

METRIC = "test_accuracy"


class Sink:
    def __init__(self) -> None:
        self.records: list[LookRecord] = []

    def __call__(self, record: LookRecord, monitor: SequentialMonitor) -> None:
        self.records.append(record)


def _sequential(per_trial: int = 1, methods=("a", "b", "ref")) -> tuple[SequentialFinals, Sink]:
    design = SequentialDesign(test="superiority", effect=0.01, first_seeds=3, seeds_per_look=2, max_seeds=7)
    monitor = SequentialMonitor(design, methods=list(methods), reference="ref", higher_is_better=True)
    sink = Sink()
    finals = SequentialFinals(
        monitor,
        final_config=StudyTrialConfigs.final_for,
        seeds_per_trial=per_trial,
        metric_key=METRIC,
        sink=sink,
    )
    return finals, sink


def _drain(finals: SequentialFinals, method: str, prefix: str) -> list[tuple[str, dict]]:
    out = []
    while (config := finals.next_config(method)) is not None:
        trial_id = f"{prefix}{len(out)}"
        config = {**config, "method": method}
        finals.on_final_suggested(trial_id, method, config)
        out.append((trial_id, config))
    return out


def _value(method: str, seed: int) -> float:
    if method == "a":
        return 0.30 + 0.001 * seed + 1e-5 * seed * seed  # collapsed: decided at the first look
    return 0.90 + 0.002 * seed + (0.012 + 0.006 * (-1) ** seed if method == "b" else 0.0)


def test_fixed_finals_give_every_method_every_batch_and_then_finish():
    finals = FixedFinals([{"seed": 0}, {"seed": 1}], ["a", "b"])
    assert finals.most_trials == 4
    assert [finals.next_config("a"), finals.next_config("a"), finals.next_config("a")] == [
        {"seed": 0},
        {"seed": 1},
        None,
    ]
    assert finals.waiting()  # b has not started
    finals.next_config("b"), finals.next_config("b")
    assert not finals.waiting()


def test_the_first_look_trains_every_method_on_the_first_seeds_and_waits_for_all_of_them():
    finals, sink = _sequential()
    assert finals.most_trials == 3 * 7
    trials = {m: _drain(finals, m, m) for m in ("a", "b", "ref")}
    assert [c["seed"] for _, c in trials["a"]] == [0, 1, 2]
    assert all(c["phase"] == "final" and c["eval_split"] == "test" for _, c in trials["a"])
    for method in ("a", "b"):
        for trial_id, config in trials[method]:
            finals.on_final_complete(trial_id, {METRIC: _value(method, config["seed"])}, error=False)
    assert sink.records == []  # the reference's trials are still running
    assert finals.waiting()
    for trial_id, config in trials["ref"]:
        finals.on_final_complete(trial_id, {METRIC: _value("ref", config["seed"])}, error=False)
    (record,) = sink.records
    assert record.decisions["a"] == "efficacy" and record.decisions["b"] == "open"
    assert finals.next_config("a") is None  # a's comparison is decided: a trains no more seeds
    assert [c["seed"] for _, c in _drain(finals, "b", "b2-")] == [3, 4]
    assert finals.next_config("ref")["seed"] == 3


def test_a_failed_trial_is_missing_from_its_look_not_a_decision():
    finals, sink = _sequential(methods=("b", "ref"))
    trials = {m: _drain(finals, m, m) for m in ("b", "ref")}
    for method, batch in trials.items():
        for trial_id, config in batch:
            failed = method == "b" and config["seed"] == 2
            result = None if failed else {METRIC: _value(method, config["seed"])}
            finals.on_final_complete(trial_id, result, error=failed)
    (record,) = sink.records
    assert record.seeds_per_arm == {"b": 2, "ref": 3}
    assert record.comparisons["b"].seeds == 2


def test_seed_batches_report_each_seed_and_a_look_ends_when_its_batches_have():
    finals, sink = _sequential(per_trial=3, methods=("a", "ref"))
    trials = {m: _drain(finals, m, m) for m in ("a", "ref")}
    assert [c["seeds"] for _, c in trials["a"]] == [[0, 1, 2]]
    for method, [(trial_id, config)] in trials.items():
        flat = {f"per_seed/{s}/{METRIC}": _value(method, s) for s in config["seeds"]}
        finals.on_final_complete(trial_id, flat, error=False)
    (record,) = sink.records
    assert record.seeds_per_arm == {"a": 3, "ref": 3}
    assert not finals.waiting()  # a was decided at the first look: nothing more to train


def test_seed_values_read_one_seed_nested_and_flattened_batches_and_skip_non_finite_values():
    assert seed_values([4], {METRIC: 0.5}, METRIC) == {4: 0.5}
    assert seed_values([1, 2], {"per_seed": {"1": {METRIC: 0.1}, "2": {METRIC: float("nan")}}}, METRIC) == {
        1: 0.1
    }
    assert seed_values([1, 2], {f"per_seed/1/{METRIC}": 0.1, f"per_seed/2/{METRIC}": 0.2}, METRIC) == {
        1: 0.1,
        2: 0.2,
    }
    assert seed_values([3], None, METRIC) == {}


def test_the_mlflow_copy_of_the_looks_is_strict_json_even_where_seeds_agree_exactly():
    import json

    from studies.numbers import json_safe

    assert json.dumps(json_safe({"z": float("inf"), "p": [float("nan"), 0.1]}), allow_nan=False) == (
        '{"z": null, "p": [null, 0.1]}'
    )
