"""Tags of studies: the rules a tag follows, and setting, adding, removing and listing them.

A tag is 1 to 40 characters of lowercase letters, digits, `-`, `_` and `.` (`baseline`, `paper-2`,
`v1.3`), and a study carries at most 20. The rules live here only: the API states them in its schema from
these constants, so a bad tag is refused there with its field path before it reaches the store, and here
for every other caller.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from studies.store._studies import _get_row, _progress_for
from studies.store.errors import InvalidTagError
from studies.store.tables import Study, StudyTag
from studies.store.views import StudyView

__all__ = [
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "TAG_PATTERN",
    "add_tags",
    "check_tags",
    "list_tags",
    "remove_tags",
    "set_tags",
    "tag_problem",
]

MAX_TAG_LENGTH = 40  # the column's width (tables.StudyTag.tag)
MAX_TAGS = 20  # per study: tags sort studies into a few groups, they are no place for notes
TAG_PATTERN = r"^[a-z0-9._-]{1,40}$"  # what the API's schema states; `tag_problem` says the same in words
_TAG = re.compile(TAG_PATTERN)


def tag_problem(tag: object) -> str | None:
    """Why `tag` is no tag, in words for the person who typed it; None when it is one."""
    if not isinstance(tag, str):
        return f"a tag is text, not {type(tag).__name__}"
    if not tag:
        return "a tag is not empty"
    if len(tag) > MAX_TAG_LENGTH:
        return f"tag '{tag[:MAX_TAG_LENGTH]}...' is longer than {MAX_TAG_LENGTH} characters"
    if _TAG.fullmatch(tag) is None:
        # Upper case is the common slip: name the tag that would do.
        hint = f" ('{tag.lower()}' would do)" if _TAG.fullmatch(tag.lower()) else ""
        return f"tag {tag!r} may hold only lowercase letters, digits, '-', '_' and '.'{hint}"
    return None


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """The tags as a study keeps them (alphabetical), or InvalidTagError for the first one that breaks a
    rule, a tag listed twice, or more than MAX_TAGS of them."""
    seen: set[str] = set()
    for index, tag in enumerate(tags):
        problem = tag_problem(tag)
        if problem is None and tag in seen:
            problem = f"tag '{tag}' is listed twice"
        if problem is not None:
            raise InvalidTagError(problem, index=index, tag=tag if isinstance(tag, str) else None)
        seen.add(tag)
    if len(seen) > MAX_TAGS:
        raise InvalidTagError(f"a study has at most {MAX_TAGS} tags, not {len(seen)}")
    return tuple(sorted(seen))


def set_tags(session: Session, *, study_id: str, tags: Sequence[str]) -> StudyView:
    """Give the study exactly `tags` (an empty list removes every tag); returns the study."""
    wanted = check_tags(tags)
    row = _get_row(session, study_id, for_update=True)  # concurrent taggers of one study queue here
    return _replace(session, row, wanted)


def add_tags(session: Session, *, study_id: str, tags: Iterable[str]) -> StudyView:
    """Add `tags` to the study's own (one it has already is no change); returns the study."""
    new = check_tags(list(dict.fromkeys(tags)))  # the same tag twice here only means it once
    row = _get_row(session, study_id, for_update=True)
    merged = {t.tag for t in row.tags} | set(new)
    if len(merged) > MAX_TAGS:
        raise InvalidTagError(
            f"study '{study_id}' has {len(row.tags)} tags; with these it would have {len(merged)}, more than "
            f"the {MAX_TAGS} a study may carry: remove some first"
        )
    return _replace(session, row, merged)


def remove_tags(session: Session, *, study_id: str, tags: Iterable[str]) -> StudyView:
    """Remove `tags` from the study (one it does not have is no change); returns the study."""
    unwanted = set(tags)
    row = _get_row(session, study_id, for_update=True)
    return _replace(session, row, {t.tag for t in row.tags} - unwanted)


def list_tags(session: Session) -> dict[str, int]:
    """Every tag some study carries, alphabetically, with how many studies carry it."""
    query = select(StudyTag.tag, func.count()).group_by(StudyTag.tag).order_by(StudyTag.tag)
    return {tag: count for tag, count in session.execute(query)}


def _replace(session: Session, row: Study, wanted: Iterable[str]) -> StudyView:
    # Through the collection, so the study's loaded tags (what its view reads) are the ones now stored; a
    # tag it keeps keeps its row, a dropped one is deleted as an orphan.
    wanted = set(wanted)
    kept = [t for t in row.tags if t.tag in wanted]
    added = [StudyTag(tag=tag) for tag in wanted - {t.tag for t in kept}]
    row.tags = sorted(kept + added, key=lambda t: t.tag)
    session.flush()
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])
