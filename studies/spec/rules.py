"""The cross-field rules of a StudySpec, one named function each; `rule_errors` runs them all and collects
every problem with its field path, so one 422 lists them all."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pydantic_core import InitErrorDetails, PydanticCustomError

from studies.datasets import corruption_datasets, dataset_corruptions, dataset_family, dataset_metric
from studies.knobs import DEFAULT_T_FREEZE, KNOB_MODEL_FIELDS, KNOBS, Knob, freeze_fits
from studies.limits import StudyLimits
from studies.spec.distributions import (
    _IMAGE_ONLY_KNOBS,
    Distribution,
    Fixed,
    Grid,
    IntRange,
    _can_enable,
    _check_distribution,
    _discrete_values,
)
from studies.spec.fail import Fail
from studies.spec.names import (
    _BACKBONE_FAMILY,
    _FAMILY_MODELS,
    _RESERVED_MODEL_FIELDS,
    DATASET_TASK_FIELDS,
    MODEL_CONFIG_FIELDS,
)
from studies.spec.rules_model import model_shape_is_possible, trial_fits_its_memory
from studies.spec.rules_plugins import plugin_layers_stack
from studies.spec.rules_sequential import sequential_design_fits_the_study

if TYPE_CHECKING:
    from studies.spec.study import StudySpec


def rule_errors(spec: StudySpec, limits: StudyLimits | None) -> list[InitErrorDetails]:
    """Every rule's problems; the server's limits are checked only when nothing else is wrong."""
    errors: list[InitErrorDetails] = []

    def fail(loc: tuple[str | int, ...], kind: str, message: str, value: Any) -> None:
        errors.append(InitErrorDetails(type=PydanticCustomError(kind, message), loc=loc, input=value))

    for rule in RULES:
        rule(spec, fail)
    if not errors and limits is not None:
        check_limits(spec, limits, fail)
    return errors


def model_fits_dataset(spec: StudySpec, fail: Fail) -> None:
    """A preset must be a backbone of the dataset's data family (image, text, tabular)."""
    family = dataset_family(spec.dataset)
    if spec.model.preset is not None:
        model_family = _BACKBONE_FAMILY[spec.model.backbone(spec.dataset)]
        if model_family != family:
            fail(
                ("model", "preset"),
                "model_dataset_mismatch",
                f"model '{spec.model.preset}' is a {model_family} backbone but dataset '{spec.dataset}' "
                f"holds {family} data; use {_FAMILY_MODELS[family]}",
                spec.model.preset,
            )


def knobs_apply_to_their_methods(spec: StudySpec, fail: Fail) -> None:
    """Every knob of `search` applies to every method, and every knob of `method_search` to its method."""
    for knob_name, dist in spec.search.items():
        check_knob(spec, ("search", knob_name), knob_name, dist, spec.methods, fail)
    for method, space in spec.method_search.items():
        if method not in spec.methods:
            fail(
                ("method_search", method),
                "method_not_in_study",
                f"method_search names '{method}', which is not in methods {spec.methods}",
                method,
            )
            continue
        for knob_name, dist in space.items():
            check_knob(spec, ("method_search", method, knob_name), knob_name, dist, [method], fail)


def num_samples_cover_the_methods(spec: StudySpec, fail: Fail) -> None:
    """A per-method num_samples mapping names exactly the study's methods."""
    if isinstance(spec.num_samples, dict):
        for method in spec.num_samples.keys() - set(spec.methods):
            fail(("num_samples", method), "method_not_in_study", f"'{method}' is not in methods", method)
        missing = [m for m in spec.methods if m not in spec.num_samples]
        if missing:
            names = ", ".join(f"'{m}'" for m in missing)
            fail(("num_samples",), "missing_method", f"num_samples has no entry for {names}", missing)


