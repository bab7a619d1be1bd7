"""What a plugin writes: decorators and calls that register its norm layers, methods, knobs, datasets and
backbones.

    from normlab.plugin import knob, method, norm_layer

    @norm_layer("rmsnorm")
    class RMSNorm(torch.nn.Module):
        def __init__(self, dim: int, eps: float = 1e-6): ...

    method("rmsnorm", norm="rmsnorm")
    knob("rms_eps", "float", "RMSNorm's epsilon", 1e-8, 1e-2, methods=("rmsnorm",), norm_option="eps")

    @backbone("tiny_mlp", family="image", config_fields=("dim",), presets={"tiny_mlp_wide": {"dim": 128}})
    def build(config: dict) -> torch.nn.Module:  # images (B, C, H, W) -> logits (B, num_classes)
        norm = models.norms.build_norm(config["norm"], dim, **config["norm_options"])  # the method's
        ...

The built-ins register through the same calls. Each record names its source: "builtin", or the plugin
being imported (normlab.loading sets it), so an error says whose name clashed.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from normlab.records import BUILTIN, FAMILY_TASK_FIELDS, Backbone, Dataset, Family, Knob, Method, NormKind
from normlab.registry import REGISTRY, RegistryError

__all__ = ["backbone", "current_source", "dataset", "knob", "method", "norm_layer", "registering_as"]

F = TypeVar("F", bound=Callable[..., Any])

_SOURCE: contextvars.ContextVar[str] = contextvars.ContextVar("normlab_plugin_source", default=BUILTIN)


def current_source() -> str:
    return _SOURCE.get()


@contextlib.contextmanager
def registering_as(source: str) -> Iterator[None]:
    """Records registered within the block name `source` as where they came from."""
    token = _SOURCE.set(source)
    try:
        yield
    finally:
        _SOURCE.reset(token)


def _options_of(layer: Callable[..., Any]) -> tuple[str, ...]:
    target = layer.__init__ if inspect.isclass(layer) else layer  # type: ignore[misc]
    params = list(inspect.signature(target).parameters.values())
    skip = {"self", "dim"}
    return tuple(
        p.name for p in params if p.name not in skip and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    )


def norm_layer(
    name: str, *, supports_functional: bool | None = None, description: str = ""
) -> Callable[[F], F]:
    """Register a norm layer class (or factory) called as `layer(dim, **options)`.

    `supports_functional` defaults to the class attribute of that name, else True; say False for a layer
    torch.func cannot stack (in-place buffers, data-dependent control flow)."""

    def register(layer: F) -> F:
        functional = supports_functional
        if functional is None:
            functional = bool(getattr(layer, "supports_functional", True))
        doc = description or (inspect.getdoc(layer) or "").split("\n")[0]
        REGISTRY.norms.add(NormKind(name, _options_of(layer), functional, doc, current_source(), layer=layer))
        return layer

    return register


def method(
    name: str,
    *,
    norm: str,
    gate_freeze: bool = False,
    norm_options: Mapping[str, Any] | None = None,
    description: str = "",
) -> Method:
    """Register a method: the norm kind every norm layer of its model is, with fixed options."""
    record = Method(name, norm, gate_freeze, dict(norm_options or {}), description, current_source())
    return REGISTRY.methods.add(record)


def knob(
    name: str,
    kind: str,
    help: str,
    low: float | None = None,
    high: float | None = None,
    **facts: Any,
) -> Knob:
    """Register a tunable knob (normlab.records.Knob's fields). A plugin's knob that sets an option of
    its norm layer names it in `norm_option` and lists its methods in `methods`."""
    if facts.get("methods") is not None:
        facts["methods"] = tuple(facts["methods"])
    if "categories" in facts:
        facts["categories"] = tuple(facts["categories"])
    record = Knob(name, kind, help, low, high, source=current_source(), **facts)  # type: ignore[arg-type]
    return REGISTRY.knobs.add(record)


def dataset(name: str, *, family: Family, **facts: Any) -> Callable[[F], F]:
    """Register a dataset builder: `build(split_seed)` returns a normlab.plugin_data.ArrayDataset
    (the splits as arrays and the task). The facts are normlab.records.Dataset's fields."""

    def register(build: F) -> F:
        REGISTRY.datasets.add(Dataset(name, family, source=current_source(), build=build, **facts))
        return build

    return register


def backbone(
    name: str,
    *,
    family: Family,
    config_fields: Iterable[str] = (),
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    description: str = "",
) -> Callable[[F], F]:
    """Register a backbone builder `build(config: dict) -> nn.Module` that maps a batch of the family's
    inputs to logits as the built-in backbones do: images (B, C, H, W) -> (B, num_classes), token ids
    (B, T) -> (B, num_classes), (B, T, num_classes) or (B, T, vocab_size) by `head`, features (B, F) ->
    (B, num_outputs).

    `config` holds the dataset's task fields (normlab.records.FAMILY_TASK_FIELDS[family]), `norm` and
    `norm_options`, then the preset's fields, the knobs' and the spec's overrides among `config_fields`
    (the backbone's own, e.g. dim, depth, mlp_ratio); a field the config lacks is the builder's to
    default. Build every norm layer with `models.norms.build_norm(config["norm"], dim,
    **config["norm_options"])`, so that every method, a built-in or a plugin's, is compared on it (the
    plugin's check refuses a backbone that holds no layer of the kind its config names). `presets`:
    preset name -> its fields. examples/plugins/tiny_mlp_backbone.py is one."""
    if family not in FAMILY_TASK_FIELDS:
        raise ValueError(
            f"backbone {name!r}: family must be one of {', '.join(FAMILY_TASK_FIELDS)}, not {family!r}"
        )
    own = tuple(config_fields)
    fields = tuple(dict.fromkeys((*own, "norm", "norm_options", *FAMILY_TASK_FIELDS[family])))
    preset_fields = {preset: dict(values) for preset, values in (presets or {}).items()}
    for preset, values in preset_fields.items():
        unknown = sorted(set(values) - set(own))
        if unknown:
            raise ValueError(
                f"backbone {name!r}: preset {preset!r} sets {unknown}, which are not among its config_fields "
                f"{list(own)}"
            )

    def register(build: F) -> F:
        doc = description or (inspect.getdoc(build) or "").split("\n")[0]
        record = Backbone(name, family, fields, preset_fields, doc, current_source(), build=build)
        for model in record.model_names():  # a model name builds one backbone, whatever it is a name of
            taken = REGISTRY.backbone_of(model)
            if taken is not None and taken.name != name:
                raise RegistryError(
                    f"model {model!r} is already a name of backbone {taken.name!r} (by {taken.source}); "
                    f"{record.source} must choose another name"
                )
        REGISTRY.backbones.add(record)
        return build

    return register
