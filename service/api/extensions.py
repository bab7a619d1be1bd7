"""What a request that shows stored studies needs to know of their plugins and user datasets.

The API imports no plugin: a study's plugin methods and user datasets are known from the facts its
stored spec carries (studies.store.extension_records). A route that shows studies reads those records
and keeps them visible (normlab.REGISTRY.overlay) for the whole request, its worker threads included
(they run in a copy of the request's context).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from functools import partial

from normlab import REGISTRY
from service.api.load_shedding import DatabaseGate
from studies.store import extension_records

__all__ = ["studies_visible"]


@contextlib.asynccontextmanager
async def studies_visible(
    database: DatabaseGate,
    *,
    dataset: str | None = None,
    study_ids: Iterable[str] = (),
    every_study: bool = False,
) -> AsyncIterator[None]:
    """Within the block, the records of every study of `dataset` and of the studies named (`every_study`:
    of all stored studies) are known."""
    records = await database.read(
        partial(extension_records, dataset=dataset, study_ids=tuple(study_ids), every_study=every_study)
    )
    with REGISTRY.overlay(records):
        yield