def grid_has_no_tuning(spec: StudySpec, fail: Fail) -> None:
    """kind: grid runs every point to the end: no num_samples, no early-stopping scheduler."""
    if spec.kind == "grid":
        if spec.num_samples is not None:
            fail(
                ("num_samples",),
                "not_for_grid",
                "num_samples does not apply to kind: grid (every grid point runs on every seed)",
                spec.num_samples,
            )
        if spec.scheduler.type != "none":
            fail(
                ("scheduler",),
                "not_for_grid",
                "kind: grid runs every point to the end; an early-stopping scheduler needs kind: compare",
                spec.scheduler.type,
            )


def scheduler_fits_the_budget(spec: StudySpec, fail: Fail) -> None:
    """ASHA's max_t and grace period fit inside budget.epochs."""
    max_t = spec.scheduler.max_t or spec.budget.epochs
    if spec.scheduler.max_t is not None and spec.scheduler.max_t > spec.budget.epochs:
        fail(
            ("scheduler", "max_t"),
            "over_budget",
            f"scheduler.max_t ({max_t}) exceeds budget.epochs ({spec.budget.epochs})",
            max_t,
        )
    if spec.scheduler.type == "asha" and spec.scheduler.grace_period > max_t:
        fail(
            ("scheduler", "grace_period"),
            "over_budget",
            f"scheduler.grace_period ({spec.scheduler.grace_period}) exceeds the {max_t} epochs a trial runs",
            spec.scheduler.grace_period,
        )


def reference_and_paper_numbers_name_study_methods(spec: StudySpec, fail: Fail) -> None:
    """reference_method and paper_numbers name methods of the study; paper numbers are in the metric's unit."""
    if spec.reference_method is not None and spec.reference_method not in spec.methods:
        fail(
            ("reference_method",),
            "method_not_in_study",
            f"reference_method '{spec.reference_method}' is not in methods {spec.methods}",
            spec.reference_method,
        )
    for method, value in spec.paper_numbers.items():
        if method not in spec.methods:
            fail(("paper_numbers", method), "method_not_in_study", f"'{method}' is not in methods", method)
            continue
        problem = _paper_number_problem(dataset_metric(spec.dataset), value)
        if problem is not None:
            fail(("paper_numbers", method), "paper_number_unit", problem, value)


def tune_seeds_are_disjoint(spec: StudySpec, fail: Fail) -> None:
    """Tuning never runs on a final seed: the final phase must not report the seeds its configs were picked on."""
    if spec.tune_seeds is not None:
        shared = sorted(set(spec.tune_seeds) & set(spec.seeds))
        if shared:
            fail(
                ("tune_seeds",),
                "tune_seeds_overlap",
                f"tune_seeds {shared} are also final seeds; tune on seeds of their own "
                f"(e.g. tune_seeds: [{_default_tune_seed(spec.seeds)}]) so the final phase does not "
                "report the seeds its configs were picked on",
                spec.tune_seeds,
            )


def check_overrides(spec: StudySpec, fail: Fail) -> None:
    """Every override must be a config field of the backbone that the study and the dataset leave free."""
    backbone = spec.model.backbone(spec.dataset)
    fields = MODEL_CONFIG_FIELDS[backbone]
    free = [f for f in fields if f not in _RESERVED_MODEL_FIELDS and f not in DATASET_TASK_FIELDS]
    for key, value in spec.model.overrides.items():
        loc = ("model", "overrides", key)
        if key in _RESERVED_MODEL_FIELDS:
            fail(
                loc,
                "reserved_model_field",
                f"model overrides may not set '{key}': the study's methods choose the norm",
                value,
            )
        elif key in DATASET_TASK_FIELDS:
            fail(
                loc,
                "dataset_task_field",
                f"model overrides may not set '{key}': dataset '{spec.dataset}' decides the task fields "
                f"({', '.join(DATASET_TASK_FIELDS)})",
                value,
            )
        elif key not in fields:
            fail(
                loc,
                "unknown_model_field",
                f"{backbone} has no config field '{key}'; fields a spec may override: {', '.join(free)}",
                value,
            )
        else:
            knob = knob_setting_field(spec, key)
            if knob is not None:
                # Overrides are applied after knobs, so the override would silently beat the search.
                fail(
                    loc,
                    "override_shadows_knob",
                    f"model override '{key}' is also set by knob '{knob}' in the search space; "
                    "set it in one place (a fixed value in `search` or the override, not both)",
                    value,
                )


