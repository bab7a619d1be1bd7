"""Reading a spec from text (YAML or JSON; one parser for the API and the CLI) and validating it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from studies.limits import StudyLimits
from studies.spec.names import JSON_CONTENT_TYPES, YAML_CONTENT_TYPES
from studies.spec.study import StudySpec


class SpecFormatError(ValueError):
    """The spec text is not a readable JSON or YAML mapping."""


class UnsupportedContentTypeError(SpecFormatError):
    """The spec came with a content type that is neither JSON nor YAML."""


class _SpecYamlLoader(yaml.SafeLoader):
    """Safe YAML that rejects duplicate keys and reads `1e-3` as a float (YAML 1.1 would keep a string)."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        keys = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in keys:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            keys.add(key)
        return super().construct_mapping(node, deep=deep)


_SpecYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when a key repeats: json.loads would keep the last value silently (`epochs`
    1 then 400 stored 400), where YAML (_SpecYamlLoader) refuses the same spec."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            # The mapping's other keys say where it is (JSON's parser gives no position to this hook).
            others = [repr(k) for k in data if k != key]
            shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
            where = f"the mapping that also holds {shown}" if others else "a mapping"
            raise SpecFormatError(
                f"the spec is not valid JSON: duplicate key {key!r} in {where}; a key may appear once"
            )
        data[key] = value
    return data


def _media_type(content_type: str | None) -> str | None:
    if content_type is None:
        return None
    return content_type.split(";")[0].strip().lower() or None


# Values (mappings, lists and scalars) a spec may hold once YAML aliases are expanded; real specs hold
# a few hundred.
MAX_EXPANDED_NODES = 20_000


def _expanded_size(value: Any, sizes: dict[int, int], on_path: set[int]) -> int:
    """How many values `value` holds with every alias expanded, counted once per shared object (memoised
    by identity), and stopping as soon as the count passes MAX_EXPANDED_NODES. Self-references count once
    (json_problems reports them)."""
    if not isinstance(value, (dict, list)):
        return 1
    key = id(value)
    if key in sizes:
        return sizes[key]
    if key in on_path:
        return 1
    on_path.add(key)
    total = 1
    for child in value.values() if isinstance(value, dict) else value:
        total += _expanded_size(child, sizes, on_path)
        if total > MAX_EXPANDED_NODES:
            break
    on_path.discard(key)
    sizes[key] = total
    return total


def parse_spec_text(text: str, content_type: str | None = None) -> dict[str, Any]:
    """Parse JSON (application/json, *+json) or YAML (yaml types, text/plain or no type) into a mapping."""
    media = _media_type(content_type)
    is_json = media is not None and (media in JSON_CONTENT_TYPES or media.endswith("+json"))
    if not is_json and media not in YAML_CONTENT_TYPES | {None, "text/plain"}:
        raise UnsupportedContentTypeError(
            f"unsupported content type '{media}': send the spec as application/json or application/yaml"
        )
    try:
        data = (
            json.loads(text, object_pairs_hook=_unique_keys)
            if is_json
            else yaml.load(text, Loader=_SpecYamlLoader)
        )
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SpecFormatError(f"the spec is not valid {'JSON' if is_json else 'YAML'}: {exc}") from exc
    if not is_json and _expanded_size(data, {}, set()) > MAX_EXPANDED_NODES:
        # YAML aliases share one object per anchor, so a few hundred bytes of nested anchors ("billion
        # laughs") expand to billions of nodes once anything walks the tree: refuse before anything does.
        raise SpecFormatError(
            f"the spec's YAML aliases expand to more than {MAX_EXPANDED_NODES} values; a study spec needs "
            "far fewer: write it without nested anchors"
        )
    if not isinstance(data, dict):
        raise SpecFormatError(
            f"a study spec is a mapping of fields (name, dataset, methods, ...), got {type(data).__name__}"
        )
    return data


def validate_spec_data(data: Mapping[str, Any], *, limits: StudyLimits | None = None) -> StudySpec:
    """Validate parsed spec data the way the API does: strict types in JSON mode, so `false` is no
    integer and "5" no number (lax mode would coerce a value the author never wrote)."""
    return StudySpec.model_validate_json(
        json.dumps(data), strict=True, context={"limits": limits} if limits is not None else None
    )


def load_spec(
    source: str | Path, content_type: str | None = None, *, limits: StudyLimits | None = None
) -> StudySpec:
    """Read a spec from a path or from JSON/YAML text; `limits` (from the service settings) caps its size.

    Raises SpecFormatError for unreadable text and pydantic.ValidationError (with field paths) for an
    invalid spec.
    """
    if isinstance(source, Path) or (
        "\n" not in source and source.endswith((".yaml", ".yml", ".json")) and Path(source).is_file()
    ):
        path = Path(source)
        text = path.read_text(encoding="utf-8")
        if content_type is None:
            content_type = "application/json" if path.suffix == ".json" else "application/yaml"
    else:
        text = source
    data = parse_spec_text(text, content_type)
    return StudySpec.model_validate(data, context={"limits": limits} if limits is not None else None)
