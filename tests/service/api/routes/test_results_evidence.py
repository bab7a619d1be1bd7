"""GET /results/{dataset}: the JSON gains an `evidence` key and the HTML page the mechanism figures, from the
per-epoch histories of the final-phase trials."""

from __future__ import annotations

import pytest

from studies.store import session_scope
from tests.factories import add_epochs, add_trial, digits_spec, submit, trial_key

SPEC = digits_spec(
    name="evidence", methods=["autonorm", "frozen_ln"], seeds=[0, 1, 2], epochs=2, batch_size=32
)


def _trial_with_history(engine, study_id, method, seed, *, gated):
    key = f"{study_id}/final/{method}/seed{seed}"
    epochs = {
        0: {"objective": 0.1, "init_erank_jacobian": 0.6 + seed / 10, "init_erank_repr_first": 0.9},
        1: {"objective": 0.7},
        2: {"objective": 0.8},
    }
    if gated:
        for epoch, weight in ((0, 0.5), (1, 0.3), (2, 0.1 + seed / 100)):
            epochs[epoch].update(
                {"gate_dyt_weight_0": weight, "gate_dyt_weight_1": 1 - weight, "gate_entropy_0": 0.4}
            )
    final = {**epochs[2], "test_accuracy": 0.9 + seed / 100}
    with session_scope(engine) as session:
        add_trial(
            session,
            study_id,
            key,
            method=method,
            config={"method": method, "seed": seed, "knobs": {}},
            seed=seed,
            metrics=final,
            metric_value=final["test_accuracy"],
        )
        add_epochs(session, study_id, key, epochs)


@pytest.fixture
def study_with_histories(client, app_engine) -> str:
    study_id = submit(client, SPEC)
    for seed in range(3):
        _trial_with_history(app_engine, study_id, "autonorm", seed, gated=True)
        _trial_with_history(app_engine, study_id, "frozen_ln", seed, gated=False)
    return study_id


def test_the_json_results_carry_the_gate_and_rank_evidence(client, study_with_histories):
    payload = client.get("/results/digits").json()
    assert {row["method"] for row in payload["rows"]} == {"autonorm", "frozen_ln"}  # the table is unchanged
    evidence = payload["evidence"]
    [gated] = evidence["gates"]["methods"]
    assert gated["label"] == "autonorm" and gated["n_trials"] == 3
    assert gated["epochs"] == [0, 1, 2]
    assert gated["dyt_weight_by_epoch"][0] == pytest.approx([0.5, 0.3, 0.11])
    assert gated["layers"][0]["dyt_weight"]["mean"] == pytest.approx(0.11)
    ranks = evidence["ranks"]
    assert len(ranks["points"]) == 6 and ranks["rank_key"] == "init_erank_jacobian"
    assert ranks["metric"] == "accuracy"


def test_a_chosen_metric_is_the_y_of_the_rank_scatter(client, study_with_histories):
    evidence = client.get("/results/digits", params={"metric": "objective"}).json()["evidence"]
    assert {p["value"] for p in evidence["ranks"]["points"]} == {0.8}


def test_the_html_page_shows_the_evidence_figures_below_the_table(client, study_with_histories):
    page = client.get("/results/digits", params={"format": "html"}).text
    assert page.index("<table") < page.index("Mechanism evidence")
    assert 'id="gate_dyt_weight_heatmap_autonorm"' in page
    assert 'id="final_metric_vs_init_rank"' in page


def test_results_without_histories_have_an_empty_evidence_and_no_figures(client, app_engine):
    study_id = submit(client, SPEC)
    key = trial_key(study_id, "final", "frozen_ln", 0)
    add_trial(app_engine, study_id, key, method="frozen_ln", metrics={"test_accuracy": 0.9}, metric_value=0.9)
    assert client.get("/results/digits").json()["evidence"]["gates"] is None
    assert "Mechanism evidence" not in client.get("/results/digits", params={"format": "html"}).text
