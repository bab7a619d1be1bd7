"""The records of the registry: one frozen dataclass per kind of thing, each stating its facts once.

`source` says where a record came from: "builtin", or the plugin that registered it (its reference as a
spec names it). Records are plain data so that a child process can report a plugin's records as JSON
(`to_facts`) and the API can rebuild them (`from_facts`) without importing the plugin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Literal, Union

__all__ = ["BUILTIN", "FAMILY_TASK_FIELDS", "Backbone", "Dataset", "Knob", "Method", "NormKind", "Record"]

BUILTIN = "builtin"
Family = Literal["image", "text", "tabular"]


@dataclass(frozen=True)
class NormKind:
    """A norm layer: `layer(dim, **options)` maps (..., dim) to (..., dim).

    `layer` is the torch class or factory; None where only the facts are known (the API process).
    `supports_functional` False: the layer cannot be stacked with torch.func, so a study trains one seed
    per trial with it."""

    section: ClassVar[str] = "norms"
    name: str
    options: tuple[str, ...] = ()  # keyword options `layer` accepts besides dim
    supports_functional: bool = True
    description: str = ""
    source: str = BUILTIN
    # Parameters of one layer as c2 * dim**2 + c1 * dim + c0, measured by a plugin's check (the memory
    # estimate reads it; the built-ins' counts are studies.sizing's own).
    parameters: tuple[float, float, float] | None = None
    layer: Callable[..., Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Method:
    """A method a study compares: the norm kind every norm layer of its model is, and its options.

    `gate_freeze`: the trial runs the AutoNorm-S freeze schedule (models.norms.freeze). `norm_options`
    are fixed options of the norm; a knob with `norm_option` set adds a tunable one."""

    section: ClassVar[str] = "methods"
    name: str
    norm: str
    gate_freeze: bool = False
    norm_options: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    source: str = BUILTIN


@dataclass(frozen=True)
class Knob:
    """One tunable knob: its type, its valid range and the methods it applies to (None = every method).

    Where its value goes: `model_field` (a model config field), `norm_option` (an option of the method's
    norm layer), else the training loop reads it by name."""

    section: ClassVar[str] = "knobs"
    name: str
    kind: Literal["float", "int", "categorical"]
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: `low` itself is not allowed (e.g. a learning rate of 0)
    high_open: bool = False
    categories: tuple[str, ...] = ()
    methods: tuple[str, ...] | None = None
    # Fixed, choice and grid values may be null, meaning "switch this feature off" (e.g. no LayerScale).
    nullable: bool = False
    model_field: str | None = None
    norm_option: str | None = None
    default: Union[bool, int, float, str, None] = None  # noqa: UP007 (what a trial uses when unset; facts)
    source: str = BUILTIN

    def __post_init__(self) -> None:
        if self.kind == "categorical" and not self.categories:
            raise ValueError(f"knob {self.name!r}: a categorical knob needs categories")
        if self.kind != "categorical" and (self.low is None or self.high is None or self.low > self.high):
            raise ValueError(f"knob {self.name!r}: a {self.kind} knob needs low <= high")

    def applies_to(self, method: str) -> bool:
        return self.methods is None or method in self.methods

    def describe_range(self) -> str:
        if self.kind == "categorical":
            return "one of " + ", ".join(self.categories)
        left = "(" if self.low_open else "["
        right = ")" if self.high_open else "]"
        return f"{left}{_fmt(self.low)}, {_fmt(self.high)}{right}" + (" or null" if self.nullable else "")

    def contains(self, value: float) -> bool:
        assert self.low is not None and self.high is not None
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


def _fmt(x: float | None) -> str:
    return "inf" if x is None or math.isinf(x) else f"{x:g}"


# The task fields a dataset of each family gives its model (workers.data's DatasetBundle.model_fields): every
# backbone of the family takes them, a plugin's as its built-ins do.
FAMILY_TASK_FIELDS: Mapping[str, tuple[str, ...]] = {
    "image": ("image_size", "in_channels", "num_classes"),
    "text": ("vocab_size", "max_len", "num_classes", "head", "pad_id"),
    "tabular": ("num_features", "num_outputs"),
}


@dataclass(frozen=True)
class Backbone:
    """A model backbone: the data family it reads, its config fields and its presets.

    `config_fields`: every key of the config `build(config) -> nn.Module` takes: the family's task fields
    (FAMILY_TASK_FIELDS), `norm` and `norm_options` (the kind and options of every norm layer it builds)
    and its own (dim, depth, ...). `presets`: preset name -> the fields it sets; a spec's `model` names the
    backbone or one of its presets. `build` maps a batch of the family's inputs to logits (None where only
    the facts are known, the API process).

    `parameters` and `activations`: for a plugin's backbone, which studies.sizing cannot count without
    torch, what its check measured (workers.plugins.check): the most trainable parameters, and the most
    floats one training sample saves for the backward pass, over the backbone and its presets on the task
    fields of its family's datasets. None for the built-ins (studies.sizing counts them exactly) and for a
    plugin no check has measured."""

    section: ClassVar[str] = "backbones"
    name: str
    family: Family
    config_fields: tuple[str, ...] = ()
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    description: str = ""
    source: str = BUILTIN
    parameters: int | None = None
    activations: int | None = None
    build: Callable[..., Any] | None = field(default=None, compare=False, repr=False)

    def model_names(self) -> tuple[str, ...]:
        """What a spec's `model` may say to build it: its name, then its presets (sorted)."""
        return (self.name, *sorted(self.presets))


