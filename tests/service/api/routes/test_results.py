"""HTTP /results/{dataset}: the CI table over final-phase trials recorded straight through the store."""

from __future__ import annotations

import csv
import io

import pytest

from tests.factories import add_trial, quick_spec, submit

# Test accuracy per method and seed: autonorm_s beats frozen_ln on every seed, dyt is level with it.
ACCURACY = {
    "autonorm_s": {0: 0.95, 1: 0.96, 2: 0.94},
    "frozen_ln": {0: 0.90, 1: 0.91, 2: 0.89},
    "dyt": {0: 0.905, 1: 0.90, 2: 0.895},
}


def _record(engine, study_id, method, seed, value, *, phase="final", status="succeeded", group=None):
    add_trial(
        engine,
        study_id,
        f"{study_id}-{phase}-{method}-{group}-{seed}",
        phase=phase,
        method=method,
        config={"method": method, "seed": seed},
        seed=seed,
        status=status,
        metrics={
            "test_accuracy": value,
            "val_accuracy": None if value is None else value - 0.1,
            "train_loss": None if value is None else 1.0 - value,
            "gate_entropy_mean": 0.5,  # recorded, but neither higher nor lower is better
        },
        metric_value=value,
        mlflow_run_id=f"run-{method}-{seed}",
        group=group,
    )


@pytest.fixture
def finished_study(client, app_engine) -> str:
    study_id = submit(client)
    for method, by_seed in ACCURACY.items():
        _record(app_engine, study_id, method, 99, 0.5, phase="tune")  # tuning trials never reach the table
        for seed, value in by_seed.items():
            _record(app_engine, study_id, method, seed, value)
    return study_id


def _rows(payload):
    return {row["method"]: row for row in payload["rows"]}


def test_results_for_digits_have_one_row_per_method_with_its_seed_count(client, finished_study):
    response = client.get("/results/digits")
    assert response.status_code == 200
    payload = response.json()
    assert (payload["dataset"], payload["metric"], payload["reference"]) == (
        "digits",
        "accuracy",
        "frozen_ln",
    )
    rows = _rows(payload)
    assert set(rows) == {"autonorm_s", "frozen_ln", "dyt"}
    for method, by_seed in ACCURACY.items():
        assert rows[method]["n"] == 3
        assert rows[method]["mean"] == pytest.approx(sum(by_seed.values()) / 3)
        assert rows[method]["ci_low"] < rows[method]["mean"] < rows[method]["ci_high"]
        assert rows[method]["study_ids"] == [finished_study]
    assert rows["frozen_ln"]["is_reference"]
    assert rows["autonorm_s"]["diff_mean"] == pytest.approx(0.05)
    assert rows["autonorm_s"]["paired"] is True


def test_failed_seeds_are_counted_as_failures_not_values(client, app_engine, finished_study):
    _record(app_engine, finished_study, "dyt", 3, None, status="failed")
    row = _rows(client.get("/results/digits").json())["dyt"]
    assert row["n"] == 3 and row["n_failed"] == 1 and row["failed_seeds"] == [3]


@pytest.mark.parametrize(
    ("fmt", "media_type", "marker"),
    [
        ("csv", "text/csv", "method,"),
        ("md", "text/markdown", "| "),
        ("html", "text/html", "<table"),
        ("latex", "application/x-latex", r"\begin{tabular}"),
    ],
)
def test_the_table_renders_as_csv_markdown_and_html(client, finished_study, fmt, media_type, marker):
    response = client.get("/results/digits", params={"format": fmt})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(media_type)
    assert marker in response.text
    text = response.text.replace(r"\_", "_")  # LaTeX escapes the underscore
    assert "autonorm_s" in text and "frozen_ln" in text


def test_csv_has_a_line_per_method(client, finished_study):
    lines = list(csv.DictReader(io.StringIO(client.get("/results/digits", params={"format": "csv"}).text)))
    assert sorted(line["method"] for line in lines) == ["autonorm_s", "dyt", "frozen_ln"]


def test_reference_metric_and_adjustment_can_be_chosen(client, finished_study):
    payload = client.get(
        "/results/digits",
        params={
            "reference": "dyt",
            "metric": "val_accuracy",
            "adjust": "bh",
            "confidence": 0.9,
        },
    ).json()
    rows = _rows(payload)
    assert payload["reference"] == "dyt" and rows["dyt"]["is_reference"]
    assert payload["metric"] == "val_accuracy"
    assert rows["frozen_ln"]["mean"] == pytest.approx(0.80)
    assert rows["frozen_ln"]["adjustment"] == "bh" and rows["frozen_ln"]["confidence"] == 0.9


