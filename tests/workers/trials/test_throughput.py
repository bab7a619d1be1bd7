"""The throughput rule and its cache, on made-up measurements: which setting a GPU study trains with."""

from __future__ import annotations

import json
import threading

import pytest

from tests.workers.trials.fake_probe import BATCH, COMPILE_S, FakePool
from workers.trials.plan import DEFAULT_GPU_SEEDS_PER_TRIAL
from workers.trials.throughput import (
    MAX_PROBE_ATTEMPTS,
    TIE_TOLERANCE,
    Measurement,
    Setting,
    ThroughputCache,
    ThroughputChoice,
    decide,
    measure_settings,
    probe_order,
    seed_candidates,
)

RO = "reduce-overhead"
SAMPLES = 50_000 * 10  # one seed's samples over a study: CIFAR-10's train split, 10 epochs


def m(
    k: int, compile_mode: str, n: int, rate: float | None, overhead: float = 0.0, note: str = ""
) -> Measurement:
    return Measurement(Setting(k, compile_mode, n), rate, overhead, note)


# An H200-like table (BENCHMARKS.md's FrozenLN rows, per GPU): packing and stacking help, CUDA graphs more.
H200_LIKE = [
    m(1, "none", 1, 6_200, 0.5),
    m(1, "none", 8, 21_900, 0.8),
    m(8, "none", 1, 16_700, 1.0),
    m(8, "none", 8, 32_400, 1.5),
    m(1, RO, 1, 17_300, 30.0),
    m(1, RO, 8, 47_900, 45.0),
    m(8, RO, 1, 60_000, 40.0),
    m(8, RO, 8, 70_000, 60.0),
]


def test_the_fastest_setting_per_gpu_wins_with_its_compile_time_amortised():
    assert decide(H200_LIKE, samples_per_seed=SAMPLES) == Setting(8, RO, 8)


def test_a_compile_that_a_short_study_cannot_pay_back_loses_to_eager():
    # 100 samples per seed: a compiled trial trains for well under a second after a 30-60 s compile.
    assert decide(H200_LIKE, samples_per_seed=100) == Setting(8, "none", 8)


def test_the_amortised_figure_counts_each_trials_overhead_once_over_its_own_samples():
    packed = m(8, RO, 8, 80_000, overhead=40.0)
    # each of the 8 trials trains 8 seeds x 1000 samples at 10,000 samples/s: 0.8 s, then 40 s of overhead
    assert packed.effective_samples_per_s(1_000) == pytest.approx(80_000 * 0.8 / 40.8)
    assert packed.effective_samples_per_s(0) == 80_000  # no samples given: no amortisation
    assert m(1, "none", 1, None).effective_samples_per_s(SAMPLES) == 0.0


def test_never_slower_than_one_eager_seed_per_trial():
    slower = [m(1, "none", 1, 5_000), m(8, "none", 1, 4_000), m(8, RO, 1, 4_900), m(1, RO, 1, 3_000)]
    assert decide(slower, samples_per_seed=SAMPLES) == Setting(1, "none", 1)
    # packing one eager seed per trial is itself "one eager seed per trial": every other setting must beat
    # the faster of the two
    packed_baseline = [m(1, "none", 1, 5_000), m(1, "none", 4, 9_000), m(4, "none", 4, 9_200)]
    assert decide(packed_baseline, samples_per_seed=SAMPLES) == Setting(1, "none", 4)


@pytest.mark.parametrize("faster_by", [0.0, 0.03, TIE_TOLERANCE])
def test_a_tie_goes_to_the_simpler_setting(faster_by):
    rate = 10_000
    table = [
        m(1, "none", 1, rate),
        m(8, "none", 1, rate * (1 + faster_by)),
        m(8, RO, 1, rate * (1 + faster_by)),
    ]
    assert decide(table, samples_per_seed=SAMPLES) == Setting(1, "none", 1)


def test_simpler_means_eager_then_fewer_seeds_then_fewer_trials_per_gpu():
    same = [m(8, RO, 1, 20_000), m(4, "none", 8, 20_000), m(4, "none", 1, 20_000), m(1, "none", 1, 5_000)]
    assert decide(same, samples_per_seed=SAMPLES) == Setting(4, "none", 1)
    assert sorted(s.setting.simplicity() for s in same)[0] == (False, 1, 1)


def test_without_a_measured_baseline_there_is_no_choice():
    assert (
        decide([m(8, RO, 1, 90_000), m(1, "none", 1, None, note="failed")], samples_per_seed=SAMPLES) is None
    )
    assert decide([], samples_per_seed=SAMPLES) is None


def test_unmeasured_and_failed_candidates_are_never_chosen():
    table = [m(1, "none", 1, 5_000), m(8, RO, 8, None, note="failed with 8 trials on one GPU: OOM")]
    assert decide(table, samples_per_seed=SAMPLES) == Setting(1, "none", 1)


