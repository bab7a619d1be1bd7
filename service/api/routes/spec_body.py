"""Reading a study spec from a request body: size cap, UTF-8, JSON or YAML, then a pass that keeps out
every value the store cannot keep as JSON, before the spec is validated.

Each rejection is a 4xx naming the problem (a 422 at the field path where there is one): a spec the
store accepted must read back exactly as it was sent, and no body may turn into a 500.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fastapi import Request
from pydantic import ValidationError

from service.api.errors import InvalidSpecError, SpecTooLargeError
from service.api.plugins import check_plugins, plugin_permission
from service.api.routes.text import text_problem
from service.settings import Settings
from studies.spec import SpecFormatError, StudySpec, UnsupportedContentTypeError, parse_spec_text

__all__ = ["MAX_SPEC_DEPTH", "json_problems", "read_spec", "spec_request_body"]

# A real spec nests about five deep (method_search -> method -> knob -> values -> item); far deeper
# nesting is an attack on the parsers' recursion, not a study.
MAX_SPEC_DEPTH = 32
_MAX_PROBLEMS = 20  # enough to fix a spec in one go, bounded so the 422 stays small


def spec_request_body(description: str) -> dict[str, Any]:
    """The OpenAPI `requestBody` of a route that reads a spec with read_spec. Its YAML is described by
    the same StudySpec schema as its JSON (an OpenAPI schema describes the parsed document, whatever
    its media type): a YAML body that is not a mapping of spec fields is not a valid request, as the
    parser's 422 says, so the document and the validator agree."""
    spec = {"schema": {"$ref": "#/components/schemas/StudySpec"}}
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": spec, "application/yaml": spec},
        }
    }


async def read_spec(request: Request, settings: Settings) -> StudySpec:
    """Parse and validate the body by its content type, with the server's study limits. A spec naming
    plugins or user datasets needs the plugin right, and they are checked in a child process first
    (service.api.plugins)."""
    content_type = request.headers.get("content-type")
    _refuse_plain_text(content_type)
    body = await _read_capped(request, settings.max_spec_bytes)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecFormatError(f"the spec is not UTF-8 text: {exc}") from exc
    data = _parse(text, content_type)
    problems = json_problems(data)
    if problems:
        raise InvalidSpecError(problems)
    if isinstance(data, dict) and names_extensions(data):
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip() or None
        plugin_permission(data, settings=settings, bearer=bearer, plugin_token=request.app.state.plugin_token)
        data = await check_plugins(data, settings)
    try:
        # Strict, in JSON mode: types hold as the published schema writes them (`false` is no integer,
        # "5" no number), where lax mode would store a coerced value the client never sent.
        return StudySpec.model_validate_json(
            json.dumps(data), strict=True, context={"limits": settings.study_limits}
        )
    except ValidationError as exc:
        raise InvalidSpecError.from_validation_error(exc) from exc


def names_extensions(data: dict[str, Any]) -> bool:
    """Whether a spec names plugins or user datasets, as lists (any other value is the validation's 422)."""
    return any(isinstance(data.get(field), list) and data[field] for field in ("plugins", "user_datasets"))


def _refuse_plain_text(content_type: str | None) -> None:
    """The API takes the media types its OpenAPI document lists (JSON, YAML; none is read as YAML).
    The spec parser also reads text/plain, for files; a client that labels a spec so is guessing, and
    the 415 names the types that work."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "text/plain":
        raise UnsupportedContentTypeError(
            "unsupported content type 'text/plain': send the spec as application/json or application/yaml"
        )


async def _read_capped(request: Request, limit: int) -> bytes:
    """The body, refused as soon as it passes `limit` bytes (a chunked body declares no length)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise SpecTooLargeError(f"the spec is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise SpecTooLargeError(f"the spec is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(text: str, content_type: str | None) -> Any:
    try:
        return parse_spec_text(text, content_type)
    except SpecFormatError:
        raise
    except RecursionError as exc:
        raise SpecFormatError(
            f"the spec nests deeper than the parser allows ({MAX_SPEC_DEPTH} is plenty)"
        ) from exc
    except (ValueError, TypeError) as exc:
        # e.g. an integer of more than 4300 digits, or a YAML mapping key that is a list.
        raise SpecFormatError(f"the spec is not a readable JSON or YAML mapping: {exc}") from exc


def json_problems(data: Any) -> list[dict[str, Any]]:
    """Pydantic-style errors (`type`, `loc`, `msg`) for values the store would reject or silently
    change: NaN and infinities (stored JSON has no such numbers), text with NUL or lone surrogates
    (PostgreSQL and UTF-8 refuse them), non-text keys, YAML-only values (dates, bytes, sets),
    self-referencing YAML aliases and nesting deeper than MAX_SPEC_DEPTH."""
    problems: list[dict[str, Any]] = []
    _walk(data, (), set(), set(), problems)
    return problems[:_MAX_PROBLEMS]


def _walk(
    value: Any, path: tuple[str | int, ...], on_path: set[int], seen: set[int], problems: list[dict]
) -> None:
    if len(problems) >= _MAX_PROBLEMS:
        return
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            problems.append(_problem("finite_number", path, f"{value} is not a finite number", str(value)))
        return
    if isinstance(value, str):
        reason = text_problem(value)
        if reason:
            problems.append(_problem("text", path, f"the text {reason}", None))
        return
    if not isinstance(value, (dict, list)):
        problems.append(
            _problem(
                "json_value",
                path,
                f"a YAML {type(value).__name__} value is not JSON data; quote it to send it as text",
                None,
            )
        )
        return
    if id(value) in on_path:
        problems.append(
            _problem("recursive_value", path, "the value contains itself (a recursive YAML alias)", None)
        )
        return
    if len(path) >= MAX_SPEC_DEPTH:
        problems.append(
            _problem("too_deep", path, f"the spec nests deeper than {MAX_SPEC_DEPTH} levels", None)
        )
        return
    if id(value) in seen:  # an alias of a value already checked: checking it again only costs time
        return
    seen.add(id(value))
    on_path.add(id(value))
    if isinstance(value, dict):
        for key, item in value.items():
            reason = text_problem(key) if isinstance(key, str) else "is not text: keys must be strings"
            if reason:
                # At the mapping that holds the key (`search`, `method_search`), which the message names.
                problems.append(_problem("key", path, f"the key {_show(key)} {reason}", None))
                continue
            _walk(item, (*path, key), on_path, seen, problems)
    else:
        for index, item in enumerate(value):
            _walk(item, (*path, index), on_path, seen, problems)
    on_path.discard(id(value))


def _show(key: Any) -> str:
    return repr(key).encode("ascii", "backslashreplace").decode("ascii")[:80]


def _problem(kind: str, path: tuple[str | int, ...], message: str, shown: Any) -> dict[str, Any]:
    # Keys on the path are valid text (invalid ones are reported at their parent), so `loc` is JSON-safe.
    return {"type": kind, "loc": path, "msg": message, "input": shown}
