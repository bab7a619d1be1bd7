"""Read-only views of a registry section shaped like the tables callers used to import: a sequence of
names, a mapping of one fact by name.

A view holds nothing: every lookup reads the registry at that moment, so a record a plugin registers, or
one an overlay shows for the current context, is in every view as soon as it is in the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, overload

from normlab.registry import Section

__all__ = ["FactView", "LiveNames"]

V = TypeVar("V")


class LiveNames(Sequence[str]):
    """`names()` as a sequence read at each use; `contains` answers `in` where it is wider than the names
    (a model name is a backbone or any of its presets)."""

    def __init__(self, names: Callable[[], Sequence[str]], contains: Callable[[object], bool] | None = None):
        self._names = names
        self._contains = contains

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return self._contains(name) if self._contains is not None else name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __repr__(self) -> str:
        return f"LiveNames({tuple(self._names())!r})"


class FactView(Mapping[str, V]):
    """One fact of each record of a section, by name; a record whose fact is None has no entry (as a
    paper dataset has no stand-in relation)."""

    def __init__(self, section: Section[Any], fact: Callable[[Any], V | None]) -> None:
        self._section = section
        self._fact = fact

    def __getitem__(self, name: str) -> V:
        record = self._section.find(name)
        value = None if record is None else self._fact(record)
        if value is None:
            raise KeyError(name)
        return value

    def _items(self) -> dict[str, V]:
        facts = {record.name: self._fact(record) for record in self._section}
        return {name: value for name, value in facts.items() if value is not None}

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return f"FactView({self._items()!r})"
