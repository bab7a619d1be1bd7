"""Tags as the API takes them, in a body (`PUT /studies/{id}/tags`) or a query (`GET /studies?tag=`): the
store's rules (studies.store._tags), stated in the OpenAPI schema and checked with the store's words, so a
bad tag is a 422 at its field path (`["body", "tags", 2]`, `["query", "tag", 0]`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from studies.store import MAX_TAG_LENGTH, MAX_TAGS, TAG_PATTERN, tag_problem

__all__ = ["Tag", "TagsIn"]


def _valid_tag(tag: str) -> str:
    problem = tag_problem(tag)
    if problem is not None:
        raise PydanticCustomError("invalid_tag", "{problem}", {"problem": problem})
    return tag


Tag = Annotated[
    str,
    AfterValidator(_valid_tag),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_TAG_LENGTH, "pattern": TAG_PATTERN}),
]


class TagsIn(BaseModel, extra="forbid"):
    """A study's tags, all of them: what is not listed is removed (an empty list removes every tag)."""

    tags: list[Tag] = Field(
        max_length=MAX_TAGS,
        json_schema_extra={"uniqueItems": True},
        description=f"at most {MAX_TAGS} distinct tags of 1 to {MAX_TAG_LENGTH} lowercase letters, digits, "
        "'-', '_' or '.'",
    )

    @field_validator("tags")
    @classmethod
    def _each_once(cls, tags: list[str]) -> list[str]:
        repeated = sorted({tag for tag in tags if tags.count(tag) > 1})
        if repeated:
            raise PydanticCustomError(
                "repeated_tag",
                "tags are listed once each; repeated: {repeated}",
                {"repeated": ", ".join(repeated)},
            )
        return tags