@pytest.mark.parametrize(
    ("seeds", "ks"), [(1, [1]), (2, [1, 2]), (3, [1, 3]), (5, [1, 4, 5]), (10, [1, 4, 8]), (64, [1, 4, 8])]
)
def test_seed_candidates_never_exceed_what_the_memory_rule_assumes(seeds, ks):
    assert seed_candidates(seeds) == ks
    assert max(seed_candidates(seeds)) <= min(seeds, DEFAULT_GPU_SEEDS_PER_TRIAL)


def test_the_baseline_is_measured_first_then_the_largest_stacks():
    assert probe_order(10) == [(1, "none"), (8, "none"), (8, RO), (1, RO), (4, "none"), (4, RO)]
    assert probe_order(1) == [(1, "none"), (1, RO)]


def _choice(measurements=tuple(H200_LIKE), samples=SAMPLES) -> ThroughputChoice:
    setting = decide(measurements, samples_per_seed=samples)
    assert setting is not None
    return ThroughputChoice(
        setting=setting,
        measurements=tuple(measurements),
        samples_per_seed=samples,
        gpu="NVIDIA H200",
        source="measured",
        measured_at="2026-12-08T10:00:00+00:00",
        probed_method="frozen_ln",
        key={"dataset": "cifar10"},
    )


def test_a_choice_says_what_it_chose_against_the_baseline_and_round_trips():
    choice = _choice()
    text = choice.describe()
    assert "8 seed(s) per trial, compile reduce-overhead, 8 trial(s) per GPU" in text
    assert "x one eager seed per trial" in text and "NVIDIA H200" in text
    data = json.loads(json.dumps(choice.to_dict()))
    assert [row["chosen"] for row in data["candidates"]].count(True) == 1
    assert len(data["candidates"]) == len(H200_LIKE) and data["summary"] == text
    assert {row["samples_per_s"] for row in data["candidates"]} == {x.samples_per_s for x in H200_LIKE}
    again = ThroughputChoice.from_dict(data)
    assert again.setting == choice.setting and set(again.measurements) == set(choice.measurements)
    assert again.describe() == text
    ratio = choice.speedup(choice.chosen)
    assert ratio is not None and ratio > 1


def key(**changes):
    return {
        "dataset": "cifar10",
        "model": "vit_lite_paper",
        "methods": ["dyt", "frozen_ln"],
        "gpu": "H200",
    } | changes


def test_the_cache_gives_back_what_was_stored_for_the_same_shape_only(tmp_path):
    cache = ThroughputCache(tmp_path / "throughput_probe.json")
    assert cache.get(key()) is None
    stored = cache.put(
        key(), H200_LIKE, gpu="H200", probed_method="dyt", complete=True, samples_per_seed_epoch=500
    )
    assert stored.usable and stored.measurements == tuple(H200_LIKE) and stored.samples_per_seed_epoch == 500
    again = ThroughputCache(tmp_path / "throughput_probe.json").get(key())
    assert again == stored
    assert cache.get(key(gpu="NVIDIA H100 80GB HBM3")) is None  # another GPU kind
    assert cache.get(key(methods=["frozen_ln"])) is None  # another method set


def test_a_measurement_cut_by_the_bound_is_retried_once_then_kept(tmp_path):
    cache = ThroughputCache(tmp_path / "throughput_probe.json")
    cut = [*H200_LIKE[:4], m(8, RO, 1, None, note="not measured: the 60 s bound ran out")]
    first = cache.put(key(), cut, gpu="H200", probed_method="dyt", complete=False, samples_per_seed_epoch=500)
    assert not first.usable and first.attempts == 1
    second = cache.put(
        key(), cut, gpu="H200", probed_method="dyt", complete=False, samples_per_seed_epoch=500
    )
    assert second.attempts == MAX_PROBE_ATTEMPTS and second.usable


def test_an_unreadable_cache_is_empty_and_is_rewritten_whole(tmp_path):
    path = tmp_path / "throughput_probe.json"
    path.write_text("{not json")
    cache = ThroughputCache(path)
    assert cache.get(key()) is None
    cache.put(key(), H200_LIKE[:1], gpu="H200", probed_method="dyt", complete=True, samples_per_seed_epoch=1)
    assert json.loads(path.read_text())["format"] == 1 and cache.get(key()) is not None


def test_drivers_writing_at_once_keep_every_entry(tmp_path):
    path = tmp_path / "throughput_probe.json"

    def write(i: int) -> None:
        ThroughputCache(path).put(
            key(dataset=f"d{i}"),
            H200_LIKE[:1],
            gpu="H200",
            probed_method="dyt",
            complete=True,
            samples_per_seed_epoch=1,
        )

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(ThroughputCache(path).get(key(dataset=f"d{i}")) is not None for i in range(8))


