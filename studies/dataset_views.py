"""Read-only views of the dataset records (normlab.REGISTRY.datasets) shaped like the tables callers used
to import: a sequence of names, a mapping of one fact by name.

A view holds nothing: every lookup reads the registry at that moment, so a dataset a plugin registers, or
one an overlay shows for the current context, is in every view as soon as it is in the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar, overload

from normlab.records import Dataset
from normlab.registry import REGISTRY

__all__ = ["DatasetFacts", "DatasetNames"]

V = TypeVar("V")


class DatasetNames(Sequence[str]):
    """The names of the registered datasets, in the order they were registered."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return REGISTRY.datasets.names()[index]

    def __len__(self) -> int:
        return len(REGISTRY.datasets)

    def __contains__(self, name: object) -> bool:
        return name in REGISTRY.datasets

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY.datasets.names())

    def __repr__(self) -> str:
        return f"DatasetNames({REGISTRY.datasets.names()!r})"


class DatasetFacts(Mapping[str, V]):
    """One fact of each registered dataset, by name; a dataset whose fact is None has no entry (as a
    paper dataset has no stand-in relation)."""

    def __init__(self, fact: Callable[[Dataset], V | None]) -> None:
        self._fact = fact

    def __getitem__(self, name: str) -> V:
        record = REGISTRY.datasets.find(name)
        value = None if record is None else self._fact(record)
        if value is None:
            raise KeyError(name)
        return value

    def _items(self) -> dict[str, V]:
        facts = {record.name: self._fact(record) for record in REGISTRY.datasets}
        return {name: value for name, value in facts.items() if value is not None}

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return f"DatasetFacts({self._items()!r})"