def override_values_are_possible(spec: StudySpec, fail: Fail) -> None:
    """An override of a field a knob also sets (mlp_ratio, dropout, norm_placement, ...) takes a value that
    knob could take: the model would otherwise fail to build, or train as no study meant (dropout 1)."""
    fields = MODEL_CONFIG_FIELDS[spec.model.backbone(spec.dataset)]
    knob_of_field = {field: knob for knob, field in KNOB_MODEL_FIELDS.items()}
    for key, value in spec.model.overrides.items():
        knob = KNOBS.get(knob_of_field.get(key, ""))
        if knob is None or key not in fields:
            continue  # not a knob's field (shapes: model_shape_is_possible), or not the model's (check_overrides)
        loc = ("model", "overrides", key)
        if not isinstance(value, (bool, int, float, str)) and value is not None:
            fail(loc, "override_out_of_range", f"model override '{key}' takes {knob.describe_range()}", value)
            continue
        problem = _check_distribution(knob, Fixed(type="fixed", value=value))
        if problem is not None or (value is None and not knob.nullable):
            fail(
                loc,
                "override_out_of_range",
                f"model override '{key}' must be {_range_words(knob)} (the range of knob '{knob.name}'), "
                f"got {value!r}",
                value,
            )


def knobs_fit_the_model(spec: StudySpec, fail: Fail) -> None:
    """A knob that sets a model field must set one the study's backbone has: the residual-MLP classifier
    has no dropout, drop path or LayerScale, and its trials would fail when they build the model."""
    backbone = spec.model.backbone(spec.dataset)
    fields = MODEL_CONFIG_FIELDS[backbone]
    spaces: list[tuple[tuple[str, ...], dict[str, Distribution]]] = [(("search",), spec.search)]
    spaces += [(("method_search", method), space) for method, space in spec.method_search.items()]
    for prefix, space in spaces:
        for knob_name, dist in space.items():
            field = KNOB_MODEL_FIELDS.get(knob_name)
            if field is not None and field not in fields:
                fail(
                    (*prefix, knob_name),
                    "knob_not_in_model",
                    f"knob '{knob_name}' sets the model field '{field}', which {backbone} does not have",
                    dist.model_dump(),
                )


def check_data_options(spec: StudySpec, fail: Fail) -> None:
    """Corruption options need a corruption dataset, and names that dataset can build."""
    known = dataset_corruptions(spec.dataset)
    if not known:
        for field, value in spec.data.trial_config().items():
            fail(
                ("data", field),
                "no_corruption_sets",
                f"dataset '{spec.dataset}' has no corruption eval sets; data.{field} applies to "
                f"{', '.join(corruption_datasets())}",
                value,
            )
        return
    for index, name in enumerate(spec.data.corruptions or []):
        if name not in known:
            fail(
                ("data", "corruptions", index),
                "unknown_corruption",
                f"unknown corruption '{name}' for dataset '{spec.dataset}'; known: {', '.join(known)}",
                name,
            )


