"""NormLab's sequential seeds against a fixed design and AdaStop, by simulation.

    python -m benchmarks.bench_sequential [--studies N] [--quick] [--adastop-seconds S] [--scenario NAME ...]
                                          [--into BENCHMARKS.md]

A study compares every method with a reference over seeds. Each scenario below takes its seed-to-seed
spreads from one of the cpu tier's reports (reports/*.json: the per-seed final metric of every arm) and its
true differences from the AutoNorm paper's numbers (science.md section 4, the design notes' table of the
paper's results, quoted in `SCENARIOS`). A simulated study draws every seed of every arm up front:

    value[method, seed] = mean[method] + b[seed] + e[method, seed]

with b shared by every method on a seed (the seed fixes data order and initialisation for all arms, which
is why NormLab pairs its comparisons) and e each method's own noise. Their spreads reproduce the report:
sd(e[method] - e[reference]) is the measured sd of the paired differences, and sd(b + e[reference]) the
reference's own seed-to-seed sd (`noise_model`). The noise is Gaussian, or Student's t with 3 degrees of
freedom scaled to the same sd (the heavy-tailed variant).

Every design reads the same simulated studies, each only the seeds it asks for:

- NormLab: `studies.sequential.looks.SequentialMonitor` with the default design (first_seeds 3,
  seeds_per_look 2, max_seeds 10: looks at 3, 5, 7, 9 and 10 seeds; alpha 0.05, power 0.8, futility on),
  O'Brien-Fleming and Pocock spending; `effect` is the smallest of the arms' paper differences. After each
  look only the reference and the methods still open train the next seeds, as the study driver does.
- Fixed: all max_seeds seeds of every arm, a paired t test per comparison (two-sided for superiority, two
  one-sided tests for equivalence), Holm's step-down at the same alpha.
- AdaStop (PyPI `adastop`, Mathieu et al. 2023), `MultipleAgentsComparator` comparing every method with the
  reference, at the same alpha, with its default B = 10,000 permutations and beta = 0 (no early accept).
  AdaStop adds n evaluations per arm at each of K looks, so it cannot start at 3 and add 2. It runs as
  n = 2, K = 5 (the same 10 seeds per arm in the same 5 looks, looking at 2, 4, 6, 8, 10 seeds) and as
  n = 5, K = 2 (the same 10 seeds in the two-look shape its authors use), the latter also at alpha / 2
  (`matched_shapes` says why). It is a permutation test of the pooled values: it does not pair seeds. It is
  slow (Python loops over the permutations), so each row runs as many studies as `--adastop-seconds` allows,
  and its counts are printed.

Measured per scenario: the family-wise error under the null (any wrong rejection; superiority: no method
differs from the reference; equivalence: every true difference lies exactly at the margin) with its
Monte-Carlo standard error, the power of each comparison under the paper's differences, the seeds trained
(summed over arms) as a ratio of the fixed design's methods x max_seeds, and the wall time of the designs'
decisions per 1,000 studies (the data are drawn once and shared).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy import stats

from studies.sequential.looks import SequentialMonitor
from studies.spec.sections import SequentialDesign

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
HEADING = "## Sequential seeds against a fixed design and AdaStop, simulated (benchmarks/bench_sequential.py)"
ALPHA = 0.05  # every design's family-wise level
STUDIES = 10_000  # simulated studies per scenario and truth (NormLab and the fixed design)
ADASTOP_SECONDS = (
    120.0  # per AdaStop row and scenario, twice for the matched shape (null and effect alternate)
)
QUICK_STUDIES, QUICK_SECONDS = 300, 5.0  # `--quick` (a smoke run): shows the section's shape, not its numbers
ADASTOP_PERMUTATIONS = 10_000  # AdaStop's own default B
TRIALS_AIM = 0.7  # expected seeds under the effect, as a share of the fixed design's
# Power-matched rows: the design's `power` set to the fixed design's (within these bounds) and max_seeds
# raised from the fixed design's seed count, one at a time up to this cap, until every comparison with a
# true difference has the fixed design's power (within MATCH_TOLERANCE) on MATCH_STUDIES studies.
MATCH_MAX_SEEDS = 20
MATCH_POWER_BOUNDS = (0.8, 0.99)
MATCH_STUDIES = 2_000
MATCH_TOLERANCE = 0.01
# The tests alone (`calibrate`) run this many times the scenarios' studies: one cheap comparison each, and
# an error of a few thousandths needs an MC SE near 0.001 to show.
CALIBRATION_FACTOR = 4
Test = Literal["superiority", "equivalence"]
SequentialTest = Literal["superiority", "non_inferiority", "equivalence"]
Tails = Literal["gaussian", "t3"]


# ----- the measured spreads -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredSpread:
    """What one cpu report says about the seed-to-seed spread of its arms."""

    report: str  # file name under reports/
    study_id: str
    git_revision: str  # the NormLab commit that trained it
    dataset: str
    stand_in_for: str | None  # the paper's dataset this one stands in for, None when it is the paper's own
    metric: str
    reference: str
    reference_mean: float
    reference_sd: float  # the reference's sd over seeds
    paired: dict[str, tuple[int, float]]  # method -> (paired seeds, sd of its differences from the reference)
    check: dict[str, Any]  # the claim's check as the report stored it (its margin, if any)


def measured_spread(report: str, *, reports: Path = REPORTS) -> MeasuredSpread:
    """The spreads of one report's table: every arm's paired differences from the reference, seed by seed."""
    data = json.loads((reports / report).read_text(encoding="utf-8"))
    table = data["table"]
    reference = table["reference"]
    rows = {row["method"]: row for row in table["rows"] if row.get("group") is None}
    theirs = {s: v for s, v in rows[reference]["per_seed"].items() if _finite(v)}
    paired: dict[str, tuple[int, float]] = {}
    for method, row in rows.items():
        if method == reference:
            continue
        mine = {s: v for s, v in row["per_seed"].items() if _finite(v)}
        differences = [mine[s] - theirs[s] for s in sorted(set(mine) & set(theirs))]
        if len(differences) >= 2:
            paired[method] = (len(differences), statistics.stdev(differences))
    return MeasuredSpread(
        report=report,
        study_id=data["study_id"],
        git_revision=data["provenance"]["git_revision"],
        dataset=table["dataset"],
        stand_in_for=data["dataset"].get("stand_in_for"),
        metric=table["metric"],
        reference=reference,
        reference_mean=statistics.fmean(theirs.values()),
        reference_sd=statistics.stdev(theirs.values()),
        paired=paired,
        check=dict(data["claim"]["check"]),
    )


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


@dataclass(frozen=True)
class NoiseModel:
    """value[method, seed] = mean[method] + b[seed] + e[method, seed] (see the module docstring)."""

    seed_sd: float  # sd of b, shared by every method on one seed
    noise_sd: dict[str, float]  # sd of e per method, the reference included
    tails: Tails = "gaussian"


def noise_model(spread: MeasuredSpread, methods: Sequence[str], tails: Tails = "gaussian") -> NoiseModel:
    """Spreads that reproduce the report: each method's paired-difference sd and the reference's sd.

    The reference's own noise takes half the variance of the smallest paired spread (no method may need a
    negative variance), each method the rest of its own; what is left of the reference's sd is the shared
    seed effect, which pairing cancels and an unpaired test (AdaStop) must carry. Where the reference's sd is
    below that share (digits_c), there is no shared effect and the reference is a little noisier than
    measured: the paired spreads, which every paired test reads, are kept exact.
    """
    others = [m for m in methods if m != spread.reference]
    missing = [m for m in others if m not in spread.paired]
    if missing:
        raise ValueError(f"{spread.report} has no paired seeds for {missing}")
    smallest = min(spread.paired[m][1] for m in others)
    reference_noise = smallest / math.sqrt(2.0)
    noise = {spread.reference: reference_noise}
    for method in others:
        noise[method] = math.sqrt(max(0.0, spread.paired[method][1] ** 2 - reference_noise**2))
    seed_sd = math.sqrt(max(0.0, spread.reference_sd**2 - reference_noise**2))
    return NoiseModel(seed_sd=seed_sd, noise_sd=noise, tails=tails)


# ----- the scenarios --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arm:
    method: str
    effect: float  # true difference from the reference under the paper's numbers, in the metric's units
    source: str  # where that number comes from


@dataclass(frozen=True)
class Scenario:
    name: str
    report: str  # the cpu report whose spreads it uses
    test: Test
    arms: tuple[Arm, ...]  # the methods compared with the reference; the first is the design's primary one
    higher_is_better: bool
    tails: Tails = "gaussian"
    design_effect: float | None = None  # superiority's `effect`; None: the smallest paper difference
    adastop: bool = True  # False where AdaStop would only repeat another scenario's rows

    def methods(self, spread: MeasuredSpread) -> list[str]:
        return [spread.reference, *(arm.method for arm in self.arms)]

    def margin(self, spread: MeasuredSpread) -> float | None:
        """The equivalence margin the claim's check preregistered (absolute, or relative to the reference)."""
        if self.test != "equivalence":
            return None
        if spread.check.get("margin") is not None:
            return float(spread.check["margin"])
        return float(spread.check["relative_margin"]) * spread.reference_mean

    def design(self, spread: MeasuredSpread, spending: str) -> SequentialDesign:
        """NormLab's default design with the scenario's effect of interest (superiority) or margin."""
        if self.test == "superiority":
            return SequentialDesign(test="superiority", effect=self.effect_of_interest(), spending=spending)
        return SequentialDesign(test="equivalence", margin=self.margin(spread), spending=spending)

    def effect_of_interest(self) -> float:
        """The smallest non-zero paper difference among the arms unless the scenario sets one: `effect` is
        the smallest difference worth detecting, and the futility bound stops a comparison whose data reject
        a true difference of `effect`, so a larger value stops arms whose real but smaller gain the paper
        reports (the cifar10_large_effect scenario shows how much)."""
        if self.design_effect is not None:
            return self.design_effect
        return min(abs(arm.effect) for arm in self.arms if arm.effect != 0.0)

    def truths(self, spread: MeasuredSpread) -> dict[str, dict[str, float]]:
        """Each arm's true difference from the reference under the null and under the paper's numbers."""
        if self.test == "superiority":
            null = {arm.method: 0.0 for arm in self.arms}
        else:
            # At the margin, in the metric's worse direction: the hardest null the design must not call
            # equivalent (either side is as hard; one is enough).
            margin = self.margin(spread) or 0.0
            worse = -1.0 if self.higher_is_better else 1.0
            null = {arm.method: worse * margin for arm in self.arms}
        return {"null": null, "effect": {arm.method: arm.effect for arm in self.arms}}


