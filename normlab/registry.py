"""The registry: a section per kind of record, and an overlay for a plugin's records seen only as facts.

A record is added once; adding a different record under a taken name is refused (a plugin cannot replace
a built-in or another plugin's record), adding an equal one again is a no-op (a module imported twice).
The overlay (`Registry.overlay`) holds records for the current context only: the API validates a spec
that names a plugin's methods inside it, from the facts the plugin's check reported, without ever
importing the plugin. Lookups see the overlay first, then the records added for good.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

from normlab.records import RECORD_TYPES, Backbone, Dataset, Knob, Method, NormKind, Record

__all__ = ["REGISTRY", "Registry", "RegistryError", "Section", "UnknownName"]

R = TypeVar("R", NormKind, Method, Knob, Backbone, Dataset)

_SINGULAR = {
    "norms": "norm kind",
    "methods": "method",
    "knobs": "knob",
    "backbones": "backbone",
    "datasets": "dataset",
}


_NO_OVERLAY: Mapping[str, Mapping[str, Record]] = MappingProxyType({})


class RegistryError(ValueError):
    """A record that cannot be added: its name is taken by a different record."""


class UnknownName(KeyError):
    """A name no record has; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


class Section(Generic[R]):
    """The records of one kind, by name, in the order they were added."""

    def __init__(self, name: str, overlay: contextvars.ContextVar[Mapping[str, Mapping[str, Record]]]):
        self.name = name
        self.singular = _SINGULAR[name]
        self._records: dict[str, R] = {}
        self._overlay = overlay

    def add(self, record: R) -> R:
        if not isinstance(record, RECORD_TYPES[self.name]):
            raise TypeError(f"{self.name} holds {RECORD_TYPES[self.name].__name__} records, not {record!r}")
        taken = self._records.get(record.name)
        if taken is not None and taken != record:
            raise RegistryError(
                f"{self.singular} {record.name!r} is already registered (by {taken.source}); "
                f"{record.source} must choose another name"
            )
        if taken is None or (_code(taken) is None and _code(record) is not None):  # facts, then their code
            self._records[record.name] = record
        return self._records[record.name]

    def _visible(self) -> dict[str, R]:
        extra = self._overlay.get().get(self.name, {})
        return {**self._records, **extra} if extra else self._records  # type: ignore[dict-item]

    def get(self, name: str) -> R:
        visible = self._visible()
        if name not in visible:
            raise UnknownName(f"unknown {self.singular} {name!r}; choose one of {', '.join(visible)}")
        return visible[name]

    def find(self, name: str) -> R | None:
        return self._visible().get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._visible()

    def __iter__(self) -> Iterator[R]:
        return iter(list(self._visible().values()))

    def __len__(self) -> int:
        return len(self._visible())

    def names(self) -> tuple[str, ...]:
        return tuple(self._visible())

    def builtin_names(self) -> tuple[str, ...]:
        return tuple(name for name, record in self._records.items() if record.source == "builtin")

    def as_mapping(self) -> Mapping[str, R]:
        """A read-only name -> record view that stays current (for callers that index by name)."""
        return _SectionView(self)

    def remove_source(self, source: str) -> None:
        """Forget every record `source` added (tests; a process that loaded a plugin to check it)."""
        for name in [n for n, r in self._records.items() if r.source == source]:
            del self._records[name]


class _SectionView(Mapping[str, R]):
    def __init__(self, section: Section[R]):
        self._section: Section[R] = section

    def __getitem__(self, name: str) -> R:
        found = self._section.find(name)
        if found is None:
            raise UnknownName(f"unknown {self._section.singular} {name!r}")
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._section.names())

    def __len__(self) -> int:
        return len(self._section)


class Registry:
    """One section per kind of record: norms, methods, knobs, backbones, datasets."""

    def __init__(self) -> None:
        self._overlay: contextvars.ContextVar[Mapping[str, Mapping[str, Record]]] = contextvars.ContextVar(
            f"normlab_registry_overlay_{id(self)}", default=_NO_OVERLAY
        )
        self.norms: Section[NormKind] = Section("norms", self._overlay)
        self.methods: Section[Method] = Section("methods", self._overlay)
        self.knobs: Section[Knob] = Section("knobs", self._overlay)
        self.backbones: Section[Backbone] = Section("backbones", self._overlay)
        self.datasets: Section[Dataset] = Section("datasets", self._overlay)

    def section(self, name: str) -> Section:  # type: ignore[type-arg]
        return getattr(self, name)  # type: ignore[no-any-return]

    def add(self, record: Record) -> Record:
        return self.section(type(record).section).add(record)  # type: ignore[arg-type]

    def backbone_of(self, model: str) -> Backbone | None:
        """The backbone a model name builds: the backbone of that name, else the one with a preset of that
        name (None: no registered or overlaid backbone has it)."""
        found = self.backbones.find(model)
        if found is not None:
            return found
        return next((record for record in self.backbones if model in record.presets), None)

    @contextlib.contextmanager
    def overlay(self, records: Iterable[Record]) -> Iterator[None]:
        """Within the block, `records` are visible beside the registered ones. A record whose name is
        registered already must equal it (a plugin that is also loaded in this process)."""
        layered: dict[str, dict[str, Record]] = {k: dict(v) for k, v in self._overlay.get().items()}
        for record in records:
            section = type(record).section
            taken = self.section(section)._records.get(record.name)
            if taken is not None and taken.source == record.source:
                # The plugin is imported here too (the driver): its check's facts (what it measured) with
                # the imported code.
                record = _with_code_of(record, taken)
            elif taken is not None and taken != record:
                raise RegistryError(
                    f"{taken.section[:-1]} {record.name!r} is already registered (by {taken.source}); "
                    f"{record.source} must choose another name"
                )
            layered.setdefault(section, {})[record.name] = record
        token = self._overlay.set(layered)
        try:
            yield
        finally:
            self._overlay.reset(token)


def _code(record: Record) -> object:
    return getattr(record, "layer", None) or getattr(record, "build", None)


def _with_code_of(record: Record, imported: Record) -> Record:
    code = {name: getattr(imported, name) for name in ("layer", "build") if hasattr(imported, name)}
    return dataclasses.replace(record, **code) if code else record


# The process's registry. Built-ins add themselves when their modules are imported (studies.methods,
# studies.knobs, studies.datasets, models.norms, ...); plugins through normlab.plugin.
REGISTRY = Registry()