def check_freeze_schedule(spec: StudySpec, fail: Fail) -> None:
    """AutoNorm-S decides after epoch t_freeze, so a t_freeze that can reach budget.epochs never freezes
    and the method silently becomes plain AutoNorm."""
    if "autonorm_s" not in spec.methods:
        return
    epochs = spec.budget.epochs
    knob = KNOBS["t_freeze"]
    loc: tuple[str, ...]
    if "t_freeze" in spec.method_search.get("autonorm_s", {}):  # method_search wins over search
        loc, dist = (
            ("method_search", "autonorm_s", "t_freeze"),
            spec.method_search["autonorm_s"]["t_freeze"],
        )
    elif "t_freeze" in spec.search:
        loc, dist = ("search", "t_freeze"), spec.search["t_freeze"]
    else:
        if not freeze_fits(DEFAULT_T_FREEZE, epochs):
            fail(
                ("budget", "epochs"),
                "autonorm_s_never_freezes",
                f"autonorm_s watches its gate entropy for the default t_freeze of {DEFAULT_T_FREEZE} "
                f"epochs, which budget.epochs {epochs} does not outlast, so it would never freeze and "
                f"would run as plain autonorm; set method_search.autonorm_s.t_freeze below {epochs} "
                f"or raise budget.epochs above {DEFAULT_T_FREEZE}",
                epochs,
            )
        return
    if not all(knob.applies_to(m) for m in spec.methods if loc[0] == "search"):
        return  # `search.t_freeze` beside other methods is already an error at this path
    wrong_phase = isinstance(dist, Grid) if spec.kind == "compare" else not isinstance(dist, (Grid, Fixed))
    if wrong_phase or _check_distribution(knob, dist) is not None:
        return  # reported by _check_knob
    reach = _largest_int(dist)
    if freeze_fits(reach, epochs):  # the knob's range starts at 1: the largest value decides
        return
    fix = f"keep t_freeze below {epochs} (at most {epochs - 1}) or " if epochs > 1 else ""
    fail(
        loc,
        "autonorm_s_never_freezes",
        f"t_freeze can be {reach} but budget.epochs is {epochs}: AutoNorm-S decides after epoch "
        f"t_freeze, so a run with t_freeze >= epochs never freezes and is plain autonorm; "
        f"{fix}raise budget.epochs above {reach}",
        dist.model_dump(),
    )


def knob_setting_field(spec: StudySpec, field: str) -> str | None:
    for method in spec.methods:
        for knob in {**spec.search, **spec.method_search.get(method, {})}:
            if KNOB_MODEL_FIELDS.get(knob) == field:
                return knob
    return None


def check_knob(
    spec: StudySpec, loc, knob_name: str, dist: Distribution, methods: Iterable[str], fail: Fail
) -> None:
    knob = KNOBS.get(knob_name)
    if knob is None:
        fail(loc, "unknown_knob", f"unknown knob '{knob_name}'; known knobs: {', '.join(KNOBS)}", knob_name)
        return
    for method in methods:
        if not knob.applies_to(method):
            assert knob.methods is not None
            hint = ""
            if loc[0] == "search":
                hint = f"; move it under method_search.{knob.methods[0]}"
            fail(
                loc,
                "knob_not_applicable",
                f"knob '{knob_name}' does not apply to method '{method}' "
                f"(it applies to {', '.join(knob.methods)} only){hint}",
                knob_name,
            )
            return
    problem = _check_distribution(knob, dist)
    if problem is not None:
        fail(loc, "knob_out_of_range", problem, dist.model_dump())
    elif knob_name in _IMAGE_ONLY_KNOBS and dataset_family(spec.dataset) != "image" and _can_enable(dist):
        # The trial would only fail when it starts; say so before anything runs.
        fail(
            loc,
            "image_only_knob",
            f"knob '{knob_name}' transforms images, but dataset '{spec.dataset}' holds "
            f"{dataset_family(spec.dataset)} data; remove it (or set it to {_IMAGE_ONLY_KNOBS[knob_name]!r})",
            dist.model_dump(),
        )
    elif spec.kind == "compare" and isinstance(dist, Grid):
        fail(
            loc,
            "grid_in_compare",
            f"knob '{knob_name}': grid distributions belong to kind: grid studies; "
            "use type: choice to let the tuner pick",
            dist.model_dump(),
        )
    elif spec.kind == "grid" and not isinstance(dist, (Grid, Fixed)):
        fail(
            loc,
            "random_in_grid",
            f"knob '{knob_name}': kind: grid runs listed points only; "
            f"a {dist.type} distribution needs a tuner (kind: compare), use type: grid",
            dist.model_dump(),
        )


