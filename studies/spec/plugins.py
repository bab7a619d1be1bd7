"""A spec's `plugins`: user code a study runs, and what the server learned of it when it checked it.

A spec names each plugin by `path` (a .py file or a package directory on the server's side, or sent
inline as `files` by `normlab submit`) or by `entry_point` (an installed distribution). The server reads
and checks every plugin in a child process before it stores the study (service.plugins), and fills in
what it found: the source's hash, its files, the package it ships as and `provides`, the facts of every
record it registered. The spec then validates the methods, knobs, datasets and backbones the plugin
brings from those facts (normlab.REGISTRY.overlay), so the API never imports the plugin; the driver and
the trials import the stored source itself (normlab.loading).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from normlab.loading import records_from_facts
from normlab.records import RECORD_TYPES, Record
from studies.spec.distributions import _Strict
from studies.spec.user_data import UserDataset

__all__ = ["PluginEntry", "plugin_records"]


class PluginEntry(_Strict):
    """One plugin of a study: where it comes from, and (filled in by the server's check) what it is."""

    path: str | None = Field(None, min_length=1, max_length=1000)
    entry_point: str | None = Field(None, min_length=1, max_length=200)
    # Inline source (path within the package -> text), as `normlab submit` sends a local plugin.
    files: dict[str, str] | None = None
    # Filled in by the server's check; a client's own values are replaced.
    package: str | None = None
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    distribution: str | None = None
    provides: dict[str, list[dict[str, Any]]] | None = None
    checks: list[dict[str, Any]] | None = None  # the conformance checks of each norm layer it registers

    @model_validator(mode="before")
    @classmethod
    def _path_shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _one_source(self) -> PluginEntry:
        if (self.path is None) == (self.entry_point is None):
            raise ValueError("a plugin names exactly one of `path` (a .py file or package) or `entry_point`")
        if self.provides is not None:
            unknown = set(self.provides) - set(RECORD_TYPES)
            if unknown:
                raise ValueError(
                    f"provides: unknown sections {sorted(unknown)}; known: {sorted(RECORD_TYPES)}"
                )
        return self

    @property
    def ref(self) -> str:
        return self.path if self.path is not None else f"entry_point:{self.entry_point}"


def plugin_records(data: Any) -> list[Record]:
    """The records a raw spec's checked plugins and its user datasets provide (none for unchecked or
    malformed entries: the fields' own validation reports those)."""
    if not isinstance(data, Mapping):
        return []
    records: list[Record] = []
    for raw in data.get("user_datasets") or ():
        try:
            records.append(UserDataset.model_validate(raw).record())
        except (TypeError, ValueError):
            continue
    for raw in data.get("plugins") or ():
        if not isinstance(raw, Mapping) or not isinstance(raw.get("provides"), Mapping):
            continue
        try:
            records.extend(records_from_facts(raw["provides"]))
        except (TypeError, ValueError, KeyError):
            continue
    return records
