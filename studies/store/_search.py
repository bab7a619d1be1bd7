"""What narrows the study list beyond its columns: text in the name or description, a method of the spec,
and tags. Each filter is a WHERE condition on `studies`, so the listing keeps its order and limit.

The methods live in the stored spec (JSON), which SQLite and PostgreSQL search differently; everything
else is plain SQL on both.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, exists, func, or_, select, type_coerce
from sqlalchemy.dialects.postgresql import JSONB

from studies.store.tables import Study, StudyTag

__all__ = ["study_filters"]


def study_filters(
    dialect: str, *, q: str | None = None, method: str | None = None, tags: Sequence[str] = ()
) -> list[ColumnElement[bool]]:
    """Conditions a study must meet: `q` in its name or description (any case; `%` and `_` are plain
    characters), `method` among its spec's methods, and every one of `tags`. None and empty: no condition.
    `dialect`: the session's (sqlite or postgresql)."""
    conditions: list[ColumnElement[bool]] = []
    if q:
        description = Study.spec["description"].as_string()
        conditions.append(
            or_(Study.name.icontains(q, autoescape=True), description.icontains(q, autoescape=True))
        )
    if method:
        conditions.append(_has_method(dialect, method))
    for tag in dict.fromkeys(tags):
        conditions.append(Study.id.in_(select(StudyTag.study_id).where(StudyTag.tag == tag)))
    return conditions


def _has_method(dialect: str, method: str) -> ColumnElement[bool]:
    if dialect == "postgresql":
        # spec -> 'methods' @> '["dyt"]': containment of a JSONB array (the column is JSONB there).
        return type_coerce(Study.spec, JSONB)["methods"].contains([method])
    # SQLite: one row per element of the spec's methods array.
    methods = func.json_each(Study.spec, "$.methods").table_valued("value")
    return exists().select_from(methods).where(methods.c.value == method)
