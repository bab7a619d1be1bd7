"""A study's sequential monitor as its spec defines it: its arms (methods, or a grid's points) and the
reference they are compared with (none in a grid, whose comparisons are the design's pairs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studies.sequential.looks import SequentialMonitor

if TYPE_CHECKING:
    from studies.spec import StudySpec

__all__ = ["monitor_for"]


def monitor_for(spec: StudySpec, *, higher_is_better: bool) -> SequentialMonitor:
    """A fresh monitor of `spec`'s sequential design (the spec must have one)."""
    assert spec.sequential is not None, "only a sequential study has a monitor"
    return SequentialMonitor(
        spec.sequential,
        methods=spec.sequential_arms,
        reference=spec.sequential_reference,
        higher_is_better=higher_is_better,
    )
