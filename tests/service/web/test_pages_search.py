"""The home page's search and tags: a plain GET form with the API's own parameters narrows the list, tag
chips narrow it by a tag, a value that names nothing is said on the page and left out, and the study page
shows its tags and offers deleting only once the study has ended."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs

import pytest

from studies.store import session_scope, set_study_status
from tests.factories import submit
from tests.service.conftest import AUTH
from tests.service.web.store_rows import SPEC, finish, start

HTML = {"Accept": "text/html"}


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text of each element with an id."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def having(self, name: str, value: str | None = None) -> list[dict[str, str | None]]:
        return [a for _, a in self.tags if name in a and (value is None or a[name] == value)]


def _study(client, name: str, *, tags=(), **changes) -> str:
    study_id = submit(client, {**SPEC, "name": name, **changes})
    if tags:
        response = client.put(f"/studies/{study_id}/tags", json={"tags": list(tags)}, headers=AUTH)
        assert response.status_code == 200, response.text
    return study_id


def _rows(page: str) -> list[str]:
    return [r["data-study-id"] for r in _Elements(page).having("data-study-id") if r["data-study-id"]]


@pytest.fixture
def studies(client, app_engine) -> dict[str, str]:
    ids = {
        "alpha": _study(client, "Alpha sweep", tags=["paper", "v1"], description="AutoNorm vs DyT"),
        "beta": _study(client, "beta", tags=["paper"], methods=["frozen_ln"]),
        "gamma": _study(client, "gamma", dataset="mnist_5k"),
    }
    with session_scope(app_engine) as session:
        set_study_status(session, study_id=ids["gamma"], status="cancelled")
    return ids


def _home(client, studies, params) -> tuple[str, list[str]]:
    response = client.get("/", params=params, headers=HTML)
    assert response.status_code == 200
    by_id = {study_id: name for name, study_id in studies.items()}
    return response.text, [by_id[study_id] for study_id in _rows(response.text)]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ["gamma", "beta", "alpha"]),
        ({"q": "alpha"}, ["alpha"]),
        ({"q": "dyt"}, ["alpha"]),
        ({"dataset": "mnist_5k"}, ["gamma"]),
        ({"method": "dyt"}, ["gamma", "alpha"]),
        ({"status": "cancelled"}, ["gamma"]),
        ({"tag": "paper"}, ["beta", "alpha"]),
        ({"tag": ["paper", "v1"]}, ["alpha"]),
        ({"tag": "paper v1"}, ["alpha"]),  # the form's one field, several tags
        ({"q": "", "dataset": "", "method": "", "status": "", "tag": ""}, ["gamma", "beta", "alpha"]),
    ],
    ids=lambda value: repr(value) if isinstance(value, dict) else None,
)
def test_the_search_form_narrows_the_list_with_the_apis_parameters(client, studies, params, expected):
    _, listed = _home(client, studies, params)
    assert listed == expected


def test_the_form_shows_the_search_it_made(client, studies):
    page, _ = _home(client, studies, {"q": "sweep", "method": "dyt", "tag": ["paper", "v1"]})
    elements = _Elements(page)
    assert elements.having("name", "q")[0]["value"] == "sweep"
    assert elements.having("name", "tag")[0]["value"] == "paper v1"
    assert "<option selected>dyt</option>" in page
    assert elements.having("id", "clear-search")[0]["href"] == "/"


def test_the_poll_asks_the_api_for_the_same_search(client, studies):
    page, _ = _home(client, studies, {"q": "sweep", "tag": ["paper", "v1"], "status": ""})
    [table] = _Elements(page).having("id", "studies")
    assert parse_qs(table["data-query"]) == {"q": ["sweep"], "tag": ["paper", "v1"]}
    api = client.get(f"/studies?{table['data-query']}").json()
    assert [s["id"] for s in api] == [studies["alpha"]]


def test_each_row_shows_its_tags_as_links_to_the_list_narrowed_to_them(client, studies):
    page, _ = _home(client, studies, {})
    table = page.split('<table id="studies"', 1)[1]  # the rows, not the chips of every tag above them
    chips = [a["href"] for a in _Elements(table).having("class", "tag")]
    assert chips.count("/?tag=paper") == 2 and chips.count("/?tag=v1") == 1  # alpha's and beta's rows
    assert 'data-tags="paper v1"' in page


def test_the_tag_chips_list_every_tag_in_use_and_add_or_remove_it_from_the_search(client, studies):
    page, _ = _home(client, studies, {"q": "a"})
    assert '<a class="tag" href="/?q=a&amp;tag=paper" title="2 studies">paper</a>' in page
    assert '<a class="tag" href="/?q=a&amp;tag=v1" title="1 study">v1</a>' in page
    page, _ = _home(client, studies, {"q": "a", "tag": "paper"})
    assert '<a class="tag active" href="/?q=a" title="leave this tag out of the search">paper ×</a>' in page
    assert 'href="/?q=a&amp;tag=paper&amp;tag=v1"' in page


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"method": "layernorm"}, "unknown method &#39;layernorm&#39; (left out)"),
        ({"dataset": "imagenet"}, "unknown dataset &#39;imagenet&#39; (left out)"),
        ({"status": "done"}, "unknown status &#39;done&#39; (left out)"),
        ({"tag": "Paper"}, "(&#39;paper&#39; would do) (left out)"),
    ],
)
def test_a_value_that_names_nothing_is_said_on_the_page_and_left_out(client, studies, params, said):
    page, listed = _home(client, studies, params)
    assert said in page
    assert listed == ["gamma", "beta", "alpha"]


def test_search_text_is_escaped(client, studies):
    page, listed = _home(client, studies, {"q": '"><script>alert(1)</script>'})
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page
    assert listed == []
    assert "No study matches this search." in page


def test_the_study_page_shows_its_tags(client, studies):
    page = client.get(f"/studies/{studies['alpha']}", headers=HTML).text
    assert [a["href"] for a in _Elements(page).having("class", "tag")] == ["/?tag=paper", "/?tag=v1"]
    untagged = client.get(f"/studies/{studies['gamma']}", headers=HTML).text
    assert f"<code>normlab tag {studies['gamma']} &lt;tag&gt;</code> adds one" in untagged


def test_the_study_page_offers_deleting_only_once_the_study_has_ended(client, app_engine):
    study_id = _study(client, "to delete")
    [form] = _Elements(client.get(f"/studies/{study_id}", headers=HTML).text).having("id", "delete")
    assert "hidden" in form
    start(app_engine, study_id)
    finish(app_engine, study_id)
    page = client.get(f"/studies/{study_id}", headers=HTML).text
    [form] = _Elements(page).having("id", "delete")
    assert "hidden" not in form
    assert _Elements(page).having("name", "confirm") and _Elements(page).having("name", "token")
