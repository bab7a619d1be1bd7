"""The home page's search: the study list's filters as its form and links send them (the API's own query
parameters: q, dataset, method, status, tag), read leniently.

A page answers a person, not a client: a value the API would refuse with a 422 (an unknown method, a tag
no study can carry) is left out of the search and named on the page instead. No FastAPI and no database
here; the page route reads the store with `StudySearch.filters`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from studies.methods import known_methods
from studies.spec import KNOWN_DATASETS
from studies.store import StudyStatus, tag_problem

__all__ = ["StudySearch", "read_search"]

_TAG_SEPARATORS = re.compile(r"[\s,]+")  # the form's tag field takes several: "paper v1" or "paper, v1"


@dataclass(frozen=True)
class StudySearch:
    q: str = ""  # text in the name or description
    dataset: str = ""  # "": any
    method: str = ""
    status: str = ""
    tags: tuple[str, ...] = ()  # every one of them
    problems: tuple[str, ...] = ()  # why a value given was left out of the search

    @property
    def active(self) -> bool:
        return bool(self.q or self.dataset or self.method or self.status or self.tags)

    def filters(self) -> dict[str, Any]:
        """The keyword arguments of studies.store.list_studies for this search."""
        return {
            "q": self.q or None,
            "dataset": self.dataset or None,
            "method": self.method or None,
            "status": self.status or None,
            "tags": self.tags,
        }

    def query(self) -> str:
        """The search as a query string of the API's parameters ("" for none): the page's own links and
        its poll of GET /studies use it."""
        pairs = [
            (name, value) for name in ("q", "dataset", "method", "status") if (value := getattr(self, name))
        ]
        return urlencode(pairs + [("tag", tag) for tag in self.tags])

    def url_with_tag(self, tag: str) -> str:
        """The home page narrowed by one more tag (the tag chips' links)."""
        return _home(replace(self, tags=tuple(dict.fromkeys((*self.tags, tag)))))

    def url_without_tag(self, tag: str) -> str:
        return _home(replace(self, tags=tuple(t for t in self.tags if t != tag)))


def _home(search: StudySearch) -> str:
    query = search.query()
    return f"/?{query}" if query else "/"


def read_search(
    *, q: str | None, dataset: str | None, method: str | None, status: str | None, tags: Iterable[str]
) -> StudySearch:
    """The search the page was asked for; empty values are no filter, and a value that names nothing is
    left out with the reason in `problems`."""
    problems: list[str] = []

    def choice(name: str, value: str | None, known: Iterable[str]) -> str:
        value = (value or "").strip()
        known = tuple(known)
        if value and value not in known:
            problems.append(f"unknown {name} '{value}' (left out); choose one of {', '.join(known)}")
            return ""
        return value

    kept: list[str] = []
    for tag in (t for given in tags for t in _TAG_SEPARATORS.split(given) if t):
        problem = tag_problem(tag)
        if problem is not None:
            problems.append(f"{problem} (left out)")
        elif tag not in kept:
            kept.append(tag)
    text = (q or "").strip()
    if "\x00" in text:  # the store cannot search for a NUL character (PostgreSQL refuses it)
        problems.append("the search text holds a NUL character (left out)")
        text = ""
    return StudySearch(
        q=text,
        dataset=choice("dataset", dataset, KNOWN_DATASETS),
        method=choice("method", method, known_methods()),
        status=choice("status", status, (s.value for s in StudyStatus)),
        tags=tuple(kept),
        problems=tuple(problems),
    )
