"""Two studies side by side: what their specs set differently, and each one's own results table (never
pooled, so a seed both ran is not counted once)."""

from __future__ import annotations

from service.web.compare import spec_differences
from tests.factories import digits_spec, submit
from tests.service.web.store_rows import record, start

HTML = {"Accept": "text/html"}


def test_spec_differences_are_dotted_settings_with_both_values_and_ignore_the_names():
    a = {"name": "a", "budget": {"epochs": 3, "batch_size": 32}, "methods": ["dyt", "frozen_ln"]}
    b = {
        "name": "b",
        "budget": {"epochs": 5, "batch_size": 32},
        "methods": ["dyt", "frozen_ln"],
        "seeds": [0],
    }
    found = [(d.key, d.a, d.b) for d in spec_differences(a, b)]
    assert found == [("budget.epochs", "3", "5"), ("seeds", "–", "[0]")]


def _study(client, engine, *, epochs: int, base: float, slope: float = 0.01) -> str:
    spec = digits_spec(
        name=f"epochs-{epochs}", seeds=[0, 1, 2], kind="grid", search={"lr": 0.005}, epochs=epochs
    )
    study_id = submit(client, spec)
    start(engine, study_id)
    for method in spec["methods"]:
        for seed in spec["seeds"]:
            record(engine, study_id, method, seed, epochs={1: base + slope * seed}, finished=True)
    return study_id


def test_the_compare_page_shows_the_spec_differences_and_each_studys_own_table(client, app_engine):
    short = _study(client, app_engine, epochs=3, base=0.80)
    longer = _study(client, app_engine, epochs=5, base=0.90)
    page = client.get("/compare", params={"a": short, "b": longer}, headers=HTML)
    assert page.status_code == 200
    differences = page.text.split('id="spec-differences"', 1)[1].split("</table>", 1)[0]
    assert (
        '<tr data-key="budget.epochs"><td><code>budget.epochs</code></td><td><code>3</code></td><td><code>5</code></td></tr>'
        in differences
    )
    # Each side's own means: 0.81 for the short study's seeds, 0.91 for the longer one's (not pooled).
    first = page.text.split(f'data-study-id="{short}"', 1)[1].split("</section>", 1)[0]
    second = page.text.split(f'data-study-id="{longer}"', 1)[1].split("</section>", 1)[0]
    assert "0.81" in first and "0.91" not in first
    assert "0.91" in second and "0.81" not in second


def test_an_unknown_study_is_a_not_found_page(client, app_engine):
    short = _study(client, app_engine, epochs=3, base=0.80)
    page = client.get("/compare", params={"a": short, "b": "0" * 32}, headers=HTML)
    assert page.status_code == 404 and "0" * 32 in page.text


def test_the_compare_page_gives_each_shared_rows_difference_paired_by_seed(client, app_engine):
    short = _study(client, app_engine, epochs=3, base=0.80)
    longer = _study(client, app_engine, epochs=5, base=0.90, slope=0.02)  # +0.10, +0.11, +0.12 by seed
    page = client.get("/compare", params={"a": short, "b": longer}, headers=HTML)
    paired = page.text.split('id="paired-between"', 1)[1].split("</table>", 1)[0]
    row = paired.split('<tr data-row="frozen_ln">', 1)[1].split("</tr>", 1)[0]
    assert '<td class="number">3</td>' in row and "+0.11" in row  # three seeds, mean difference 0.11


def test_the_compare_endpoint_pairs_every_later_study_with_the_first(client, app_engine):
    short = _study(client, app_engine, epochs=3, base=0.80)
    longer = _study(client, app_engine, epochs=5, base=0.90, slope=0.02)
    body = client.get("/compare", params={"study": [short, longer]}).json()
    assert body["against"] == short and body["metric"] == "test_accuracy"
    first, second = body["studies"]
    assert first["paired"] == [] and first["spec_differences"] == []
    assert {"key": "budget.epochs", "a": "3", "b": "5"} in second["spec_differences"]
    rows = {r["row"]: r for r in second["paired"]}
    assert set(rows) == set(digits_spec()["methods"])
    for row in rows.values():
        assert row["seeds"] == 3 and abs(row["difference"] - 0.11) < 1e-9
        assert row["low"] < 0.11 < row["high"] and row["p_adjusted"] is not None


def test_comparing_fewer_than_two_studies_is_a_422_at_study(client, app_engine):
    short = _study(client, app_engine, epochs=3, base=0.80)
    response = client.get("/compare", params={"study": [short]})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "study"]
