"""HTTP /results/{dataset} of a stand-in dataset says what it stands in for and what it is."""

from __future__ import annotations

from studies.tables.dataset_notes import DATASET_NOTES
from tests.factories import add_trial, digits_spec, submit

SPEC = digits_spec(name="note", seeds=[0, 1, 2], epochs=2, batch_size=32)


def _finished_study(client, engine, **changes) -> str:
    spec = {**SPEC, **changes}
    study_id = submit(client, spec)
    for method in spec["methods"]:
        for seed in spec["seeds"]:
            add_trial(
                engine,
                study_id,
                f"{study_id}-final-{method}-{seed}",
                method=method,
                config={"method": method, "seed": seed},
                seed=seed,
                metrics={"test_accuracy": 0.9 + seed / 100},
                metric_value=0.9 + seed / 100,
            )
    return study_id


def test_a_stand_in_datasets_results_carry_its_note_in_json_markdown_and_html(client, app_engine):
    _finished_study(client, app_engine)  # digits: a stand-in for mnist
    note = DATASET_NOTES["digits"]
    assert client.get("/results/digits").json()["dataset_note"] == note
    assert f"digits is a {note}" in client.get("/results/digits?format=md").text
    assert (
        "digits is a stand-in for mnist: scikit-learn&#x27;s 1,797"
        in client.get("/results/digits?format=html").text
    )


def test_the_papers_own_dataset_has_no_note(client, app_engine):
    _finished_study(client, app_engine, dataset="fashion_mnist", model="vit_lite_paper")
    payload = client.get("/results/fashion_mnist").json()
    assert payload["dataset"] == "fashion_mnist" and payload["dataset_note"] is None
