"""GET /results never lets an incomplete study hide a complete one: by default it shows the newest complete
study and names the newer incomplete ones it passed over; every shown study's completeness is in the JSON
(the issue's restored database: a study marked succeeded with most of its final trials missing)."""

from __future__ import annotations

from tests.factories import (
    add_final_trials,
    add_study,
    digits_spec,
    finish_study,
    run_to_the_end,
    start_study,
)

SPEC = digits_spec(name="complete", methods=["frozen_ln", "dyt"], seeds=[0, 1, 2])


def _studies(app_engine) -> tuple[str, str]:
    """An older complete study, and a newer one marked succeeded with only one final trial stored."""
    complete = add_study(app_engine, SPEC).id
    run_to_the_end(app_engine, complete, {"frozen_ln": [0.80, 0.81, 0.82], "dyt": [0.70, 0.71, 0.72]})
    partial = add_study(app_engine, {**SPEC, "name": "restored"}).id
    start_study(app_engine, partial, ray_job_id="raysubmit_2")
    add_final_trials(app_engine, partial, {"frozen_ln": [0.9]})
    finish_study(app_engine, partial)
    return complete, partial


def test_by_default_the_newest_complete_study_is_shown_and_the_incomplete_newer_one_is_named(
    client, app_engine
):
    complete, partial = _studies(app_engine)
    body = client.get("/results/digits").json()
    assert [s["study_id"] for s in body["studies"]] == [complete]
    assert body["studies"][0]["complete"] is True and body["studies"][0]["recorded"] == 6
    assert [row["n"] for row in body["rows"]] == [3, 3]  # the complete study's seeds, not 0/3
    (passed,) = body["passed_over"]
    assert (passed["study_id"], passed["complete"], passed["planned"], passed["recorded"]) == (
        partial,
        False,
        6,
        1,
    )
    assert passed["missing"] == [
        "frozen_ln seed 1",
        "frozen_ln seed 2",
        "dyt seed 0",
        "dyt seed 1",
        "dyt seed 2",
    ]
    assert "marked succeeded but 1 of 6" in passed["reason"]


def test_an_incomplete_study_asked_for_by_id_is_shown_saying_it_is_incomplete(client, app_engine):
    _, partial = _studies(app_engine)
    body = client.get(f"/results/digits?study={partial}").json()
    (shown,) = body["studies"]
    assert (shown["study_id"], shown["complete"]) == (partial, False)
    assert body["passed_over"] == []


def test_pooled_studies_each_state_their_completeness(client, app_engine):
    complete, partial = _studies(app_engine)
    body = client.get("/results/digits?study=all").json()
    assert {s["study_id"]: s["complete"] for s in body["studies"]} == {complete: True, partial: False}


def test_with_no_complete_study_the_newest_with_results_is_shown_as_incomplete(client, app_engine):
    partial = add_study(app_engine, SPEC).id
    start_study(app_engine, partial)
    add_final_trials(app_engine, partial, {"frozen_ln": [0.9]})
    body = client.get("/results/digits").json()
    assert [(s["study_id"], s["complete"], s["status"]) for s in body["studies"]] == [
        (partial, False, "running")
    ]


def test_the_markdown_table_says_each_studys_completeness_and_the_study_it_passed_over(client, app_engine):
    complete, partial = _studies(app_engine)
    text = client.get("/results/digits?format=md").text
    block = text.split("**Completeness**", 1)[1].split("| method", 1)[0]
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    assert lines[0] == (
        f"- study {complete} (complete): complete: 6 of 6 planned final or grid trials have an outcome"
    )
    assert lines[1].startswith(
        f"- passed over, newer but not complete: study {partial} (restored): incomplete:"
    )
    assert "missing: 5 final trials (frozen_ln seed 1, frozen_ln seed 2, dyt seed 0" in lines[1]
    # The incomplete study asked for by id: its table says what it lacks before a reader trusts its rows.
    text = client.get(f"/results/digits?study={partial}&format=md").text
    assert text.index("**Completeness**") < text.index("| method")
    assert f"- study {partial} (restored): incomplete: the study is marked succeeded but 1 of 6" in text
    assert "passed over" not in text


def test_the_html_page_says_each_studys_completeness_and_the_study_it_passed_over(client, app_engine):
    complete, partial = _studies(app_engine)
    page = client.get("/results/digits?format=html").text
    section = page.split('<section class="completeness">', 1)[1].split("</section>", 1)[0]
    assert page.index('<section class="completeness">') < page.index("<table>")
    assert f'<li class="complete" data-study-id="{complete}">study <code>{complete}</code>' in section
    passed = section.split(f'<li class="incomplete" data-study-id="{partial}">', 1)[1].split("</li>", 1)[0]
    assert passed.startswith(f"passed over, newer but not complete: study <code>{partial}</code> (restored)")
    assert "missing: 5 final trials (frozen_ln seed 1" in passed
    # Nothing to say where a table was not built from the store's selection (csv has no room for it).
    assert "Completeness" not in client.get("/results/digits?format=csv").text