def test_a_chosen_metric_is_compared_in_the_direction_the_metric_table_gives(client, finished_study):
    # train_loss is lower-is-better: autonorm_s has the lowest loss on every seed, so it improves.
    payload = client.get("/results/digits", params={"metric": "train_loss"}).json()
    assert payload["metric"] == "train_loss"
    assert _rows(payload)["autonorm_s"]["prob_improvement"] == pytest.approx(1.0)
    accuracy = _rows(client.get("/results/digits").json())
    assert accuracy["autonorm_s"]["prob_improvement"] == pytest.approx(1.0)


def test_by_default_the_newest_study_with_results_is_shown_and_study_selects_or_pools(
    client, app_engine, finished_study
):
    newer = submit(client)
    _record(app_engine, newer, "frozen_ln", 0, 0.5)
    empty = submit(client)  # the newest study, but it has no results yet: skipped by default
    assert _rows(client.get("/results/digits").json())["frozen_ln"]["study_ids"] == [newer]
    chosen = _rows(client.get("/results/digits", params={"study": finished_study}).json())
    assert chosen["frozen_ln"]["n"] == 3
    pooled = _rows(client.get("/results/digits", params={"study": "all"}).json())
    assert sorted(pooled["frozen_ln"]["study_ids"]) == sorted([finished_study, newer])
    assert client.get("/results/digits", params={"study": empty}).status_code == 404


def test_named_studies_that_differ_in_more_than_seeds_are_pooled_only_when_asked(
    client, app_engine, finished_study
):
    base = quick_spec()
    longer = submit(client, quick_spec(budget={**base["budget"], "epochs": base["budget"]["epochs"] + 2}))
    _record(app_engine, longer, "frozen_ln", 0, 0.5)
    more_seeds = submit(client, quick_spec(seeds=[3, 4, 5]))
    _record(app_engine, more_seeds, "frozen_ln", 3, 0.5)

    refused = client.get("/results/digits", params={"study": [finished_study, longer]})
    assert refused.status_code == 422
    (error,) = refused.json()["detail"]
    assert error["loc"] == ["query", "study"] and "budget.epochs" in error["msg"]
    assert f"/compare?a={finished_study}&b={longer}" in error["msg"] and "pool=true" in error["msg"]
    pooled = client.get("/results/digits", params={"study": [finished_study, longer], "pool": "true"})
    assert sorted(_rows(pooled.json())["frozen_ln"]["study_ids"]) == sorted([finished_study, longer])
    # More seeds of the same experiment pool without being asked.
    same = client.get("/results/digits", params={"study": f"{finished_study},{more_seeds}"})
    assert same.status_code == 200, same.text


def test_grid_studies_give_a_row_per_grid_point(client, app_engine):
    spec = quick_spec(
        kind="grid",
        methods=["frozen_ln"],
        search={"skip_scale": {"type": "grid", "values": [0.5, 1.0]}},
        method_search={},
    )
    spec.pop("num_samples")
    study_id = submit(client, spec)
    for group, base in (("skip_scale=0.5", 0.8), ("skip_scale=1.0", 0.9)):
        for seed in (0, 1, 2):
            _record(app_engine, study_id, "frozen_ln", seed, base + seed / 100, phase="grid", group=group)
    rows = client.get("/results/digits", params={"reference": "frozen_ln [skip_scale=1.0]"}).json()["rows"]
    assert {(row["group"], row["n"]) for row in rows} == {("skip_scale=0.5", 3), ("skip_scale=1.0", 3)}


def test_an_unknown_dataset_is_404(client):
    response = client.get("/results/imagenet")
    assert response.status_code == 404
    assert "unknown dataset 'imagenet'" in response.json()["detail"]


def test_a_dataset_without_final_trials_is_404_saying_what_to_do(client, app_engine):
    study_id = submit(client)
    _record(app_engine, study_id, "dyt", 0, 0.5, phase="tune")
    response = client.get("/results/digits")
    assert response.status_code == 404
    assert "POST /studies" in response.json()["detail"]


def test_unknown_study_ids_in_the_filter_are_404(client, finished_study):
    assert client.get("/results/digits", params={"study": "0" * 32}).status_code == 404


def test_a_study_of_another_dataset_is_404(client, finished_study):
    assert client.get("/results/mnist_5k", params={"study": finished_study}).status_code == 404


@pytest.mark.parametrize("params", [{"format": "xlsx"}, {"confidence": 1.5}, {"adjust": "bonferroni"}])
def test_bad_query_parameters_are_422(client, finished_study, params):
    assert client.get("/results/digits", params=params).status_code == 422
