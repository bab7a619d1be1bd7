"""The driver's throughput measurement (workers.driver.throughput) and what the study keeps of it, with fake
probe processes (tests.workers.trials.fake_probe): when it runs, what is cached, what the plan, the MLflow
parent run and the study's row get, and what a restarted driver keeps."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from studies.spec import StudySpec
from studies.store import create_study, make_engine, session_scope, set_study_trial_plan, study_trial_plan
from tests.factories import digits_spec
from tests.workers.trials.fake_probe import RO, FakePool
from workers.driver import study as driver_study
from workers.driver import throughput as driver_throughput
from workers.driver.throughput import measures_settings
from workers.trials.plan import TrialPlan
from workers.trials.throughput import (
    WARMUP_STEPS,
    Measurement,
    Setting,
    ThroughputCache,
    ThroughputChoice,
)

SPEC = digits_spec(name="fast", methods=["frozen_ln", "dyt"], seeds=list(range(10)), epochs=2)


# ----- the study's choice: cache, fallbacks --------------------------------------------------------------


@pytest.fixture
def gpu_node(monkeypatch):
    """A cluster with one H200 whose kind a Ray task reports."""

    class Task:
        def remote(self):
            return ("NVIDIA H200", "2.11.0+cu130")

    monkeypatch.setattr(driver_throughput.ray, "remote", lambda **resources: lambda fn: Task())
    monkeypatch.setattr(driver_throughput.ray, "get", lambda ref, timeout=None: ref)
    node = {"Alive": True, "Resources": {"CPU": 16.0, "GPU": 1.0}}
    monkeypatch.setattr(
        driver_throughput.ray, "nodes", lambda: [node, {"Alive": True, "Resources": {"CPU": 64.0}}]
    )
    return node


def _starter(pools):
    def start(size, **kwargs):
        clock = [0.0]
        pool = FakePool(size, clock)
        pools.append((pool, kwargs))
        return pool

    return start


def test_the_first_study_of_a_shape_measures_and_a_second_reads_the_cache(gpu_node, tmp_path):
    spec = StudySpec.model_validate(SPEC)
    cache = ThroughputCache(tmp_path / "throughput_probe.json")
    pools: list = []
    choice = driver_throughput.choose_by_throughput(
        spec,
        {"study_id": "s1"},
        trials_per_gpu=[1, 4],
        gpu_share=0.25,
        cache=cache,
        start_pool=_starter(pools),
    )
    assert choice is not None and choice.source == "measured" and choice.gpu == "NVIDIA H200"
    # 8 stacked seeds under CUDA graphs, 4 per GPU: 18k samples/s against 1k for one eager seed per trial
    assert choice.setting == Setting(8, RO, 4) and choice.probed_method == "frozen_ln"
    assert choice.samples_per_seed == 1437 * 2  # two epochs of digits: the compile's amortisation
    ((pool, kwargs),) = pools
    assert pool.size == 4 and kwargs["gpu_share"] == 0.25 and kwargs["base_config"]["method"] == "frozen_ln"
    stored = json.loads((tmp_path / "throughput_probe.json").read_text())
    (entry,) = stored["entries"].values()
    assert entry["key"]["gpu"] == "NVIDIA H200" and entry["key"]["methods"] == ["dyt", "frozen_ln"]
    assert entry["complete"] and len(entry["measurements"]) == 12

    again = driver_throughput.choose_by_throughput(
        spec, {"study_id": "s2"}, trials_per_gpu=[1, 4], gpu_share=0.25, cache=cache,
        start_pool=lambda *a, **k: pytest.fail("a cached shape is not measured again"),
    )  # fmt: skip
    assert again is not None and again.source == "cached" and again.setting == choice.setting


def test_another_gpu_kind_is_another_shape(gpu_node, monkeypatch, tmp_path):
    spec = StudySpec.model_validate(SPEC)
    cache = ThroughputCache(tmp_path / "throughput_probe.json")
    pools: list = []
    driver_throughput.choose_by_throughput(
        spec, {}, trials_per_gpu=[1, 4], gpu_share=0.25, cache=cache, start_pool=_starter(pools)
    )

    class H100:
        def remote(self):
            return ("NVIDIA H100 80GB HBM3", "2.11.0+cu130")

    monkeypatch.setattr(driver_throughput.ray, "remote", lambda **resources: lambda fn: H100())
    driver_throughput.choose_by_throughput(
        spec, {}, trials_per_gpu=[1, 4], gpu_share=0.25, cache=cache, start_pool=_starter(pools)
    )
    assert len(pools) == 2


def test_no_more_trials_per_gpu_are_measured_than_a_gpu_node_has_cpus_for(gpu_node, tmp_path):
    gpu_node["Resources"]["CPU"] = 6.0  # 3 trials of 2 CPUs
    spec = StudySpec.model_validate({**SPEC, "resources": {"cpu": 2}})
    pools: list = []
    choice = driver_throughput.choose_by_throughput(
        spec, {}, trials_per_gpu=[1, 8], gpu_share=0.125, cache=ThroughputCache(tmp_path / "c.json"),
        start_pool=_starter(pools),
    )  # fmt: skip
    assert choice is not None and {m.setting.trials_per_gpu for m in choice.measurements} == {1, 3}
    ((pool, kwargs),) = pools
    assert pool.size == 3 and kwargs["cpu"] == 2 and kwargs["gpu_share"] == 0.125


def test_a_probe_that_cannot_start_keeps_the_default(gpu_node, tmp_path):
    def no_gpu(*args, **kwargs):
        raise TimeoutError("no GPU free for 300 s")

    choice = driver_throughput.choose_by_throughput(
        StudySpec.model_validate(SPEC), {}, trials_per_gpu=[1, 4], gpu_share=0.25,
        cache=ThroughputCache(tmp_path / "c.json"), start_pool=no_gpu,
    )  # fmt: skip
    assert choice is None and not (tmp_path / "c.json").exists()


@pytest.mark.parametrize(
    ("changes", "fields", "expected"),
    [
        ({}, frozenset({"name", "budget", "budget.epochs"}), True),
        ({}, frozenset({"budget", "budget.compile"}), False),  # compile written, even as "none": it wins
        ({"resources": {"seeds_per_trial": 4}}, frozenset({"resources", "resources.seeds_per_trial"}), False),
        ({}, None, False),  # a study stored before the fields were recorded keeps its rule
    ],
)
def test_only_a_spec_that_leaves_seeds_and_compile_open_is_measured(changes, fields, expected):
    assert measures_settings(StudySpec.model_validate({**SPEC, **changes}), fields) is expected


# ----- the driver: plan, record, keep -----------------------------------------------------------------------


def _choice(setting=Setting(8, RO, 4)) -> ThroughputChoice:
    return ThroughputChoice(
        setting=setting,
        measurements=(Measurement(Setting(1, "none", 1), 1_000.0), Measurement(setting, 18_000.0, 9.0)),
        samples_per_seed=2874.0,
        gpu="NVIDIA H200",
        source="measured",
        probed_method="frozen_ln",
    )


@pytest.fixture
def one_gpu_cluster(monkeypatch):
    """One 140 GiB GPU; every memory probe peaks at 10 GiB (so 8 trials would fit)."""
    monkeypatch.setattr(driver_study.ray, "cluster_resources", lambda: {"CPU": 16.0, "GPU": 1.0})

    class Task:
        def remote(self, config):
            return 10 * 2**30, 140 * 2**30

    monkeypatch.setattr(driver_study.ray, "remote", lambda **resources: lambda fn: Task())
    monkeypatch.setattr(driver_study.ray, "get", lambda refs: refs)


def test_the_driver_plans_with_the_measured_choice(one_gpu_cluster, monkeypatch, tmp_path):
    asked = []

    def choose(spec, base, **kwargs):
        asked.append(kwargs)
        return _choice()

    monkeypatch.setattr(driver_study, "choose_by_throughput", choose)
    plan = driver_study.plan_study_trials(
        StudySpec.model_validate(SPEC), {}, choose_settings=True, cache_path=tmp_path / "c.json"
    )
    # 4 trials per GPU measured fastest, where 8 would fit: each asks a quarter of the GPU
    assert (plan.seeds_per_trial, plan.compile_mode, plan.gpu) == (8, RO, 0.25)
    (kwargs,) = asked
    assert kwargs["trials_per_gpu"] == [1, 8] and kwargs["cache"].path == tmp_path / "c.json"


def test_without_choose_settings_the_driver_measures_nothing(one_gpu_cluster, monkeypatch):
    monkeypatch.setattr(driver_study, "choose_by_throughput", lambda *a, **k: pytest.fail("measured"))
    plan = driver_study.plan_study_trials(StudySpec.model_validate(SPEC), {})
    assert (plan.seeds_per_trial, plan.compile_mode, plan.throughput) == (8, "none", None)


def test_a_restarted_driver_keeps_the_first_drivers_choice(one_gpu_cluster, monkeypatch):
    monkeypatch.setattr(driver_study, "choose_by_throughput", lambda *a, **k: pytest.fail("measured again"))
    first = TrialPlan(
        cpu=1.0, gpu=0.125, seeds_per_trial=8, gpu_reason="r", compile_mode=RO, throughput=_choice()
    )
    kept = driver_study.kept_choice(json.loads(json.dumps(first.to_dict())))
    assert kept is not None and kept.source == "kept"
    plan = driver_study.plan_study_trials(StudySpec.model_validate(SPEC), {}, kept=kept)
    assert (plan.seeds_per_trial, plan.compile_mode) == (8, RO)
    assert driver_study.kept_choice({"describe": "cpu", "throughput": None}) is None
    assert driver_study.kept_choice(None) is None


class FakeClient:
    def __init__(self):
        self.tags: dict[str, str] = {}
        self.artifacts: dict[str, dict] = {}

    def set_tag(self, run_id, key, value):
        self.tags[key] = value

    def log_batch(self, run_id, tags=(), synchronous=True, **kwargs):
        self.tags.update({tag.key: tag.value for tag in tags})

    def log_dict(self, run_id, data, path):
        self.artifacts[path] = json.loads(json.dumps(data))


def test_the_parent_run_records_the_choice_and_every_candidates_samples_per_second():
    client = FakeClient()
    plan = TrialPlan(
        cpu=1.0, gpu=0.25, seeds_per_trial=8, gpu_reason="r", compile_mode=RO, throughput=_choice()
    )
    driver_study.record_trial_plan(client, "run", plan)
    assert "compile reduce-overhead" in client.tags["normlab.trial_plan"]
    assert client.tags["normlab.throughput_choice"].startswith("8 seed(s) per trial, compile reduce-overhead")
    assert (client.tags["normlab.seeds_per_trial"], client.tags["normlab.compile"]) == ("8", RO)
    assert client.tags["normlab.trials_per_gpu"] == "4"
    artifact = client.artifacts[driver_study.THROUGHPUT_ARTIFACT]
    assert [(r["seeds_per_trial"], r["samples_per_s"], r["chosen"]) for r in artifact["candidates"]] == [
        (1, 1_000.0, False),
        (8, 18_000.0, True),
    ]


def test_a_plan_without_a_measurement_records_only_the_plan():
    client = FakeClient()
    driver_study.record_trial_plan(
        client, "run", TrialPlan(cpu=1.0, gpu=0.0, seeds_per_trial=1, gpu_reason="cpu")
    )
    assert set(client.tags) == {"normlab.trial_plan"} and client.artifacts == {}


class Stop(Exception):
    pass


@pytest.fixture
def stored_study(migrated_sqlite_url):
    engine = make_engine(migrated_sqlite_url)
    with session_scope(engine) as session:
        study = create_study(session, spec=SPEC)
    yield engine, study.id
    engine.dispose()


def _sweep(engine, study_id, monkeypatch, tmp_path) -> dict:
    """_run_sweeps up to the Tuner: the experiment's param_space."""
    seen: dict = {}

    def tuner(path, trainable, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(driver_study, "_tuner", tuner)
    monkeypatch.setattr(driver_study, "_run_config", lambda *args, **kwargs: None)
    monkeypatch.setattr(driver_study, "check_cluster_fits", lambda plan: None)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    ctx = driver_study.DriverContext(
        engine=engine,
        database_url="sqlite://",
        mlflow_tracking_uri="http://mlflow.test",
        results_dir=Path(tmp_path),
    )
    parent = driver_study.ParentRun(experiment_id="1", run_id="run")
    with pytest.raises(Stop):
        driver_study._run_sweeps(
            study_id, StudySpec.model_validate(SPEC), ctx, client=FakeClient(), parent=parent
        )
    return seen


def test_a_study_trains_under_the_chosen_compile_mode_and_keeps_its_plan(
    stored_study, one_gpu_cluster, monkeypatch, tmp_path
):
    engine, study_id = stored_study
    with session_scope(engine, readonly=True) as session:
        assert "budget.compile" not in study_trial_plan(session, study_id=study_id).spec_fields_set
    monkeypatch.setattr(driver_study, "choose_by_throughput", lambda *a, **k: _choice())
    monkeypatch.setattr(driver_study, "concurrent_trials", lambda plan: 1)
    seen = _sweep(engine, study_id, monkeypatch, tmp_path)
    assert seen["param_space"]["compile"] == RO
    with session_scope(engine, readonly=True) as session:
        stored = study_trial_plan(session, study_id=study_id).plan
    assert (
        stored is not None
        and stored["compile"] == RO
        and stored["throughput"]["chosen"]["seeds_per_trial"] == 8
    )

    # The driver dies and a new one resumes: it keeps the choice, measuring nothing.
    monkeypatch.setattr(driver_study, "choose_by_throughput", lambda *a, **k: pytest.fail("measured again"))
    assert _sweep(engine, study_id, monkeypatch, tmp_path)["param_space"]["compile"] == RO


def test_a_restarted_driver_whose_first_measured_nothing_measures_nothing(
    stored_study, one_gpu_cluster, monkeypatch, tmp_path
):
    engine, study_id = stored_study
    with session_scope(engine) as session:
        set_study_trial_plan(session, study_id=study_id, plan={"describe": "fell back", "throughput": None})
    monkeypatch.setattr(driver_study, "choose_by_throughput", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.setattr(driver_study, "concurrent_trials", lambda plan: 1)
    assert _sweep(engine, study_id, monkeypatch, tmp_path)["param_space"]["compile"] == "none"


def test_a_probe_process_builds_warms_up_and_steps_a_candidate_for_real_on_cpu():
    """ProbeWorker's own code (a Ray actor on a GPU node in a study), called in this process on CPU."""
    import torch

    from workers.driver.throughput import ProbeWorker

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    base = {"dataset": "digits", "model": "vit_lite_tiny", "method": "frozen_ln", "epochs": 2, "batch_size": 32,
            "seed": 0, "study_id": "s1", "phase": "final"}  # fmt: skip
    try:
        worker = ProbeWorker(base, device="cpu")
        prepared = worker.prepare({**base, "seed": 3, "seeds": [3, 4], "compile": "none"})
        assert prepared.ok and prepared.warmup_steps == WARMUP_STEPS
        assert prepared.samples_per_seed_epoch == 1437 and prepared.build_s > 0
        stepped = worker.window(time.time(), 0.3)
        assert stepped.steps > 0 and stepped.samples == stepped.steps * 32 * 2
        worker.release()
        assert worker.process.run is None
        failed = worker.prepare({**base, "method": "no_such_method", "compile": "none"})
        assert not failed.ok and failed.error
    finally:
        torch.set_num_threads(previous)