@dataclass(frozen=True)
class Dataset:
    """What a dataset is, stated once: its family, metric and direction, classes, corruptions, what it
    stands in for, its default model and its size. `build` is the workers' builder (None in processes that
    only need the facts; workers.data reads a built-in's builder from its own catalog)."""

    section: ClassVar[str] = "datasets"
    name: str
    family: Family
    metric: str = "accuracy"
    higher_is_better: bool = True
    task: str = "image_classification"
    classes: int | None = None
    corruptions: tuple[str, ...] = ()
    stand_in_for: str | None = None
    stand_in_description: str | None = None
    default_model: str | None = None
    train_examples: int | None = None
    image_side: int | None = None
    # The task fields of its built bundle (image_size, num_classes, vocab_size, ...), for sizing.
    task_fields: Mapping[str, Any] = field(default_factory=dict)
    # Where a task field is only an estimate until the data is built (a vocabulary fitted on the training
    # split): what the estimate is, said beside any memory figure computed from it.
    estimated: str | None = None
    description: str = ""
    source: str = BUILTIN
    build: Callable[..., Any] | None = field(default=None, compare=False, repr=False)


Record = Union[NormKind, Method, Knob, Backbone, Dataset]  # noqa: UP007
RECORD_TYPES: dict[str, type] = {cls.section: cls for cls in (NormKind, Method, Knob, Backbone, Dataset)}

_CALLABLES = {"layer", "build"}


def to_facts(record: Record) -> dict[str, Any]:
    """The record as JSON-ready facts: its callables dropped, tuples as lists."""
    facts = {k: v for k, v in asdict(record).items() if k not in _CALLABLES}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in facts.items()}


def from_facts(section: str, facts: Mapping[str, Any]) -> Record:
    """The record `to_facts` gave, without its callables (unknown keys are refused by the dataclass)."""
    cls = RECORD_TYPES[section]
    names = {f.name for f in fields(cls)}
    unknown = set(facts) - names
    if unknown:
        raise ValueError(f"{section} record has unknown fields {sorted(unknown)}")
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in facts.items()}
    if kwargs.get("methods") is not None and section == "knobs":
        kwargs["methods"] = tuple(kwargs["methods"])
    return cls(**kwargs)  # type: ignore[no-any-return]
