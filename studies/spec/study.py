"""StudySpec: the whole study; its field validators here, its cross-field rules in studies.spec.rules."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping
from typing import Any, Literal, cast

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from normlab import REGISTRY, Record
from studies.convergence import Convergence
from studies.methods import known_methods
from studies.records import row_label
from studies.spec.distributions import (
    Distribution,
    Fixed,
    Grid,
    _points,
    _scalar_shorthand,
    _Strict,
    has_searchable_knobs,
)
from studies.spec.integers import Integer, integral_to_int
from studies.spec.names import DEFAULT_NUM_SAMPLES
from studies.spec.plugins import PluginEntry, plugin_records
from studies.spec.rules import _default_tune_seed, rule_errors
from studies.spec.sections import (
    Budget,
    DataOptions,
    GridPoint,
    ModelSpec,
    Resources,
    SchedulerSpec,
    SequentialDesign,
)
from studies.spec.user_data import UserDataset
from studies.trial_config import FINAL_PHASE, GRID_PHASE


class StudySpec(_Strict):
    """A study: which methods to compare on which dataset, how to tune them and on which seeds."""

    # The schema's pattern states what _name_not_blank checks (a visible character), whose message says why.
    name: str = Field(min_length=1, max_length=120, json_schema_extra={"pattern": r"\S"})
    description: str | None = Field(None, max_length=4000)
    dataset: str
    kind: Literal["compare", "grid"] = "compare"
    model: ModelSpec = Field(default_factory=ModelSpec)
    methods: list[str] = Field(min_length=1, json_schema_extra={"uniqueItems": True})
    # Knob distributions shared by every method; each knob must apply to every method.
    search: dict[str, Distribution] = Field(default_factory=dict)
    # Per-method knobs, added to (and overriding) `search` for that method only.
    method_search: dict[str, dict[str, Distribution]] = Field(default_factory=dict)
    # Tuning trials per method (kind: compare; None -> DEFAULT_NUM_SAMPLES); a mapping gives each method
    # its own count. Grid studies leave it unset: every grid point runs on every seed.
    num_samples: int | dict[str, int] | None = None
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    # Seeds of the final phase (or of every grid point): replicates, the same for every method. With
    # `sequential`, leave it out: validation fills in the design's seeds, 0 to max_seeds - 1.
    seeds: list[Integer] = Field(
        default_factory=lambda: [0, 1, 2], min_length=1, json_schema_extra={"uniqueItems": True}
    )
    # Seeds of the tune phase, disjoint from `seeds` so the configs are not picked on the seeds that then
    # report them. None -> [max(seeds) + 1]. The tune phase runs every sample on the first (`tune_seed`).
    tune_seeds: list[Integer] | None = Field(
        None, min_length=1, validate_default=True, json_schema_extra={"uniqueItems": True}
    )
    # Seeds added look by look until each comparison is decided, instead of all of `seeds` for every method
    # (kind: compare). Its seeds are derived, 0 to max_seeds - 1, and fill `seeds` in; None: fixed seeds.
    sequential: SequentialDesign | None = None
    split_seed: Integer = Field(0, ge=0)  # fixes the train/val split for every trial of the study
    budget: Budget = Field(default_factory=Budget)
    data: DataOptions = Field(default_factory=DataOptions)  # corruption eval sets (cifar10_c & co)
    resources: Resources = Field(default_factory=Resources)
    max_failures: Integer = Field(1, ge=0, le=10)  # retries per trial after a crash
    reference_method: str | None = None  # None: frozen_ln when compared, else the first method
    # The paper's reported value per method, in the metric's own unit (accuracy as a fraction in [0, 1]).
    paper_numbers: dict[str, float] = Field(default_factory=dict)
    claim: str | None = Field(None, min_length=1, max_length=120)  # id of the catalog claim this study tests
    # The level the reference must reach before the report gives a verdict, with its source; None: the
    # catalog's level for the dataset when the study tests a claim, else unchecked (the report says so).
    convergence: Convergence | None = None
    # User code the study runs (studies.spec.plugins): its methods, knobs and datasets count as known.
    plugins: list[PluginEntry] = Field(default_factory=list)
    # Datasets read from the cluster's own files (studies.spec.user_data); `dataset` may name one.
    user_datasets: list[UserDataset] = Field(default_factory=list)

    # The records the study's plugins provide, as facts (no code): what plugins_visible() shows.
    _plugin_records: list[Record] = PrivateAttr(default_factory=list)

    def extensions(self) -> dict[str, Any]:
        """What a trial and the driver import and register before anything else (workers.plugins.activate):
        the plugins' stored source and the user datasets; empty for a study with neither."""
        if not self.plugins and not self.user_datasets:
            return {}
        return {
            "plugins": [p.model_dump(exclude={"provides", "checks"}) for p in self.plugins],
            "user_datasets": [d.model_dump() for d in self.user_datasets],
        }

    def unstackable_methods(self) -> list[str]:
        """The methods whose norm layer torch.func cannot stack (a plugin's that says so or failed that
        check): their seeds train one per trial."""
        with self.plugins_visible():
            norms = {m: REGISTRY.norms.find(REGISTRY.methods.get(m).norm) for m in self.methods}
        return [m for m, norm in norms.items() if norm is not None and not norm.supports_functional]

    @contextlib.contextmanager
    def plugins_visible(self) -> Iterator[None]:
        """Within the block, the registry knows this study's plugin records (as facts, without code)."""
        with REGISTRY.overlay(self._plugin_records):
            yield

    @model_validator(mode="before")
    @classmethod
    def _sequential_seeds(cls, data: Any) -> Any:
        # Before the fields: `tune_seeds` defaults to the seed after the largest of `seeds`, so the derived
        # seeds must be in place first. A given `seeds` is left for the rules to compare with the design's.
        if not isinstance(data, Mapping) or data.get("sequential") is None or "seeds" in data:
            return data
        try:
            design = SequentialDesign.model_validate(data["sequential"])
        except ValidationError:
            return data  # the `sequential` field reports the problem
        return {**data, "seeds": design.seed_ids()}

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("name must not be blank")
        return name.strip()

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, dataset: str) -> str:
        if dataset not in REGISTRY.datasets:
            raise PydanticCustomError(
                "unknown_dataset",
                "unknown dataset '{dataset}'; known datasets: {known}",
                {"dataset": dataset, "known": ", ".join(REGISTRY.datasets.names())},
            )
        return dataset

    @field_validator("methods")
    @classmethod
    def _known_unique_methods(cls, methods: list[str]) -> list[str]:
        known = known_methods()
        unknown = [m for m in methods if m not in known]
        if unknown:
            raise PydanticCustomError(
                "unknown_method",
                "unknown method(s) {unknown}; known methods: {known}",
                {"unknown": ", ".join(unknown), "known": ", ".join(known)},
            )
        if len(set(methods)) != len(methods):
            raise ValueError(f"methods must be unique, got {methods}")
        return methods

    @field_validator("user_datasets")
    @classmethod
    def _unique_user_datasets(cls, declared: list[UserDataset]) -> list[UserDataset]:
        names = [d.name for d in declared]
        if len(set(names)) != len(names):
            raise ValueError(f"user_datasets must have unique names, got {names}")
        return declared

    @field_validator("search", mode="before")
    @classmethod
    def _search_shorthand(cls, space: Any) -> Any:
        return _scalar_shorthand(space)

    @field_validator("method_search", mode="before")
    @classmethod
    def _method_search_shorthand(cls, spaces: Any) -> Any:
        if not isinstance(spaces, Mapping):
            return spaces
        return {m: _scalar_shorthand(space) for m, space in spaces.items()}

    @field_validator("num_samples", mode="before")
    @classmethod
    def _integral_samples(cls, num_samples: Any) -> Any:
        # 2.0 is 2, as for every integer field (studies.spec.integers); converted here rather than with
        # Integer in the union, whose branches pydantic would then name after the conversion in a 422's loc.
        if isinstance(num_samples, Mapping):
            return {method: integral_to_int(count) for method, count in num_samples.items()}
        return integral_to_int(num_samples)

    @field_validator("num_samples")
    @classmethod
    def _positive_samples(cls, num_samples: int | dict[str, int] | None) -> int | dict[str, int] | None:
        if num_samples is None:
            return None
        counts = num_samples.values() if isinstance(num_samples, dict) else [num_samples]
        if any(c < 1 for c in counts):
            raise ValueError(f"num_samples must be at least 1, got {num_samples}")
        return num_samples

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be unique (they are replicates), got {seeds}")
        if any(s < 0 or s >= 2**32 for s in seeds):
            raise ValueError("seeds must lie in [0, 2**32)")
        return seeds

    @field_validator("tune_seeds", mode="before")
    @classmethod
    def _default_tune_seeds(cls, tune_seeds: Any, info: ValidationInfo) -> Any:
        seeds = info.data.get("seeds")
        if tune_seeds is not None or not seeds:  # without valid seeds, `seeds` reports the problem
            return tune_seeds
        return [_default_tune_seed(seeds)]

    @field_validator("tune_seeds")
    @classmethod
    def _unique_tune_seeds(cls, tune_seeds: list[int] | None) -> list[int] | None:
        if tune_seeds is None:
            return None
        if len(set(tune_seeds)) != len(tune_seeds):
            raise ValueError(f"tune_seeds must be unique, got {tune_seeds}")
        if any(s < 0 or s >= 2**32 for s in tune_seeds):
            raise ValueError("tune_seeds must lie in [0, 2**32)")
        return tune_seeds

    @field_validator("claim")
    @classmethod
    def _known_claim(cls, claim: str | None, info: ValidationInfo) -> str | None:
        # Checked where a submission is validated (the service passes a context); a stored spec re-read
        # without one still loads, so a claim the catalog later renames cannot break a study's driver.
        if claim is None or info.context is None:
            return claim
        # Imported here: the claim models carry their checks (scipy), which a spec without a claim, the
        # CLI and a study's driver do not need at import time (seconds per process).
        from studies.catalog.claims import claim_ids

        if claim not in claim_ids():
            raise PydanticCustomError(
                "unknown_claim",
                "unknown claim '{claim}'; catalog claims (studies/catalog/claims.yaml): {known}",
                {"claim": claim, "known": ", ".join(claim_ids())},
            )
        return claim

    def sequential_claim_problem(self) -> str | None:
        """Why the study's claims cannot be judged on its sequential design's looks (None: they can, or
        there is no claim or no design): the spec's claim and every claim that reads the same study may
        compare, on the primary metric, only what the looks decide: each method with the reference, and
        the design's pairs."""
        if self.claim is None or self.sequential is None:
            return None
        # Imported here, as _known_claim does: the claims carry their checks (scipy).
        from studies.catalog.claims import load_claims
        from studies.claims.sequential import SequentialStudy, sequential_problem

        claims = load_claims()
        if self.claim not in claims:
            return None  # an unknown claim is the claim field's own error
        # The claims that read this study at some size (conservative: a size-specific share counts too).
        readers = [
            c
            for c, claim in claims.items()
            if c == self.claim
            or claim.shares_study_with == self.claim
            or self.claim in claim.shares_study_at.values()
        ]
        for claim_id in readers:
            # The protocol declares plain attributes; this frozen model's are read-only, which is all the
            # check needs (it reads them).
            problem = sequential_problem(claims[claim_id].check, cast(SequentialStudy, self))
            if problem is not None:
                return (
                    problem
                    if claim_id == self.claim
                    else f"{claim_id}, which reads the same study: {problem}"
                )
        return None

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> StudySpec:
        # Cross-field rules (studies.spec.rules), all collected so one response lists every problem with
        # its field path.
        limits = (info.context or {}).get("limits") if info.context else None
        errors = rule_errors(self, limits)
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _with_plugin_records(cls, data: Any, handler: ModelWrapValidatorHandler[StudySpec]) -> StudySpec:
        # Every field and rule sees the plugins' records, so stored studies validate the same way wherever
        # they are read. Defined after the other model validators, so that it wraps them all.
        records = plugin_records(data)
        if not records:
            return handler(data)
        with REGISTRY.overlay(records):
            spec = handler(data)
        spec._plugin_records = records
        return spec

    @property
    def tune_seed(self) -> int:
        """The seed of every tune-phase trial and of the tuner's sampler: the first of `tune_seeds`."""
        assert self.tune_seeds is not None, "validation fills tune_seeds in"
        return self.tune_seeds[0]

    @property
    def reference(self) -> str:
        """The method others are compared against: reference_method, else frozen_ln, else the first."""
        if self.reference_method is not None:
            return self.reference_method
        return "frozen_ln" if "frozen_ln" in self.methods else self.methods[0]

    def search_space_for(self, method: str) -> dict[str, Distribution]:
        """The knob distributions of one method: `search` overlaid with `method_search[method]`."""
        if method not in self.methods:
            raise KeyError(f"method '{method}' is not in this study's methods {self.methods}")
        return {**self.search, **self.method_search.get(method, {})}

    def num_samples_for(self, method: str) -> int:
        if method not in self.methods:
            raise KeyError(f"method '{method}' is not in this study's methods {self.methods}")
        if self.num_samples is None:
            return DEFAULT_NUM_SAMPLES
        return self.num_samples[method] if isinstance(self.num_samples, dict) else self.num_samples

    def grid_points(self, method: str) -> list[GridPoint]:
        """Every grid point of a method (kind: grid), in a stable order; fixed knobs ride along."""
        if self.kind != "grid":
            raise ValueError("grid_points applies to kind: grid studies")
        space = self.search_space_for(method)
        grid_knobs = [k for k, d in space.items() if isinstance(d, Grid)]
        fixed = {k: _points(d)[0] for k, d in space.items() if isinstance(d, Fixed)}
        points = []
        for combo in itertools.product(*(_points(space[k]) for k in grid_knobs)):
            values = dict(zip(grid_knobs, combo, strict=True))
            label = ",".join(f"{k}={v}" for k, v in values.items()) or "base"
            points.append(GridPoint(label=label, knobs={**fixed, **values}))
        return points

    @property
    def sequential_arms(self) -> list[str]:
        """What a sequential design's looks compare and give seeds to: the methods (kind: compare), or every
        grid point, named as its results row, "method [point]" (kind: grid)."""
        if self.kind != "grid":
            return list(self.methods)
        return [row_label(m, point.label) for m in self.methods for point in self.grid_points(m)]

    @property
    def sequential_reference(self) -> str | None:
        """The arm every other is compared with under a sequential design: the reference method (kind:
        compare); None in a grid, whose comparisons are the design's pairs."""
        return None if self.kind == "grid" else self.reference

    @property
    def sequential_comparisons(self) -> int:
        """How many comparisons a sequential design decides: each method with the reference (kind: compare)
        and the design's pairs (0 without a design)."""
        if self.sequential is None:
            return 0
        with_reference = 0 if self.sequential_reference is None else len(self.methods) - 1
        return with_reference + len(self.sequential.pairs)

    @property
    def seed_phase(self) -> str:
        """The phase whose trials train the study's seeds on the test split: grid or final."""
        return GRID_PHASE if self.kind == "grid" else FINAL_PHASE

    def arm_of(self, method: str, group: str | None) -> str:
        """The sequential arm a trial of `method` (at grid point `group`) belongs to."""
        return row_label(method, group) if self.kind == "grid" else method

    def tunes(self, method: str) -> bool:
        """Whether the tune phase runs for `method` (kind: compare): only when some knob is searchable."""
        return self.kind == "compare" and has_searchable_knobs(self.search_space_for(method))

    def planned_trials_by_phase(self) -> dict[str, int]:
        """Trials per phase; a sequential design counts its maximum (every method on max_seeds seeds)."""
        if self.kind == "grid":
            return {"grid": sum(len(self.grid_points(m)) for m in self.methods) * len(self.seeds)}
        return {
            # A method without searchable knobs goes straight to the final phase (as the driver does).
            "tune": sum(self.num_samples_for(m) for m in self.methods if self.tunes(m)),
            "final": len(self.methods) * len(self.seeds),
        }

    def planned_trials(self) -> int:
        """How many trials the study runs in all phases together (ASHA-stopped trials included)."""
        return sum(self.planned_trials_by_phase().values())