_CIFAR10 = "science.md section 4, CIFAR-10: AutoNorm-S 86.35 %, FrozenLN 82.97 %"
_NO_NUMBER = "no number in science.md section 4 for this dataset: taken as no difference (a true null)"
SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="cifar10",
        report="cifar10_autonorm_s_beats_frozen_ln.json",
        test="superiority",
        arms=(
            Arm("autonorm_s", 0.0338, f"+3.38 points ({_CIFAR10})"),
            Arm("autonorm", 0.0, "0: science.md section 4 says only that the Random Selector beat it"),
            Arm("random_selector", 0.0251, f"+2.51 points (the Random Selector's 85.48 %; {_CIFAR10})"),
            Arm("adanorm", 0.0, f"0: {_NO_NUMBER} (its 91.10 % is SVHN's)"),
        ),
        higher_is_better=True,
    ),
    Scenario(
        name="ptb_pos",
        report="ptb_pos_autonorm_s_beats_frozen_ln.json",
        test="superiority",
        arms=(
            Arm(
                "autonorm_s", 0.0062, "+0.62 points (science.md section 4, PTB POS: 97.42 % against 96.80 %)"
            ),
            Arm("autonorm", 0.0, f"0: {_NO_NUMBER}"),
        ),
        higher_is_better=True,
    ),
    Scenario(
        name="sst2",
        report="sst2_autonorm_s_beats_frozen_ln.json",
        test="superiority",
        arms=(
            Arm("autonorm_s", 0.0183, "+1.83 points (science.md section 4, SST-2: 91.25 % against 89.42 %)"),
        ),
        higher_is_better=True,
    ),
    Scenario(
        name="california_housing",
        report="california_housing_no_gain.json",
        test="equivalence",
        arms=(Arm("autonorm_s", -0.0013, "-0.0013 RMSE (science.md section 4, California Housing)"),),
        higher_is_better=False,
    ),
    Scenario(
        # The same studies with the design sized for AutoNorm-S's +3.38 instead of the smallest difference:
        # what `effect` means for an arm whose true gain is real but smaller (the Random Selector's).
        name="cifar10_large_effect",
        report="cifar10_autonorm_s_beats_frozen_ln.json",
        test="superiority",
        arms=(
            Arm("autonorm_s", 0.0338, f"+3.38 points ({_CIFAR10})"),
            Arm("autonorm", 0.0, "0: science.md section 4 says only that the Random Selector beat it"),
            Arm("random_selector", 0.0251, f"+2.51 points (the Random Selector's 85.48 %; {_CIFAR10})"),
            Arm("adanorm", 0.0, f"0: {_NO_NUMBER} (its 91.10 % is SVHN's)"),
        ),
        higher_is_better=True,
        design_effect=0.0338,
        adastop=False,
    ),
    Scenario(
        name="cifar10_t3",
        report="cifar10_autonorm_s_beats_frozen_ln.json",
        test="superiority",
        arms=(
            Arm("autonorm_s", 0.0338, f"+3.38 points ({_CIFAR10})"),
            Arm("autonorm", 0.0, "0: science.md section 4 says only that the Random Selector beat it"),
            Arm("random_selector", 0.0251, f"+2.51 points (the Random Selector's 85.48 %; {_CIFAR10})"),
            Arm("adanorm", 0.0, f"0: {_NO_NUMBER} (its 91.10 % is SVHN's)"),
        ),
        higher_is_better=True,
        tails="t3",
    ),
)


