"""The reproduction catalog: every claim of both papers, each runnable as a study in three sizes whose specs
validate, name their claim, and (smoke size) stay small enough for a laptop. Claims that need the same
experiment share one study; a claim with no study at a size says why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from studies.catalog import (
    CATALOG_DIR,
    SIZES,
    STAND_IN_FOR,
    UnknownClaimError,
    claim_ids,
    claims_reading,
    convergence_for,
    convergence_levels,
    get_claim,
    load_catalog_spec,
    load_claims,
    spec_path,
    study_claim,
)
from studies.catalog.lint import (
    duplicate_studies,
    expressibility_problem,
    freeze_problems,
    grid_problems,
    source_problems,
    tuning_problems,
    vacuous_check_problems,
)
from studies.limits import StudyLimits
from studies.spec import DATASET_METRICS, MODEL_CONFIG_FIELDS, load_spec, validate_spec_data

REPO = Path(__file__).resolve().parents[2]

# Smoke studies run one after another on a 2-core laptop (scripts/run_catalog.py): planned trials x
# epochs stays under this, and every dataset they use has an offline source.
SMOKE_TRIAL_EPOCHS = 120
SMOKE_MAX_EPOCHS = 10
OFFLINE_DATASETS = {
    "digits",
    "mnist_5k",
    "fashion_mnist",
    "digits_c",
    "fashion_mnist_c",
    "ptb_pos_sample",
    "ptb_lm_sample",
    "rotten_tomatoes_vader",
    "california_housing",
}
SMOKE_PRESETS = {"vit_lite_tiny", "encoder_tiny", "tabular_tiny", "mlp_classifier_tiny"}


def _own_spec(claim: str, size: str) -> bool:
    return study_claim(claim, size) == claim and (CATALOG_DIR / claim / f"{size}.yaml").exists()


CATALOG_SPECS = [(claim, size) for claim in claim_ids() for size in SIZES if _own_spec(claim, size)]


def _spec_id(param) -> str:
    return f"{param[0]}-{param[1]}"


def test_the_catalog_covers_every_claim_of_both_papers():
    claims = load_claims()
    assert {c.paper for c in claims.values()} == {"autonorm", "transforming_rank"}
    datasets = {c.dataset for c in claims.values() if c.paper == "autonorm"}
    paper_datasets = {"mnist", "fashion_mnist", "svhn", "cifar10", "cifar100", "sst2", "california_housing"}
    assert paper_datasets <= datasets
    assert {"energy", "ptb_lm"} <= datasets
    checks = {c.check.type for c in claims.values()}
    assert checks == {
        "difference",
        "ordering",
        "sweep",
        "gate_pattern",
        "rank_vs_depth",
        "ratio_vs_depth",
        "mean_spike",
        "width_threshold",
        "trend",
        "rank_trainability",
    }


def test_every_claim_has_a_study_or_a_reason_at_every_size_and_nothing_else_lives_in_the_catalog():
    folders = {p.name for p in CATALOG_DIR.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert folders == {c for c in claim_ids() if get_claim(c).shares_study_with is None}
    for claim in claim_ids():
        for size in SIZES:
            shared = study_claim(claim, size) if study_claim(claim, size) != claim else None
            own = (CATALOG_DIR / claim / f"{size}.yaml").exists()
            reason = get_claim(claim).no_spec.get(size)
            if shared is not None:
                # a claim that reads another's study has no spec and no reason of its own
                assert not own and reason is None, f"{claim} {size}"
                assert spec_path(claim, size) == spec_path(shared, size)
            else:
                assert own != (reason is not None), f"{claim} {size}: a spec, or a reason why there is none"
        files = (
            set() if get_claim(claim).shares_study_with else {p.name for p in (CATALOG_DIR / claim).glob("*")}
        )
        assert files <= {f"{size}.yaml" for size in SIZES}


def test_claims_that_need_the_same_experiment_share_one_study():
    # the three CIFAR-10 claims read one study; the NLP gates read the POS study (unfrozen AutoNorm's gates)
    assert get_claim("cifar10_stabilisation").shares_study_with == "cifar10_autonorm_s_beats_frozen_ln"
    assert get_claim("vision_gates_collapse_to_ln").shares_study_with == "cifar10_autonorm_s_beats_frozen_ln"
    assert get_claim("nlp_gates_mixed_deeper_dyt").shares_study_with == "ptb_pos_autonorm_s_beats_frozen_ln"


def test_the_digits_claims_read_one_training_at_the_cpu_size_and_their_own_data_elsewhere():
    digits = "cifar10_autonorm_s_beats_frozen_ln"
    assert set(claims_reading(digits, "cpu")) == {
        digits,
        "cifar10_stabilisation",
        "vision_gates_collapse_to_ln",
        "svhn_adanorm_best",
        "cifar10_c_robustness",
    }
    # one training, every arm the readings compare, and the corrupted copies the robustness claim reads
    spec = load_catalog_spec(digits, "cpu")
    assert spec.dataset == "digits_c"
    assert {"adanorm", "autonorm_s", "autonorm", "random_selector", "frozen_ln"} <= set(spec.methods)
    # at the paper size each keeps its own dataset
    assert load_catalog_spec("svhn_adanorm_best", "paper").dataset == "svhn"
    assert spec_path("cifar10_c_robustness", "paper") != spec_path(digits, "paper")


def test_a_claim_cannot_share_a_study_with_a_claim_that_shares_one_itself(tmp_path, monkeypatch):
    import studies.catalog.claims as claims_module

    raw = yaml.safe_load(claims_module.CLAIMS_FILE.read_text())
    for entry in raw["claims"]:
        if entry["id"] == "cifar10_c_robustness":
            entry["shares_study_at"] = {"cpu": "svhn_adanorm_best"}  # itself a reader at cpu
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(claims_module, "CLAIMS_FILE", path)
    claims_module.load_claims.cache_clear()
    try:
        with pytest.raises(ValueError, match="must be a claim with specs of its own"):
            claims_module.load_claims()
    finally:
        claims_module.load_claims.cache_clear()


@pytest.mark.parametrize("size", SIZES)
def test_no_experiment_is_run_twice_under_two_names(size):
    specs = {
        claim: yaml.safe_load(spec_path(claim, size).read_text())
        for claim in claim_ids()
        if _own_spec(claim, size)
    }
    assert duplicate_studies(specs) == []


def test_a_pair_of_specs_equal_up_to_their_names_is_caught():
    spec = yaml.safe_load(spec_path("california_housing_no_gain", "smoke").read_text())
    renamed = {**spec, "name": "catalog-energy-smoke", "claim": "energy_no_gain", "description": "Energy"}
    assert duplicate_studies({"california_housing_no_gain": spec, "energy_no_gain": renamed}) == [
        ("california_housing_no_gain", "energy_no_gain")
    ]
    other_seeds = {**renamed, "seeds": [5, 6, 7]}
    assert duplicate_studies({"california_housing_no_gain": spec, "energy_no_gain": other_seeds}) == []


@pytest.mark.parametrize(("claim", "size"), CATALOG_SPECS, ids=_spec_id)
def test_every_study_can_express_the_claims_it_serves(claim, size):
    dataset = load_catalog_spec(claim, size).dataset
    for served in claims_reading(claim, size):
        assert expressibility_problem(get_claim(served), dataset) is None, served


def test_a_100_class_claim_cannot_be_expressed_on_a_10_class_stand_in():
    cifar100 = get_claim("cifar100_autonorm_s_beats_frozen_ln")
    assert "cannot express" in (expressibility_problem(cifar100, "digits") or "")
    assert expressibility_problem(cifar100, "cifar100") is None
    energy = get_claim("energy_no_gain")
    assert "tabular data" in (expressibility_problem(energy, "digits") or "")


@pytest.mark.parametrize("claim", claim_ids())
def test_every_number_a_check_relies_on_has_a_source(claim):
    assert source_problems(get_claim(claim)) == []


def test_a_check_number_without_a_source_is_rejected():
    claim = get_claim("mnist_autonorm_s_level_with_frozen_ln").model_copy(update={"sources": {}})
    assert "'margin' = 0.01 has no source" in " ".join(source_problems(claim))


@pytest.mark.parametrize("claim", claim_ids())
def test_no_check_is_implied_by_its_setup(claim):
    assert vacuous_check_problems(get_claim(claim)) == []


def test_checks_that_cannot_fail_are_rejected():
    nlp = get_claim("nlp_gates_mixed_deeper_dyt")
    frozen = nlp.model_copy(update={"check": nlp.check.model_copy(update={"method": "autonorm_s"})})
    assert "pass whenever the freeze fires" in " ".join(vacuous_check_problems(frozen))
    vision = get_claim("vision_gates_collapse_to_ln")
    at_start = vision.model_copy(update={"check": vision.check.model_copy(update={"threshold": 0.5})})
    assert "starting weight" in " ".join(vacuous_check_problems(at_start))


@pytest.mark.parametrize(("claim", "size"), CATALOG_SPECS, ids=_spec_id)
def test_asha_never_cuts_autonorm_s_before_its_freeze(claim, size):
    assert tuning_problems(load_catalog_spec(claim, size)) == []


def test_an_asha_grace_period_at_t_freeze_is_rejected():
    spec = yaml.safe_load(spec_path("cifar10_autonorm_s_beats_frozen_ln", "paper").read_text())
    spec["scheduler"]["grace_period"] = 10
    assert "before the freeze can act" in " ".join(tuning_problems(load_spec(yaml.safe_dump(spec))))


@pytest.mark.parametrize(("claim", "size"), CATALOG_SPECS, ids=_spec_id)
def test_a_study_that_needs_the_freeze_does_not_set_eps_h_where_it_cannot_fire(claim, size):
    assert freeze_problems(get_claim(claim), load_catalog_spec(claim, size)) == []


def test_a_high_eps_h_in_a_study_that_needs_the_freeze_is_rejected():
    claim = "autonorm_s_post_freeze_gate_ablation"
    spec = yaml.safe_load(spec_path(claim, "smoke").read_text())
    spec["method_search"]["autonorm_s"]["eps_h"] = 0.6  # the first cpu run's value: 0 of 15 trials froze
    problems = freeze_problems(get_claim(claim), load_spec(yaml.safe_dump(spec)))
    assert "a high eps_H stops it" in " ".join(problems)
    # a tuned eps_H is judged by the highest value it can draw
    spec["kind"] = "compare"
    del spec["method_search"]["autonorm_s"]["post_freeze_gate"]
    spec["method_search"]["autonorm_s"]["eps_h"] = {"type": "uniform", "low": 0.05, "high": 0.5}
    problems = freeze_problems(get_claim(claim), load_spec(yaml.safe_dump(spec)))
    assert "eps_H 0.5 is above" in " ".join(problems)


def test_every_dataset_a_trained_claim_runs_on_has_a_sourced_convergence_level():
    for claim, size in CATALOG_SPECS:
        if get_claim(claim).measured_at == "trained":
            dataset = load_catalog_spec(claim, size).dataset
            assert convergence_for(dataset) is not None, f"{claim} {size}: {dataset}"
    assert all(level.source.strip() for level in convergence_levels().values())


@pytest.mark.parametrize(("claim", "size"), CATALOG_SPECS, ids=_spec_id)
def test_each_catalog_spec_validates_and_names_its_claim(claim, size):
    spec = load_spec(spec_path(claim, size))
    assert spec.claim == claim
    # ... also as the API validates a submission: strict JSON types, the server's default limits
    data = yaml.safe_load(spec_path(claim, size).read_text())
    assert validate_spec_data(data, limits=StudyLimits()).claim == claim


@pytest.mark.parametrize("claim", [c for c in claim_ids() if _own_spec(c, "smoke")])
def test_smoke_specs_stay_small_and_run_on_offline_data(claim):
    spec = load_catalog_spec(claim, "smoke")
    assert spec.planned_trials() * spec.budget.epochs <= SMOKE_TRIAL_EPOCHS
    assert spec.budget.epochs <= SMOKE_MAX_EPOCHS
    assert spec.dataset in OFFLINE_DATASETS
    assert spec.model.preset in SMOKE_PRESETS
    assert spec.resources.gpu in (0, "auto")  # auto is 0 on a cluster without GPUs
    assert spec.planned_trials_by_phase().get("tune", 0) == 0  # fixed knobs: no tuning phase


@pytest.mark.parametrize("claim", [c for c in claim_ids() if _own_spec(c, "paper")])
def test_paper_specs_run_the_papers_data_at_the_papers_sizes(claim):
    spec = load_catalog_spec(claim, "paper")
    paper_dataset = get_claim(claim).dataset
    if paper_dataset is not None:
        # the paper's dataset, or the registry's closest stand-in when the paper's has no open source
        assert spec.dataset == paper_dataset or STAND_IN_FOR.get(spec.dataset) == paper_dataset
    assert spec.model.preset in {"vit_lite_paper", "encoder_paper", "tabular_paper", "mlp_classifier_paper"}


@pytest.mark.parametrize(("claim", "size"), CATALOG_SPECS, ids=_spec_id)
def test_specs_with_autonorm_s_freeze_before_the_last_epoch(claim, size):
    spec = load_catalog_spec(claim, size)
    if "autonorm_s" in spec.methods:
        t_freeze = spec.search_space_for("autonorm_s")["t_freeze"]
        values = t_freeze.values if t_freeze.type == "grid" else [t_freeze.value]
        assert max(values) < spec.budget.epochs


@pytest.mark.parametrize("claim", [c for c in claim_ids() if get_claim(c).paper == "transforming_rank"])
def test_rank_studies_run_without_layerscale(claim):
    # With LayerScale 1e-4 every block starts as the identity and no rank effect shows at init.
    # The residual-MLP classifier (the rank studies' model) has no LayerScale at all.
    for size in [s for s in SIZES if _own_spec(claim, s)]:
        spec = load_catalog_spec(claim, size)
        if "layer_scale_init" not in MODEL_CONFIG_FIELDS[spec.model.backbone(spec.dataset)]:
            continue
        assert "layer_scale_init" in spec.model.overrides
        assert spec.model.overrides["layer_scale_init"] is None


@pytest.mark.parametrize("claim", claim_ids())
def test_the_papers_numbers_are_in_the_metrics_own_units(claim):
    reported = get_claim(claim).reported
    paper_spec = load_catalog_spec(claim, "paper")
    if study_claim(claim, "paper") != claim:
        return  # the host claim's spec carries the paper numbers of the study
    metric = DATASET_METRICS[paper_spec.dataset][0]
    for row, value in reported.values.items():
        if metric == "accuracy" and get_claim(claim).check.type != "width_threshold":
            assert 0.0 <= value <= 1.0, f"{row}: accuracy is a fraction"
    for method, value in paper_spec.paper_numbers.items():
        assert reported.values[method] == pytest.approx(value)


@pytest.mark.parametrize("claim", claim_ids())
def test_the_rows_a_claim_compares_are_methods_its_specs_run(claim):
    check = get_claim(claim).check
    selectors = []
    if check.type == "difference":
        selectors = [check.method, check.reference]
    elif check.type == "ordering":
        selectors = [s for pair in check.pairs for s in (pair.method, pair.reference)]
    elif check.type in ("gate_pattern", "sweep"):
        selectors = [check.method]
    for size in [s for s in SIZES if spec_path(claim, s).exists()]:
        methods = load_catalog_spec(claim, size).methods
        for selector in selectors:
            method = selector if isinstance(selector, str) or selector is None else selector.get("method")
            assert method is None or method in methods, f"{claim} {size}: {method}"


def test_an_unknown_claim_names_the_known_ones():
    with pytest.raises(UnknownClaimError, match="cifar10_stabilisation"):
        get_claim("cifar10_stabilization")
    with pytest.raises(ValueError, match="smoke, cpu, paper"):
        spec_path("cifar10_stabilisation", "huge")


def test_a_submitted_spec_must_name_a_catalog_claim():
    data = yaml.safe_load(spec_path("cifar10_autonorm_s_beats_frozen_ln", "smoke").read_text())
    data["claim"] = "cifar10_stabilization"
    with pytest.raises(Exception, match="unknown claim 'cifar10_stabilization'"):
        validate_spec_data(data, limits=StudyLimits())
    # a stored spec re-read without a context (the driver, old studies) still loads
    assert load_spec(yaml.safe_dump(data)).claim == "cifar10_stabilization"


def test_the_package_ships_the_catalog():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = package_data["studies"]
    shipped = {
        p.relative_to(REPO / "studies") for pattern in patterns for p in (REPO / "studies").glob(pattern)
    }
    catalog = {p.relative_to(REPO / "studies") for p in CATALOG_DIR.rglob("*.yaml")}
    assert catalog <= shipped


def test_catalog_claims_and_reports_import_without_torch_or_fastapi():
    code = (
        "import sys, studies.catalog, studies.claims, studies.report; "
        "studies.catalog.load_claims(); "
        "print(sorted(m for m in ('torch', 'fastapi', 'ray', 'mlflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("claim", claim_ids())
def test_every_equivalence_claim_shows_its_verdict_across_its_margin(claim):
    check = get_claim(claim).check
    if check.type == "difference" and check.expect == "no_difference":
        margin = "margin" if check.margin is not None else "relative_margin"
        values = get_claim(claim).sensitivity.get(margin, [])
        assert getattr(check, margin) in values  # the pre-registered margin is one of the rows
        assert min(values) < getattr(check, margin) < max(values)  # and both sides of it are shown


@pytest.mark.parametrize(("claim", "size"), CATALOG_SPECS, ids=_spec_id)
def test_every_threshold_grid_resolves_the_threshold_it_tests(claim, size):
    assert grid_problems(get_claim(claim), load_catalog_spec(claim, size)) == []


def test_a_grid_without_points_near_the_threshold_is_rejected():
    spec = yaml.safe_load(spec_path("width_expansion_threshold", "smoke").read_text())
    spec["search"]["width_expansion"] = {"type": "grid", "values": [1.0, 1.5, 3.0, 4.0]}
    problems = grid_problems(get_claim("width_expansion_threshold"), load_spec(yaml.safe_dump(spec)))
    assert len(problems) == 1