def test_with_tuning_trials_compile_must_not_slow_one_seed_trials_down():
    table = [
        m(1, "none", 4, 10_000),
        m(1, RO, 4, 8_000, overhead=30.0),  # compiled single seeds lose (a long compile, short trials)
        m(8, "none", 4, 20_000),
        m(8, RO, 4, 60_000, overhead=30.0),
    ]
    assert decide(table, samples_per_seed=SAMPLES) == Setting(8, RO, 4)
    assert decide(table, samples_per_seed=SAMPLES, tuning_trials=True) == Setting(8, "none", 4)
    table[1] = m(1, RO, 4, 30_000, overhead=30.0)
    assert decide(table, samples_per_seed=SAMPLES, tuning_trials=True) == Setting(8, RO, 4)
    unmeasured = [table[0], m(1, RO, 4, None, note="not measured"), table[2], table[3]]
    assert decide(unmeasured, samples_per_seed=SAMPLES, tuning_trials=True) == Setting(8, "none", 4)


# ----- the measuring schedule (measure_settings), on a fake pool and a fake clock --------------------------


def config_for(k, compile_mode):
    seeds = list(range(k))
    return {"seed": 0, "compile": compile_mode, **({"seeds": seeds} if k > 1 else {})}


def _measure(pool, clock, budget_s=60.0, trials_per_gpu=(1, 4)):
    return measure_settings(
        pool,
        config_for,
        num_seeds=10,
        trials_per_gpu=list(trials_per_gpu),
        budget_s=budget_s,
        clock=lambda: clock[0],
    )


def _rates(measured):
    return {
        (m.setting.seeds_per_trial, m.setting.compile_mode, m.setting.trials_per_gpu): m.samples_per_s
        for m in measured.measurements
    }


def test_every_candidate_is_measured_alone_and_packed_within_the_bound():
    clock = [0.0]
    pool = FakePool(4, clock)
    measured = _measure(pool, clock)
    assert measured.complete and measured.samples_per_seed_epoch == 1437
    rates = _rates(measured)
    assert len(rates) == 12  # 6 (seeds, compile) pairs x (1, 4) trials per GPU
    assert rates[(1, "none", 1)] == pytest.approx(1_000, rel=0.05)
    assert rates[(8, RO, 4)] == pytest.approx(4 * 4_500, rel=0.05)  # four processes' samples/s summed
    assert [p[:2] for p in pool.prepared] == [
        (1, "none"),
        (8, "none"),
        (8, RO),
        (1, RO),
        (4, "none"),
        (4, RO),
    ]
    assert all(count == 4 for *_, count in pool.prepared) and pool.releases == 6
    compiled = next(m for m in measured.measurements if m.setting == Setting(8, RO, 1))
    step_s = BATCH * 8 / 9_000
    assert compiled.overhead_s == pytest.approx(0.5 + COMPILE_S - 5 * step_s, rel=0.05)
    assert clock[0] <= 60.0


def test_the_bound_cuts_the_rest_and_says_so():
    clock = [0.0]
    pool = FakePool(4, clock)
    measured = _measure(pool, clock, budget_s=12.0)  # baseline (5 s), largest eager stack (5 s), then cut
    assert not measured.complete
    by_pair = {}
    for m in measured.measurements:
        by_pair.setdefault((m.setting.seeds_per_trial, m.setting.compile_mode), []).append(m)
    assert all(m.measured for m in by_pair[(1, "none")] + by_pair[(8, "none")])
    for pair in [(8, RO), (1, RO), (4, "none"), (4, RO)]:
        assert [m.measured for m in by_pair[pair]] == [False, False]
        assert "bound ran out" in by_pair[pair][0].note
    assert clock[0] <= 12.0 + 1e-9


def test_a_setting_that_does_not_fit_n_times_is_measured_alone():
    clock = [0.0]
    pool = FakePool(4, clock, oom_when_packed={(8, RO)})
    rates = _rates(_measure(pool, clock, budget_s=600))
    assert rates[(8, RO, 4)] is None and rates[(8, RO, 1)] == pytest.approx(9_000, rel=0.05)
    assert (8, RO, 1) in pool.prepared  # prepared again, alone
    failed = next(
        m
        for m in _measure(FakePool(4, [0.0], oom_when_packed={(8, RO)}), [0.0]).measurements
        if m.setting == Setting(8, RO, 4)
    )
    assert failed.note.startswith("failed with 4 trials on one GPU: OutOfMemoryError")


def test_probe_processes_on_different_gpus_measure_no_packing():
    clock = [0.0]
    measured = _measure(FakePool(4, clock, same_gpu=False), clock)
    packed = [m for m in measured.measurements if m.setting.trials_per_gpu == 4]
    assert packed and all(not m.measured and "different GPUs" in m.note for m in packed)


def test_a_spec_share_measures_only_its_own_packing():
    clock = [0.0]
    pool = FakePool(4, clock)
    rates = _rates(_measure(pool, clock, trials_per_gpu=(4,)))
    assert {n for *_, n in rates} == {4} and pool.windows == [4] * 6