def simulate(
    model: NoiseModel, methods: Sequence[str], seeds: int, studies: int, rng: np.random.Generator
) -> np.ndarray:
    """The noise of `studies` studies, every seed of every arm: (studies, methods, seeds). The truths are
    added per condition, so the null and the effect see the same draws (common random numbers)."""

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        if model.tails == "t3":
            # A t with 3 df has variance 3: scaled to unit variance, so the sd stays the report's.
            return rng.standard_t(3, size=shape) / math.sqrt(3.0)
        return rng.standard_normal(shape)

    shared = model.seed_sd * draw((studies, 1, seeds))
    own = draw((studies, len(methods), seeds)) * np.array([model.noise_sd[m] for m in methods])[:, None]
    return shared + own


# ----- the designs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One design's decisions over simulated studies of one truth."""

    rejected: np.ndarray  # (studies, comparisons): the comparison's null was rejected
    improvement: np.ndarray  # (studies, comparisons): sign of its estimate where it stopped, +1 = better
    trials: np.ndarray  # (studies,): seeds trained, summed over every arm
    seconds: float  # wall time of the decisions

    @property
    def studies(self) -> int:
        return int(self.rejected.shape[0])


def run_normlab(
    values: np.ndarray, methods: Sequence[str], design: SequentialDesign, *, higher_is_better: bool
) -> Outcome:
    """Every study through `SequentialMonitor`, each arm training only the seeds the monitor asks for."""
    studies, comparisons = values.shape[0], len(methods) - 1
    rejected = np.zeros((studies, comparisons), dtype=bool)
    improvement = np.zeros((studies, comparisons))
    trials = np.zeros(studies, dtype=int)
    started = time.perf_counter()
    for study in range(studies):
        monitor = SequentialMonitor(
            design, methods=list(methods), reference=methods[0], higher_is_better=higher_is_better
        )
        seen: dict[str, dict[int, float]] = {m: {} for m in methods}
        arms, seeds = list(methods), design.seeds_added_at(0)
        while seeds:
            for arm in arms:
                row = values[study, methods.index(arm)]
                seen[arm].update({s: float(row[s]) for s in seeds})
            monitor.look(seen)
            arms, seeds = monitor.open_arms(), monitor.next_seeds()
        for j, method in enumerate(methods[1:]):
            state = monitor.comparisons[method]
            rejected[study, j] = state.rejected
            improvement[study, j] = math.copysign(1.0, state.points[-1].estimate) if state.points else 0.0
        trials[study] = sum(len(v) for v in seen.values())
    return Outcome(rejected, improvement, trials, time.perf_counter() - started)


def run_fixed(
    values: np.ndarray,
    *,
    test: str,
    alpha: float,
    higher_is_better: bool,
    margin: float | None = None,
) -> Outcome:
    """A paired t test per comparison on every seed, Holm's step-down across the comparisons."""
    started = time.perf_counter()
    studies, arms, seeds = values.shape
    sign = 1.0 if higher_is_better else -1.0
    differences = sign * (values[:, 1:, :] - values[:, :1, :])  # (studies, comparisons, seeds), + = better
    mean = differences.mean(axis=2)
    se = differences.std(axis=2, ddof=1) / math.sqrt(seeds)
    df = seeds - 1
    bound = float(margin or 0.0)
    if test == "superiority":
        p = 2.0 * stats.t.sf(np.abs(mean / se), df)
    elif test == "non_inferiority":
        p = stats.t.sf((mean + bound) / se, df)
    else:
        # Two one-sided tests: equivalence is shown when both reject, so the larger p-value decides.
        p = np.maximum(stats.t.sf((mean + bound) / se, df), stats.t.sf((bound - mean) / se, df))
    rejected = holm(p, alpha)
    trials = np.full(studies, arms * seeds)
    return Outcome(rejected, np.sign(mean), trials, time.perf_counter() - started)