def check_limits(spec: StudySpec, limits: StudyLimits, fail: Fail) -> None:
    if spec.budget.epochs > limits.max_epochs:
        fail(
            ("budget", "epochs"),
            "over_limit",
            f"budget.epochs is {spec.budget.epochs} but this server allows at most "
            f"{limits.max_epochs} epochs per trial (NORMLAB_MAX_EPOCHS)",
            spec.budget.epochs,
        )
    if spec.sequential is not None and spec.sequential.max_seeds > limits.max_seeds:
        fail(
            ("sequential", "max_seeds"),
            "over_limit",
            f"sequential.max_seeds is {spec.sequential.max_seeds} but this server allows at most "
            f"{limits.max_seeds} seeds (NORMLAB_MAX_SEEDS); lower max_seeds",
            spec.sequential.max_seeds,
        )
    elif len(spec.seeds) > limits.max_seeds:
        fail(
            ("seeds",),
            "over_limit",
            f"the study lists {len(spec.seeds)} seeds but this server allows at most "
            f"{limits.max_seeds} (NORMLAB_MAX_SEEDS)",
            len(spec.seeds),
        )
    planned = spec.planned_trials()  # a sequential design's maximum: the server must allow its worst case
    seeds = "sequential.max_seeds" if spec.sequential is not None else "seeds"
    if planned > limits.max_trials:
        phases = " + ".join(f"{phase} {n}" for phase, n in spec.planned_trials_by_phase().items())
        fail(
            ("num_samples",) if spec.kind == "compare" else ("search",),
            "over_limit",
            f"the study plans {planned} trials ({phases}) but this server allows at most "
            f"{limits.max_trials} per study (NORMLAB_MAX_TRIALS); reduce num_samples, methods, "
            f"grid points or {seeds}",
            planned,
        )
    trial_fits_its_memory(spec, limits, fail)


# --------------------------------------------------------------------------- helpers for the driver


def _default_tune_seed(seeds: list[int]) -> int:
    """One seed outside `seeds`: the next after the largest, or the smallest free one at the top of the range."""
    if max(seeds) + 1 < 2**32:
        return max(seeds) + 1
    return min(set(range(len(seeds) + 1)) - set(seeds))


def _largest_int(dist: Distribution) -> int:
    """The largest value an integer knob's (valid) distribution can take."""
    if isinstance(dist, IntRange):
        return dist.high if dist.log else dist.low + (dist.high - dist.low) // dist.step * dist.step
    return max(int(v) for v in _discrete_values(dist))  # type: ignore[arg-type]


def _range_words(knob: Knob) -> str:
    if knob.kind == "categorical":
        return knob.describe_range()
    return f"a {'whole number' if knob.kind == 'int' else 'number'} in {knob.describe_range()}"


def _paper_number_problem(metric: str, value: float) -> str | None:
    """Why a paper number is not in the dataset metric's own unit, or None when it is."""
    if metric == "accuracy" and not 0.0 <= value <= 1.0:
        hint = f"; write {value / 100:.6g}" if 1.0 < value <= 100.0 else ""
        return (
            f"accuracy is a fraction in [0, 1], as the results report it, so 86.35 % is 0.8635; "
            f"got {value:g}{hint}"
        )
    if metric == "rmse" and not value > 0.0:
        return f"rmse is positive, in the target's own units; got {value:g}"
    if metric == "perplexity" and not value >= 1.0:
        return f"perplexity is at least 1 (the exp of a mean cross-entropy); got {value:g}"
    return None


RULES: tuple[Callable[[StudySpec, Fail], None], ...] = (
    model_fits_dataset,
    check_overrides,
    override_values_are_possible,
    model_shape_is_possible,
    knobs_apply_to_their_methods,
    knobs_fit_the_model,
    num_samples_cover_the_methods,
    grid_has_no_tuning,
    scheduler_fits_the_budget,
    reference_and_paper_numbers_name_study_methods,
    tune_seeds_are_disjoint,
    sequential_design_fits_the_study,
    check_freeze_schedule,
    check_data_options,
    plugin_layers_stack,
)