def holm(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down on each row of p-values (studies, comparisons): which comparisons are rejected."""
    m = p.shape[1]
    order = np.argsort(p, axis=1)
    ordered = np.take_along_axis(p, order, axis=1)
    passes = np.cumprod(ordered <= alpha / (m - np.arange(m)), axis=1).astype(bool)
    rejected = np.zeros_like(passes)
    np.put_along_axis(rejected, order, passes, axis=1)
    return rejected


def adastop_available() -> bool:
    return importlib.util.find_spec("adastop") is not None


@dataclass(frozen=True)
class AdaStopShape:
    n: int  # evaluations added per arm at each look
    looks: int  # AdaStop's K
    alpha: float = ALPHA  # what AdaStop is given as its level

    @property
    def label(self) -> str:
        level = "" if self.alpha == ALPHA else f", alpha {self.alpha:g}"
        return f"AdaStop, n={self.n}, K={self.looks}{level}"


def matched_shapes(design: SequentialDesign) -> tuple[AdaStopShape, ...]:
    """AdaStop's equal batches closest to the design: its number of looks over the same maximum seeds, and
    the two-look shape over the same maximum (its authors' usual choice), the latter also at half the
    level: AdaStop 0.1.3 compares |T| with the permutation law of the signed differences, which makes its
    two-sided test one at about twice the level it is given (see the section's reading)."""
    looks = len(design.looks())
    same_looks = AdaStopShape(n=max(1, design.max_seeds // looks), looks=looks)
    two_looks = AdaStopShape(n=design.max_seeds // 2, looks=2)
    halved = AdaStopShape(n=two_looks.n, looks=2, alpha=ALPHA / 2)
    return (same_looks, halved) if same_looks == two_looks else (same_looks, two_looks, halved)


def adastop_study(
    values: np.ndarray, methods: Sequence[str], shape: AdaStopShape, *, seed: int
) -> tuple[list[str], int]:
    """One study through AdaStop's `MultipleAgentsComparator`: each comparison's decision ("larger" and
    "smaller" say how the reference compares with the method, "equal" that nothing was shown) and the seeds
    trained, summed over arms. Only arms in a comparison still open train the next batch."""
    from adastop import MultipleAgentsComparator

    comparisons = np.array([(0, j) for j in range(1, len(methods))])
    comparator = MultipleAgentsComparator(
        n=shape.n,
        K=shape.looks,
        B=ADASTOP_PERMUTATIONS,
        comparisons=comparisons,
        alpha=shape.alpha,
        beta=0.0,
        seed=seed,
    )
    used = [0] * len(methods)
    for look in range(shape.looks):
        open_arms = (
            set(range(len(methods)))
            if look == 0
            else {int(a) for a in np.asarray(comparator.current_comparisons).ravel()}
        )
        for arm in open_arms:
            used[arm] += shape.n
        comparator.partial_compare({m: values[i, : used[i]] for i, m in enumerate(methods)}, verbose=False)
        if comparator.is_finished:
            break
    return [str(comparator.decisions[str(c)]) for c in comparator.comparisons], sum(used)


def run_adastop(
    conditions: dict[str, np.ndarray],
    methods: Sequence[str],
    shape: AdaStopShape,
    *,
    test: Test,
    higher_is_better: bool,
    seconds: float,
    max_studies: int,
    rng: np.random.Generator,
) -> dict[str, Outcome]:
    """AdaStop on the first studies of each condition, the conditions alternating until `seconds` pass (at
    least one study each, at most `max_studies`).

    Superiority: a rejection is "larger" or "smaller", its improvement sign read from which. Equivalence:
    AdaStop has no such test; its "equal" (no difference shown by the last look) is recorded as the
    rejection, to show how often a reader taking "equal" for equivalence would be right or wrong.
    """
    sign = 1.0 if higher_is_better else -1.0
    decided: dict[str, list[list[str]]] = {c: [] for c in conditions}
    trials: dict[str, list[int]] = {c: [] for c in conditions}
    spent: dict[str, float] = dict.fromkeys(conditions, 0.0)
    deadline = time.perf_counter() + seconds
    study = 0
    while study < max_studies and (study == 0 or time.perf_counter() < deadline):
        for condition, values in conditions.items():
            started = time.perf_counter()
            decisions, used = adastop_study(values[study], methods, shape, seed=int(rng.integers(2**31)))
            spent[condition] += time.perf_counter() - started
            decided[condition].append(decisions)
            trials[condition].append(used)
        study += 1
    outcomes = {}
    for condition, rows in decided.items():
        decisions = np.array(rows)
        # Equivalence: "equal" stands in for a rejection (see the docstring).
        rejected = decisions != "equal" if test == "superiority" else decisions == "equal"
        # "larger": the reference's mean is above the method's, so the method is lower in the metric.
        improvement = np.where(decisions == "larger", -sign, np.where(decisions == "smaller", sign, 0.0))
        outcomes[condition] = Outcome(rejected, improvement, np.array(trials[condition]), spent[condition])
    return outcomes


# ----- the figures ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One design's line in a scenario's table."""

    design: str
    kind: Literal["sequential", "fixed", "adastop"]
    studies: int  # per condition
    fwer: float  # P(any wrong rejection) under the null
    fwer_se: float
    power: dict[str, float]  # per comparison with a true difference, under the paper's numbers
    power_all: float  # every such comparison decided correctly in one study
    wrong_under_effect: float | None  # P(any wrong rejection) under the paper's numbers, where an arm is null
    trials_effect: float  # seeds trained under the effect / the fixed design's
    trials_null: float
    seconds_per_1000: float


def summarise(
    design: str,
    kind: Literal["sequential", "fixed", "adastop"],
    outcomes: dict[str, Outcome],
    scenario: Scenario,
    truths: dict[str, dict[str, float]],
    fixed_trials: int,
) -> Row:
    null, effect = outcomes["null"], outcomes["effect"]
    methods = [arm.method for arm in scenario.arms]
    wrong_null = null.rejected.any(axis=1)  # every arm is null here
    fwer = float(wrong_null.mean())
    power: dict[str, float] = {}
    correct = np.ones(effect.studies, dtype=bool)
    null_arms = np.zeros(len(methods), dtype=bool)
    for j, method in enumerate(methods):
        truth = truths["effect"][method]
        if scenario.test == "superiority" and truth == 0.0:
            null_arms[j] = True
            continue
        hit = effect.rejected[:, j]
        if scenario.test == "superiority":
            # A rejection in the wrong direction is no power (it is a type III error).
            better = 1.0 if (truth > 0) == scenario.higher_is_better else -1.0
            hit = hit & (effect.improvement[:, j] == better)
        power[method] = float(hit.mean())
        correct &= hit
    wrong_under_effect = float(effect.rejected[:, null_arms].any(axis=1).mean()) if null_arms.any() else None
    return Row(
        design=design,
        kind=kind,
        studies=min(null.studies, effect.studies),
        fwer=fwer,
        fwer_se=math.sqrt(max(fwer * (1.0 - fwer), 1e-12) / null.studies),
        power=power,
        power_all=float(correct.mean()),
        wrong_under_effect=wrong_under_effect,
        trials_effect=float(effect.trials.mean()) / fixed_trials,
        trials_null=float(null.trials.mean()) / fixed_trials,
        seconds_per_1000=1000.0 * (null.seconds + effect.seconds) / (null.studies + effect.studies),
    )


def powers(effect: Outcome, scenario: Scenario, truths: dict[str, dict[str, float]]) -> dict[str, float]:
    """Each comparison's power under the paper's numbers (a rejection in the wrong direction is none)."""
    return summarise("", "sequential", {"null": effect, "effect": effect}, scenario, truths, 1).power


def power_matched(
    design: SequentialDesign,
    effect: np.ndarray,
    methods: Sequence[str],
    scenario: Scenario,
    truths: dict[str, dict[str, float]],
    fixed: Row,
) -> tuple[SequentialDesign, bool]:
    """The design asked for the fixed design's power (its strongest powered comparison, within
    MATCH_POWER_BOUNDS), with max_seeds raised from the fixed design's seed count until every comparison
    has the fixed design's power within MATCH_TOLERANCE on the first MATCH_STUDIES studies; (the design at
    the cap, False) when none does by MATCH_MAX_SEEDS."""
    low, high = MATCH_POWER_BOUNDS
    # The strongest comparison sets it: the futility bound stops a comparison whose true difference is the
    # effect with up to 1 - power, so a weaker `power` caps that comparison's power below the fixed design's.
    target = max(fixed.power.values(), default=high)
    asked = design.model_copy(update={"power": round(min(high, max(low, target)), 3)})
    sample = effect[:MATCH_STUDIES]
    for max_seeds in range(design.max_seeds, MATCH_MAX_SEEDS + 1):
        candidate = asked.model_copy(update={"max_seeds": max_seeds})
        outcome = run_normlab(sample, methods, candidate, higher_is_better=scenario.higher_is_better)
        found = powers(outcome, scenario, truths)
        if all(found[m] >= fixed.power[m] - MATCH_TOLERANCE for m in found):
            return candidate, True
    return asked.model_copy(update={"max_seeds": MATCH_MAX_SEEDS}), False


@dataclass
class ScenarioResult:
    scenario: Scenario
    spread: MeasuredSpread
    model: NoiseModel
    design: SequentialDesign  # the O'Brien-Fleming one; Pocock differs only in its spending
    rows: list[Row] = field(default_factory=list)
    adastop_note: str = ""


def evaluate(
    scenario: Scenario,
    *,
    studies: int = STUDIES,
    adastop_seconds: float = ADASTOP_SECONDS,
    adastop_max: int | None = None,
    seed: int = 0,
    reports: Path = REPORTS,
    progress: Callable[[str], None] = lambda _: None,
) -> ScenarioResult:
    """Every design on one scenario's simulated studies, under the null and under the paper's numbers."""
    spread = measured_spread(scenario.report, reports=reports)
    methods = scenario.methods(spread)
    model = noise_model(spread, methods, scenario.tails)
    designs = {s: scenario.design(spread, s) for s in ("obrien_fleming", "pocock")}
    seeds = designs["obrien_fleming"].max_seeds
    drawn = max(seeds, MATCH_MAX_SEEDS)  # the power-matched designs may read past the fixed design's seeds
    # A stream per measured spread and noise: adding or dropping a scenario changes no other's draws, and
    # scenarios that differ only in their design (cifar10, cifar10_large_effect) see the same studies.
    rng = np.random.default_rng([seed, zlib.crc32(f"{scenario.report}:{scenario.tails}".encode())])
    noise = simulate(model, methods, drawn, studies, rng)
    truths = scenario.truths(spread)
    conditions = {}
    for condition, truth in truths.items():
        means = spread.reference_mean + np.array([0.0, *(truth[m] for m in methods[1:])])
        conditions[condition] = noise + means[:, None]
    fixed_trials = len(methods) * seeds
    result = ScenarioResult(scenario, spread, model, designs["obrien_fleming"])
    labels = {"obrien_fleming": "NormLab, O'Brien-Fleming", "pocock": "NormLab, Pocock"}
    for spending, design in designs.items():
        progress(f"{scenario.name}: {labels[spending]}, {studies} studies per truth")
        outcomes = {
            c: run_normlab(v, methods, design, higher_is_better=scenario.higher_is_better)
            for c, v in conditions.items()
        }
        result.rows.append(
            summarise(labels[spending], "sequential", outcomes, scenario, truths, fixed_trials)
        )
    margin = scenario.margin(spread)
    fixed = {
        c: run_fixed(
            v[:, :, :seeds],
            test=scenario.test,
            alpha=ALPHA,
            higher_is_better=scenario.higher_is_better,
            margin=margin,
        )
        for c, v in conditions.items()
    }
    fixed_row = summarise(
        f"fixed, {seeds} seeds, paired t + Holm", "fixed", fixed, scenario, truths, fixed_trials
    )
    result.rows.append(fixed_row)
    for spending, design in designs.items():
        matched, reached = power_matched(design, conditions["effect"], methods, scenario, truths, fixed_row)
        label = f"{labels[spending]}, power {matched.power}, max_seeds {matched.max_seeds}" + (
            " (power-matched)" if reached else f" (power not matched by {MATCH_MAX_SEEDS} seeds)"
        )
        progress(f"{scenario.name}: {label}, {studies} studies per truth")
        outcomes = {
            c: run_normlab(v, methods, matched, higher_is_better=scenario.higher_is_better)
            for c, v in conditions.items()
        }
        result.rows.append(summarise(label, "sequential", outcomes, scenario, truths, fixed_trials))
    conditions = {c: v[:, :, :seeds] for c, v in conditions.items()}
    if not scenario.adastop:
        result.adastop_note = "AdaStop does not depend on NormLab's `effect`: its rows are those of cifar10."
        return result
    if not adastop_available():
        result.adastop_note = "AdaStop was not installed (`pip install -e '.[bench]'`): its rows are missing."
        return result
    shapes = matched_shapes(designs["obrien_fleming"])
    for shape in shapes:
        # The shape matched to NormLab's looks is both the slowest (exhaustive permutations at every look)
        # and the closest comparison: it gets twice the time.
        seconds = adastop_seconds * (2.0 if shape == shapes[0] else 1.0)
        progress(f"{scenario.name}: {shape.label}, up to {seconds:.0f} s")
        outcomes = run_adastop(
            conditions,
            methods,
            shape,
            test=scenario.test,
            higher_is_better=scenario.higher_is_better,
            seconds=seconds,
            max_studies=min(studies, adastop_max or studies),
            rng=rng,
        )
        result.rows.append(summarise(shape.label, "adastop", outcomes, scenario, truths, fixed_trials))
    return result


# ----- the tests alone ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """One sequential test's type-I error without futility, beside the fixed test's on the same data."""

    test: str
    spending: str
    error: float
    error_se: float
    fixed_error: float
    fixed_se: float
    studies: int
    # Sequential minus fixed on the same draws, with the SE of that paired difference: the fixed paired t
    # test is exact, so this says how far the boundaries are from exact, free of the draws' own luck.
    excess: float = 0.0
    excess_se: float = 0.0

    @property
    def holds(self) -> bool:
        return self.error <= ALPHA + 1.96 * self.error_se

    @property
    def matches_exact(self) -> bool:
        return self.excess <= 1.96 * self.excess_se


# (test, what sizes the design, the true difference on the null's boundary): paired differences of sd 1.
# Equivalence's margin is wide, so its far one-sided test always rejects and the near one decides alone.
CALIBRATED: tuple[tuple[SequentialTest, dict[str, float], float], ...] = (
    ("superiority", {"effect": 1.0}, 0.0),
    ("non_inferiority", {"margin": 1.0}, -1.0),
    ("equivalence", {"margin": 3.0}, -3.0),
)


def calibrate(studies: int, *, seed: int = 0) -> list[Calibration]:
    """NormLab's sequential tests alone: one comparison, Gaussian paired differences, the true difference
    exactly on the null's boundary and futility off, so only the efficacy boundaries can err. The scenarios'
    futility stops make their FWER conservative and can hide how exact the boundaries themselves are."""
    rng = np.random.default_rng([seed, zlib.crc32(b"calibration")])
    noise = rng.standard_normal((studies, 10))
    out = []
    for test, sizing, truth in CALIBRATED:
        values = np.zeros((studies, 2, noise.shape[1]))
        values[:, 1] = noise + truth
        fixed = run_fixed(values, test=test, alpha=ALPHA, higher_is_better=True, margin=sizing.get("margin"))
        fixed_error = float(fixed.rejected.mean())
        for spending in ("obrien_fleming", "pocock"):
            design = SequentialDesign(
                test=test,
                effect=sizing.get("effect"),
                margin=sizing.get("margin"),
                spending=spending,
                futility=False,
            )
            outcome = run_normlab(values, ["reference", "method"], design, higher_is_better=True)
            error = float(outcome.rejected.mean())
            paired = outcome.rejected[:, 0].astype(float) - fixed.rejected[:, 0].astype(float)
            out.append(
                Calibration(
                    test=test,
                    spending=spending,
                    error=error,
                    error_se=math.sqrt(error * (1.0 - error) / studies),
                    fixed_error=fixed_error,
                    fixed_se=math.sqrt(fixed_error * (1.0 - fixed_error) / studies),
                    studies=studies,
                    excess=float(paired.mean()),
                    excess_se=float(paired.std(ddof=1) / math.sqrt(studies)),
                )
            )
    return out


def calibration_table(rows: Sequence[Calibration]) -> str:
    lines = [
        "| test | spending | type-I error (± MC SE) | fixed design, same data | minus the fixed design's "
        "(paired SE) | studies | <= alpha within MC error | as the exact test within MC error |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        status = "holds" if row.holds else "**no**"
        exact = "holds" if row.matches_exact else "**no**"
        lines.append(
            f"| {row.test} | {row.spending} | {row.error:.4f} ± {row.error_se:.4f} | "
            f"{row.fixed_error:.4f} ± {row.fixed_se:.4f} | {row.excess:+.4f} ± {row.excess_se:.4f} | "
            f"{row.studies:,} | {status} | {exact} |"
        )
    return "\n".join(lines)


# ----- the section ----------------------------------------------------------------------------------------


def _source_line(result: ScenarioResult) -> str:
    spread, model, scenario = result.spread, result.model, result.scenario
    dataset = spread.dataset + (f" (stand-in for {spread.stand_in_for})" if spread.stand_in_for else "")
    pairs = ", ".join(
        f"{m} {spread.paired[m][1]:.4f} ({spread.paired[m][0]} seeds)"
        for m in (a.method for a in scenario.arms)
    )
    effects = "; ".join(f"{a.method} {a.effect:+.4f}: {a.source}" for a in scenario.arms)
    tails = "Student t with 3 df, same sds" if model.tails == "t3" else "Gaussian"
    reference_noise = model.noise_sd[spread.reference]
    if model.seed_sd > 0.0:
        shared = f"of which the shared seed effect {model.seed_sd:.4f}"
        reference = f"the reference's sd {spread.reference_sd:.4f}, {shared}"
    else:
        # The smallest paired spread needs more reference noise than the reference's own sd shows.
        reference = (
            f"the reference's sd {spread.reference_sd:.4f}, modelled as {reference_noise:.4f} with no shared "
            "seed effect (half the smallest paired variance is more than the reference's own)"
        )
    text = (
        f"Spreads from `reports/{spread.report}` ({dataset}, {spread.metric}, reference {spread.reference}, "
        f"study {spread.study_id[:8]}, trained at git {spread.git_revision[:7]}): paired-difference sd "
        f"{pairs}; {reference}. Noise: {tails}. True differences under the effect: {effects}."
    )
    if scenario.test == "equivalence":
        text += (
            f" Margin ±{scenario.margin(spread):.4f} (the claim's check in the report: "
            f"{_margin_origin(spread)}); the null puts every true difference exactly at the margin, on the "
            "worse side."
        )
    else:
        why = (
            "set by the scenario"
            if scenario.design_effect is not None
            else "the smallest of those differences"
        )
        text += f" The design's effect: {result.design.effect:.4f} ({why})."
    return text


def _margin_origin(spread: MeasuredSpread) -> str:
    if spread.check.get("margin") is not None:
        return f"margin {spread.check['margin']}"
    relative = spread.check["relative_margin"]
    return f"relative_margin {relative} x the reference's mean {spread.reference_mean:.4f}"


def scenario_table(result: ScenarioResult) -> str:
    scenario = result.scenario
    powered = [a.method for a in scenario.arms if scenario.test == "equivalence" or a.effect != 0.0]
    partial = any(r.wrong_under_effect is not None for r in result.rows)
    equivalence = scenario.test == "equivalence"
    null = "difference at the margin" if equivalence else "no difference"
    headers = [
        "design",
        f"FWER, {null} (± MC SE)",
        *(f"power: {m}" for m in powered),
        *(["power: all"] if len(powered) > 1 else []),
        *(["wrong rejections under the effect"] if partial else []),
        "seeds under the effect / fixed",
        f"seeds, {null} / fixed",
        "s per 1,000 studies",
        "studies per truth",
    ]
    lines = ["| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1)]
    for row in result.rows:
        mark = " †" if row.kind == "adastop" and equivalence else ""
        cells = [
            row.design + mark,
            _fwer_cell(row),
            *(f"{row.power[m]:.3f}" for m in powered),
            *([f"{row.power_all:.3f}"] if len(powered) > 1 else []),
            *(
                [f"{row.wrong_under_effect:.4f}" if row.wrong_under_effect is not None else "-"]
                if partial
                else []
            ),
            f"{row.trials_effect:.2f}x",
            f"{row.trials_null:.2f}x",
            f"{row.seconds_per_1000:.2f}" if row.seconds_per_1000 < 10 else f"{row.seconds_per_1000:.0f}",
            f"{row.studies:,}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fwer_holds(row: Row) -> bool:
    """At or below alpha within Monte-Carlo error: 1.96 standard errors (a zero count: the rule of three)."""
    return row.fwer <= ALPHA + (1.96 * row.fwer_se if row.fwer > 0 else 0.0)


def _fwer_cell(row: Row) -> str:
    if row.fwer == 0.0:
        # No error seen: the binomial SE is 0, so the 95 % upper bound (3 / studies) says what it is worth.
        return f"0 (95 % upper {min(1.0, 3.0 / row.studies):.4f})"
    return f"{row.fwer:.4f} ± {row.fwer_se:.4f}"


def verdicts(result: ScenarioResult) -> list[str]:
    """What holds and what does not in one scenario, from its rows."""
    out = []
    fixed = next(r for r in result.rows if r.kind == "fixed")
    equivalence = result.scenario.test == "equivalence"
    for row in result.rows:
        if row.kind == "adastop" and equivalence:
            continue  # AdaStop has no equivalence test: nothing of its own to hold it to
        status = "holds" if _fwer_holds(row) else "**does not hold**"
        counted = (
            f", {row.studies:,} stud{'y' if row.studies == 1 else 'ies'}" if row.kind == "adastop" else ""
        )
        line = f"{row.design}: FWER <= {ALPHA} within MC error {status} ({_fwer_cell(row)}{counted})"
        if row.kind != "fixed":
            gaps = ", ".join(f"{m} {row.power[m] - fixed.power[m]:+.3f}" for m in row.power)
            line += f"; power minus the fixed design's: {gaps}"
        if row.kind == "sequential":
            met = "met" if row.trials_effect <= TRIALS_AIM else "**not met**"
            line += f"; seeds under the effect {row.trials_effect:.2f}x (aim <= {TRIALS_AIM}x: {met})"
        out.append(line)
    return out


def _intro(design: SequentialDesign, *, studies: int, adastop_seconds: float) -> str:
    looks = ", ".join(str(n) for n in design.looks())
    shapes = matched_shapes(design)
    same, two = shapes[0], shapes[-1]
    same_looks = ", ".join(str(same.n * (k + 1)) for k in range(same.looks))
    return (
        f"{HEADING}\n\n"
        "Simulated studies of NormLab's sequential seeds (`studies.sequential.looks.SequentialMonitor`, the "
        f"default design: first_seeds {design.first_seeds}, seeds_per_look {design.seeds_per_look}, "
        f"max_seeds {design.max_seeds}, looks at {looks} seeds, alpha {design.alpha}, power {design.power}, "
        "non-binding futility, Holm across comparisons; `effect` is the smallest paper difference among the "
        f"arms), the fixed design (all {design.max_seeds} seeds, a paired t test per comparison, Holm at "
        f"{ALPHA}) and AdaStop ({_adastop_version()}, B = {ADASTOP_PERMUTATIONS:,} permutations, beta 0) on "
        f"the same simulated data: every study draws all {design.max_seeds} seeds of every arm up front, and "
        f"each design reads only the seeds it asks for. Rows marked `power ..., max_seeds ...` are the same "
        "design asked for the fixed design's power (`power` set to the fixed design's strongest powered "
        f"comparison, within {MATCH_POWER_BOUNDS[0]} to {MATCH_POWER_BOUNDS[1]}) with max_seeds raised one "
        f"seed at a time, up to {MATCH_MAX_SEEDS}, until every comparison's power on {MATCH_STUDIES:,} of the "
        f"studies is within {MATCH_TOLERANCE} of the fixed design's; they read up to that many seeds of the "
        f"same draws. {studies:,} studies per scenario and truth for "
        "NormLab and the fixed design; AdaStop, whose permutations run in Python loops, gets up to "
        f"{adastop_seconds:.0f} s per row and scenario, twice that for n={same.n}, K={same.looks} (its study "
        "count is in its row, its MC SE with it)."
        "\n\n"
        "Model: value = mean[method] + b[seed] + e[method, seed], b shared by all methods on a seed, e per "
        "method; the spreads reproduce the cpu report named under each table (each method's "
        "paired-difference sd and the reference's own sd), the true differences are the AutoNorm paper's "
        "(science.md section 4). Seeds are summed over arms (the reference included), as a ratio of the "
        "fixed design's methods x max_seeds. Wall time is the decisions' alone (data drawn once), on this "
        "machine.\n\n"
        "What was matched for AdaStop: its batches are equal (n per arm at each of K looks), so NormLab's "
        f"{design.first_seeds} then +{design.seeds_per_look} cannot be copied. n={same.n}, K={same.looks} "
        f"keeps NormLab's maximum ({design.max_seeds} seeds per arm) and its number of looks, looking at "
        f"{same_looks} seeds instead of {looks}; n={two.n}, K={two.looks} is the same maximum in its "
        "authors' usual two looks. Every row tests the same comparisons (each method against the reference) "
        "at the same family-wise alpha, and an arm trains its next batch only while one of its comparisons "
        "is open. The AdaStop row at alpha/2 is there because AdaStop 0.1.3 compares |T| with the "
        "permutation law of the signed difference (the maximum over comparisons of `mean_diffs`, not of "
        "their absolute values), so its two-sided test runs at about twice the level it is given. Its test "
        "permutes the pooled values and does not pair seeds: a shared seed effect widens its permutation law "
        "and makes it conservative. With n=2 its first two looks have too few permutations (6, then 36) to "
        "reject at the level spent by then, except on an exact tie that rounding decides: at the second look "
        "the observed statistic, summed in another order than the permuted ones, can land a hair above the "
        "largest of them. With beta 0 it never stops without a rejection.\n"
    )


def section(
    results: Sequence[ScenarioResult],
    *,
    studies: int,
    adastop_seconds: float,
    calibration: Sequence[Calibration] = (),
) -> str:
    design = results[0].design if results else SequentialDesign(effect=0.01)
    parts = [_intro(design, studies=studies, adastop_seconds=adastop_seconds)]
    for result in results:
        scenario = result.scenario
        comparisons = len(scenario.arms)
        tails = ", t3 noise" if scenario.tails == "t3" else ""
        plural = "s" if comparisons > 1 else ""
        parts.append(
            f"\n### {scenario.name}: {scenario.test}, {comparisons} comparison{plural} with "
            f"{result.spread.reference}{tails}\n\n{_source_line(result)}\n\n{scenario_table(result)}\n"
        )
        if scenario.test == "equivalence" and any(r.kind == "adastop" for r in result.rows):
            parts.append(
                '\n† AdaStop has no equivalence test: its columns give how often it ended with "equal" '
                "(no difference shown by its last look), which a reader might take for equivalence; under "
                "the null that reading is wrong as often as the FWER column says.\n"
            )
        if result.adastop_note:
            parts.append(f"\n{result.adastop_note}\n")
        parts.append("\n" + "\n".join(f"- {line}" for line in verdicts(result)) + "\n")
    if calibration:
        parts.append(
            "\n### NormLab's sequential tests alone\n\n"
            "One comparison, Gaussian paired differences (sd 1), the true difference exactly on the "
            "null's boundary (superiority: 0; non-inferiority: minus the margin of 1 sd; equivalence: minus "
            "a margin of 3 sd, so that only its near one-sided test can err), futility off, the default "
            "looks: only the efficacy boundaries can reject. The scenarios' futility stops make their FWER "
            "conservative and so hide whether the boundaries alone keep alpha; the fixed design's paired t "
            f"test on the same data is exact.\n\n{calibration_table(calibration)}\n"
        )
    parts.append("\n### What holds and what does not\n\n" + reading(results, calibration))
    return "".join(parts)


def reading(results: Sequence[ScenarioResult], calibration: Sequence[Calibration] = ()) -> str:
    """The section's conclusions across scenarios, from the rows (and, for why, from how the designs work)."""
    lines = []
    if calibration:
        low, high = min(c.error for c in calibration), max(c.error for c in calibration)
        above = [
            f"{c.test} {c.spending} {c.error:.4f} ± {c.error_se:.4f}" for c in calibration if not c.holds
        ]
        inexact = [
            f"{c.test} {c.spending} {c.excess:+.4f} ± {c.excess_se:.4f}"
            for c in calibration
            if not c.matches_exact
        ]
        lines.append(
            f"NormLab's sequential tests alone (no futility): type-I error {low:.4f} to {high:.4f} at "
            f"nominal {ALPHA} over {calibration[0].studies:,} studies each"
            + (
                "; within MC error everywhere"
                if not above
                else f"; **above alpha** beyond MC error: {'; '.join(above)}"
            )
            + "; against the exact fixed paired t test on the same draws: "
            + (
                "within MC error of it everywhere (an excess over alpha that the exact test shares on the "
                "same draws is the draws' luck, not the boundaries')"
                if not inexact
                else f"**above it** beyond MC error: {'; '.join(inexact)}"
            )
            + "."
        )
    for label in ("NormLab, O'Brien-Fleming", "NormLab, Pocock"):
        rows = [(r.scenario.name, row) for r in results for row in r.rows if row.design == label]
        if not rows:
            continue
        fwer_failed = [f"{name} {_fwer_cell(row)}" for name, row in rows if not _fwer_holds(row)]
        worst = max(rows, key=lambda item: item[1].fwer)
        lines.append(
            f"{label}, FWER: "
            + (
                f"at or below {ALPHA} within MC error in every scenario (highest {worst[0]}, "
                f"{_fwer_cell(worst[1])})"
                if not fwer_failed
                else "**above alpha** in " + "; ".join(fwer_failed)
            )
            + "."
        )
        aim = [f"{name} {row.trials_effect:.2f}x" for name, row in rows]
        missed = [f"{name} {row.trials_effect:.2f}x" for name, row in rows if row.trials_effect > TRIALS_AIM]
        lines.append(
            f"{label}, seeds under the effect against the fixed design: {', '.join(aim)}; the aim of "
            f"{TRIALS_AIM}x is "
            + ("met everywhere" if not missed else f"**not met** in {', '.join(missed)}")
            + "."
        )
        gaps = []
        for result in results:
            fixed = next(row for row in result.rows if row.kind == "fixed")
            mine = next(row for row in result.rows if row.design == label)
            gaps += [(mine.power[m] - fixed.power[m], result.scenario.name, m) for m in mine.power]
        gap, name, method = min(gaps)
        lines.append(
            f"{label}, power against the fixed design: "
            + (
                f"never more than 0.01 below it (largest shortfall {gap:+.3f}, {name} {method})"
                if gap >= -0.01
                else f"**below it** by up to {-gap:.3f} ({name}, {method}); "
                + ", ".join(f"{n} {m} {g:+.3f}" for g, n, m in sorted(gaps) if g < -0.01)
            )
            + "."
        )
    matched = [(r.scenario.name, row) for r in results for row in r.rows if "max_seeds" in row.design]
    if matched:
        lines.append(
            "Asked for the fixed design's power (`power` set to it, max_seeds raised until every comparison "
            "reaches it): "
            + "; ".join(
                f"{name}, {row.design.removeprefix('NormLab, ')}: {row.trials_effect:.2f}x the fixed "
                f"design's seeds under the effect, {row.trials_null:.2f}x under the null"
                for name, row in matched
            )
            + ". Where the fixed design's own power is near its limit (0.75 to 0.9), matching it takes as "
            "many seeds as the fixed design or more: a sequential design saves seeds where a comparison is "
            "decided early, not where every seed is needed."
        )
    adastop = [
        (r.scenario.name, row)
        for r in results
        if r.scenario.test == "superiority"
        for row in r.rows
        if row.kind == "adastop"
    ]
    over = [f"{row.design} in {name} ({_fwer_cell(row)})" for name, row in adastop if not _fwer_holds(row)]
    if adastop:
        lines.append(
            "AdaStop, FWER: "
            + (
                "within alpha in every superiority scenario"
                if not over
                else "**above alpha**: " + "; ".join(over)
            )
            + "."
        )
    halved = [(name, row) for name, row in adastop if "alpha" in row.design and not _fwer_holds(row)]
    if halved:
        lines.append(
            "AdaStop at alpha/2 still errs above alpha in "
            + ", ".join(f"{name} ({_fwer_cell(row)})" for name, row in halved)
            + ": halving its level removes much of its excess, not all of it; what is left is not explained "
            "by the |T| comparison and is not analysed here."
        )
    for label in dict.fromkeys(row.design for _, row in adastop):
        mine = [(name, row) for name, row in adastop if row.design == label]
        gaps = []
        for name, row in mine:
            rows = next(r for r in results if r.scenario.name == name).rows
            fixed = next(r for r in rows if r.kind == "fixed")
            gaps += [f"{name} {m} {row.power[m] - fixed.power[m]:+.3f}" for m in row.power]
        seeds = ", ".join(f"{name} {row.trials_effect:.2f}x" for name, row in mine)
        lines.append(
            f"{label} (superiority): power minus the fixed design's {', '.join(gaps)}; seeds under the "
            f"effect {seeds}."
        )
    for result in results:
        if result.scenario.design_effect is None:
            continue
        base = next(
            (
                r
                for r in results
                if r.scenario.design_effect is None
                and (r.scenario.report, r.scenario.tails) == (result.scenario.report, result.scenario.tails)
            ),
            None,
        )
        if base is None:
            continue
        for label in ("NormLab, O'Brien-Fleming", "NormLab, Pocock"):
            sized = next(row for row in result.rows if row.design == label)
            smallest = next(row for row in base.rows if row.design == label)
            changes = ", ".join(f"{m} {smallest.power[m]:.3f} -> {sized.power[m]:.3f}" for m in sized.power)
            lines.append(
                f"{label}, `effect` {result.design.effect} instead of {base.design.effect} "
                f"({result.scenario.name} against {base.scenario.name}, the same studies): power {changes}; "
                f"seeds under the effect {smallest.trials_effect:.2f}x -> {sized.trials_effect:.2f}x."
            )
    why = (
        "Why the sequential designs can fall short of the fixed design's power: they spend part of alpha "
        "at the earlier looks, so the last look's boundary lies above the fixed test's critical value (a "
        "little for O'Brien-Fleming, more for Pocock); the first looks have 2 to 8 degrees of freedom, where "
        "a t statistic must be far larger than a z to reach the same tail probability; and the non-binding "
        "futility bound stops a comparison whose data reject a true difference of `effect`, which costs up "
        "to 1 - power (20 %) of the power against a true difference equal to `effect`. In return, a "
        "comparison decided early stops training, and an arm with no difference is usually stopped for "
        "futility well before max_seeds. The futility bound uses the look's own standard error, so a "
        "comparison measured precisely is stopped as soon as its data reject `effect`, even with an "
        "estimate far from 0 (its bound can lie above the efficacy bound, leaving no room to go on): an arm "
        "whose true gain is real but below `effect` is stopped for futility, hence `effect` here is the "
        "smallest paper difference, and the large-effect line above shows the cost of a larger one.\n\n"
        f"Why the {TRIALS_AIM}x aim is met in some scenarios only: where the paper's difference is large "
        "against the spread (the fixed design's power near 1) the comparisons stop at the first looks; where "
        "the fixed design's own power is about 0.75 to 0.85, most studies keep some comparison, and with it "
        "the reference, open into the last looks, and every arm trains at least the first look's seeds.\n"
    )
    return "\n".join(f"- {line}" for line in lines) + "\n\n" + why


def _adastop_version() -> str:
    if not adastop_available():
        return "not installed"
    from importlib.metadata import version

    return f"adastop {version('adastop')}"


# ----- BENCHMARKS.md --------------------------------------------------------------------------------------


def replace_section(document: str, new_section: str, *, before: str) -> str:
    """`document` with this benchmark's section replaced by `new_section`, or inserted before the line
    `before` (where `make bench` puts it: after the benchmarks it runs, before the sections it keeps)."""
    start = document.find(HEADING)
    if start >= 0:
        end = document.find("\n## ", start + len(HEADING))
        end = len(document) if end < 0 else end + 1
        return document[:start] + new_section + "\n" + document[end:]
    at = document.find(before)
    if at < 0:
        raise ValueError(f"{before!r} is not in the document")
    return document[:at] + new_section + "\n" + document[at:]


def run(
    quick: bool = False,
    *,
    studies: int | None = None,
    adastop_seconds: float | None = None,
    names: Sequence[str] | None = None,
) -> str:
    """The markdown section (what `benchmarks.run_all` collects)."""
    studies = studies or (QUICK_STUDIES if quick else STUDIES)
    seconds = (
        adastop_seconds if adastop_seconds is not None else (QUICK_SECONDS if quick else ADASTOP_SECONDS)
    )
    chosen = [s for s in SCENARIOS if not names or s.name in names]
    results = []
    for scenario in chosen:
        started = time.perf_counter()
        results.append(
            evaluate(
                scenario,
                studies=studies,
                adastop_seconds=seconds,
                progress=lambda text: print(f"  {text}", file=sys.stderr, flush=True),
            )
        )
        print(f"  {scenario.name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    print(f"  the tests alone: {CALIBRATION_FACTOR * studies} studies each", file=sys.stderr, flush=True)
    calibration = calibrate(CALIBRATION_FACTOR * studies)
    return section(results, studies=studies, adastop_seconds=seconds, calibration=calibration)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--studies", type=int, default=STUDIES, help="simulated studies per scenario and truth"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_STUDIES} studies, {QUICK_SECONDS:.0f} s of AdaStop per row",
    )
    parser.add_argument(
        "--adastop-seconds", type=float, default=None, help="AdaStop's wall time per row and scenario"
    )
    parser.add_argument("--scenario", nargs="*", default=None, choices=[s.name for s in SCENARIOS])
    parser.add_argument(
        "--into",
        type=Path,
        default=None,
        help="replace this benchmark's section of that file (e.g. BENCHMARKS.md) instead of only printing it",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    text = run(
        args.quick,
        studies=None if args.quick and args.studies == STUDIES else args.studies,
        adastop_seconds=args.adastop_seconds,
        names=args.scenario,
    )
    text = text.rstrip() + f"\n\n_(took {time.perf_counter() - started:.0f} s)_\n"
    print(text)
    if args.into is not None:
        kept = Path(__file__).with_name("recorded.md").read_text(encoding="utf-8").splitlines()[0]
        args.into.write_text(replace_section(args.into.read_text(encoding="utf-8"), text, before=kept))
        print(f"wrote {args.into}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
