"""A study's looks: after each batch of seeds, decide every open comparison with the reference, and say
which arms train the next batch.

Besides each method with the reference, the design's extra `pairs` ([method, against]) are comparisons
of their own, named "method vs against"; both arms of an open comparison train the next look.

`SequentialMonitor(design, methods=, reference=, higher_is_better=)` holds a study's sequential state as
plain data (the driver pickles it with its Tune searcher, and every look is also stored). `look(values)`
takes every seed's final metric so far ({method: {seed: value}}) and returns a `LookRecord`: for every
comparison its paired seeds, estimate, statistic, the boundaries it was compared with, the level it was
tested at, and its decision. `open_arms()` names the methods that train the next look's seeds (the
reference trains while any comparison is open). The simulation benchmark drives the same class.

The statistic of each comparison is a paired t over the seeds both arms have (d_s = method - reference,
turned so that a positive d is an improvement in the metric's direction), compared with boundaries
calibrated on the paired t process at the seed counts reached (`studies.sequential.paired_t`), so the
error holds with two or three seeds at a look. Looks are stored and drawn on the z scale (the statistic
and its boundary both matched by tail probability, `z_from_t`), where the decisions read the same:

- superiority: two-sided, Z = mean / se, efficacy when |Z| >= c_k;
- non_inferiority: one-sided, Z = (mean + margin) / se;
- equivalence: two one-sided tests at the level (intersection-union), Z = min((mean + margin) / se,
  (margin - mean) / se), shown when Z >= c_k; stopped as not equivalent when the look's repeated interval
  lies wholly outside +-margin (|mean| - margin >= c_k se).

Futility (superiority and non_inferiority, non-binding, never at the last look): a superiority comparison
stops when the look rejects a true difference of `effect` (either sign), a non-inferiority comparison when
it shows the method worse than the reference by more than the margin, each one-sided at the level that
1 - power spends by then (`_futility_bound`). Futility and not-equivalent stops never raise the type-I
error: the efficacy boundaries are computed as if they never happened.

Family-wise error: Holm's step-down across comparisons (`studies.sequential.multiplicity`). Before each
decision every still-open comparison is tested at alpha / (m - r), r the comparisons already rejected
(efficacy, non-inferiority or equivalence shown), with boundaries recomputed at that level over all its
looks, until no further comparison is rejected. Futility stops keep their share.

After a stop the numbers that account for the looks (`ComparisonOutcome`): the repeated confidence
interval (valid over every look, so whenever the study stopped) and the stage-wise-ordering p-value at the
look where the comparison stopped, both at the level the comparison was tested at, so they agree with its
decision.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from studies.sequential.inference import z_from_t
from studies.sequential.multiplicity import holm_level
from studies.sequential.paired_t import PairedTDesign, paired_t_design
from studies.spec.sections import SequentialDesign

__all__ = [
    "DECISIONS",
    "ComparisonOutcome",
    "ComparisonState",
    "LookPoint",
    "LookRecord",
    "SequentialMonitor",
    "comparison_name",
]

# Where a comparison stands after a look. `open` goes on; every other value is final.
Decision = Literal[
    "open",
    "efficacy",  # superiority: the method differs from the reference (the sign of the estimate says how)
    "non_inferior",  # non_inferiority shown
    "equivalent",  # equivalence shown
    "futility",  # cannot reach its goal at the design's power (superiority, non_inferiority)
    "not_equivalent",  # the repeated interval lies wholly outside +-margin
    "max_seeds",  # the last look came without a decision
    "too_few_seeds",  # fewer than two paired seeds at the last look (failed trials)
]
DECISIONS: dict[str, str] = {
    "open": "open: more seeds",
    "efficacy": "stopped: differs from the reference",
    "non_inferior": "stopped: non-inferiority shown",
    "equivalent": "stopped: equivalence shown",
    "futility": "stopped for futility: cannot reach the effect of interest at the design's power",
    "not_equivalent": "stopped: not equivalent (the repeated interval lies outside the margin)",
    "max_seeds": "undecided at the maximum seeds",
    "too_few_seeds": "undecided: fewer than two paired seeds",
}
_REJECTIONS = frozenset({"efficacy", "non_inferior", "equivalent"})


@dataclass(frozen=True)
class LookPoint:
    """One comparison at one look."""

    look: int  # the study's look, 1 = first
    seeds: int  # paired seeds (both arms have a finite value)
    fraction: float  # seeds / max_seeds: the spending function's time
    estimate: float  # mean paired difference, positive = the method is better in the metric's direction
    sd: float  # seed-to-seed standard deviation of the paired differences
    standard_error: float
    z: float  # the test's statistic on the z scale (see the module docstring)
    level: float  # the alpha this comparison was tested at (Holm)
    efficacy: float  # the look's efficacy boundary (z scale) at that level
    futility: float | None  # the look's futility boundary (z scale); None where the design has none
    decision: str


@dataclass
class ComparisonState:
    method: str
    reference: str  # the study's reference, or the other method of one of the design's extra pairs
    points: list[LookPoint] = field(default_factory=list)
    decision: str = "open"

    @property
    def is_open(self) -> bool:
        return self.decision == "open"

    @property
    def rejected(self) -> bool:
        return self.decision in _REJECTIONS


@dataclass(frozen=True)
class LookRecord:
    """What one look saw and decided: stored, logged to MLflow, shown on the study page."""

    look: int  # 1 = first
    seeds_per_arm: dict[str, int]  # seeds with a value per method, reference included
    comparisons: dict[str, LookPoint]  # method -> its point at this look (only comparisons open before it)
    decisions: dict[str, str]  # method -> where every comparison stands after this look
    open_arms: list[str]  # methods that train the next look's seeds ([] once the study is decided)
    final: bool  # the design's last look (or nothing left open)

    def to_json(self) -> dict[str, Any]:
        return {
            "look": self.look,
            "seeds_per_arm": dict(self.seeds_per_arm),
            "comparisons": {m: asdict(p) for m, p in self.comparisons.items()},
            "decisions": dict(self.decisions),
            "open_arms": list(self.open_arms),
            "final": self.final,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LookRecord:
        return cls(
            look=int(data["look"]),
            seeds_per_arm={str(m): int(n) for m, n in data["seeds_per_arm"].items()},
            comparisons={str(m): LookPoint(**p) for m, p in data["comparisons"].items()},
            decisions={str(m): str(d) for m, d in data["decisions"].items()},
            open_arms=[str(m) for m in data["open_arms"]],
            final=bool(data["final"]),
        )


@dataclass(frozen=True)
class ComparisonOutcome:
    """A comparison's numbers once it stopped, accounting for the looks."""

    method: str
    decision: str
    stopped_at_look: int
    seeds: int
    estimate: float
    interval: tuple[float, float]  # repeated confidence interval at the level it was tested at (Holm)
    interval_level: (
        float  # its coverage: 1 - level (two-sided) or 1 - 2 level (one-sided); NaN without a point
    )
    p_value: float | None  # stage-wise ordering at its stop; None while open or without a point
    reference: str = ""  # what `method` was compared with ("" when it is the study's reference)


def comparison_name(method: str, against: str) -> str:
    """The name of one of the design's extra pairs, as looks, outcomes and claims key it."""
    return f"{method} vs {against}"


def _design(seeds: tuple[int, ...], max_seeds: int, level: float, sided: int, spending: str) -> PairedTDesign:
    return paired_t_design(seeds, max_seeds=max_seeds, level=level, sided=sided, spending=spending)  # type: ignore[arg-type]


class SequentialMonitor:
    """A study's comparisons through its looks (see the module docstring)."""

    def __init__(
        self, design: SequentialDesign, *, methods: list[str], reference: str | None, higher_is_better: bool
    ) -> None:
        """`methods`: the arms (a grid study's are its points); `reference`: the arm every other is compared
        with, None where the design's pairs are the only comparisons (a grid)."""
        if reference is not None and reference not in methods:
            raise ValueError(f"the reference {reference!r} is not one of the methods {methods}")
        if len(methods) < 2:
            raise ValueError("a sequential study compares at least two methods")
        self.design = design
        self.methods = list(methods)
        self.reference = reference
        self.higher_is_better = higher_is_better
        # Keyed by the comparison's name: the method for a comparison with the reference, "a vs b" for
        # one of the design's extra pairs (studies.sequential.comparison_name).
        self.comparisons = (
            {m: ComparisonState(m, reference) for m in methods if m != reference}
            if reference is not None
            else {}
        )
        for method, against in design.pairs:
            if method not in methods or against not in methods or method == against:
                raise ValueError(f"pair [{method}, {against}] must name two different methods of {methods}")
            self.comparisons[comparison_name(method, against)] = ComparisonState(method, against)
        if not self.comparisons:
            raise ValueError(
                "a sequential study without a reference compares the pairs of its design: none given"
            )
        self.records: list[LookRecord] = []

    # -- what the driver asks -------------------------------------------------------------------------------

    @property
    def looks_taken(self) -> int:
        return len(self.records)

    @property
    def decided(self) -> bool:
        return not any(c.is_open for c in self.comparisons.values())

    def open_arms(self) -> list[str]:
        """The methods that train the next look's seeds, in the study's order: both arms of every open
        comparison (so the reference while one of its comparisons is open); [] once all is decided."""
        arms = {arm for c in self.comparisons.values() if c.is_open for arm in (c.method, c.reference)}
        if not arms or self.looks_taken >= len(self.design.looks()):
            return []
        return [m for m in self.methods if m in arms]

    def next_seeds(self) -> list[int]:
        """The seeds each open arm trains next ([] when the study is decided or at its last look)."""
        if not self.open_arms():
            return []
        return self.design.seeds_added_at(self.looks_taken)

    # -- one look ---------------------------------------------------------------------------------------

    def look(self, values: dict[str, dict[int, float]]) -> LookRecord:
        """Analyse the look that the seeds in `values` complete (every seed of every arm so far; a failed
        seed is simply absent) and decide every open comparison."""
        look = self.looks_taken + 1
        was_open = [m for m, c in self.comparisons.items() if c.is_open]
        self._decide(
            look,
            {m: self._paired(values, self.comparisons[m]) for m in was_open},
            final=look >= len(self.design.looks()),
        )
        points = {m: self.comparisons[m].points[-1] for m in was_open if self.comparisons[m].points}
        record = LookRecord(
            look=look,
            seeds_per_arm={
                m: sum(1 for v in values.get(m, {}).values() if math.isfinite(v)) for m in self.methods
            },
            comparisons={m: p for m, p in points.items() if p.look == look},
            decisions={m: c.decision for m, c in self.comparisons.items()},
            open_arms=[],
            final=True,
        )
        self.records.append(record)  # counted as taken before open_arms reads looks_taken
        arms = self.open_arms()
        self.records[-1] = LookRecord(**{**record.__dict__, "open_arms": arms, "final": not arms})
        return self.records[-1]

    def _paired(
        self, values: dict[str, dict[int, float]], state: ComparisonState
    ) -> tuple[int, float, float] | None:
        """(paired seeds, mean improvement, sd) of a comparison, None with fewer than two paired seeds."""
        mine, theirs = values.get(state.method, {}), values.get(state.reference, {})
        sign = 1.0 if self.higher_is_better else -1.0
        differences = [
            sign * (mine[s] - theirs[s])
            for s in sorted(set(mine) & set(theirs))
            if math.isfinite(mine[s]) and math.isfinite(theirs[s])
        ]
        n = len(differences)
        if n < 2:
            return None
        mean = sum(differences) / n
        sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
        return n, mean, sd

    def _statistic(self, mean: float, se: float) -> float:
        """The comparison's t statistic (see the module docstring); +-inf where the seeds agree exactly."""
        design = self.design
        if design.test == "superiority":
            numerator = mean
        elif design.test == "non_inferiority":
            numerator = mean + float(design.margin or 0.0)
        else:
            margin = float(design.margin or 0.0)
            numerator = min(mean + margin, margin - mean)
        if se > 0.0:
            return numerator / se
        return 0.0 if numerator == 0.0 else math.copysign(math.inf, numerator)

    def _decide(
        self, look: int, summaries: dict[str, tuple[int, float, float] | None], *, final: bool
    ) -> None:
        design = self.design
        m = len(self.comparisons)
        # This look's point of every open comparison, first at Bonferroni's level; Holm's step-down below
        # raises the level of those still open as others are rejected.
        pending: dict[str, tuple[int, float, float]] = {}
        for method, summary in summaries.items():
            state = self.comparisons[method]
            if summary is None or (state.points and summary[0] <= state.points[-1].seeds):
                # Nothing new to test: fewer than two paired seeds, or no new paired seed since the last
                # point (every trial of the batch failed). The comparison waits for the next look.
                if final:
                    state.decision = "too_few_seeds" if summary is None else "max_seeds"
                continue
            pending[method] = summary
        rejected = sum(1 for c in self.comparisons.values() if c.rejected)
        points: dict[str, LookPoint] = {}
        while True:
            level = holm_level(design.alpha, m, min(rejected, m - 1))
            newly = 0
            for method, (n, mean, sd) in pending.items():
                if method in points and points[method].decision in _REJECTIONS:
                    continue
                point = self._point(method, look, n, mean, sd, level)
                points[method] = point
                if point.decision in _REJECTIONS:
                    newly += 1
            # Holm also re-tests open comparisons' earlier looks at the raised level: a crossing there
            # counts as a rejection now.
            if newly == 0:
                break
            rejected += newly
        for method, point in points.items():
            decision = point.decision
            if decision == "open" and final:
                decision = "max_seeds"
                point = LookPoint(**{**asdict(point), "decision": decision})
            state = self.comparisons[method]
            state.points.append(point)
            state.decision = decision

    def _point(self, method: str, look: int, n: int, mean: float, sd: float, level: float) -> LookPoint:
        design = self.design
        state = self.comparisons[method]
        se = sd / math.sqrt(n)
        t = self._statistic(mean, se)
        z = z_from_t(t, n - 1) if math.isfinite(t) else t
        seeds = (*tuple(p.seeds for p in state.points), n)
        earlier_z = [p.z for p in state.points]
        sided = 2 if design.test == "superiority" else 1
        boundaries = _design(seeds, design.max_seeds, level, sided, design.spending)
        crossed_earlier = any(
            (abs(z_k) if sided == 2 else z_k) >= c
            for z_k, c in zip(earlier_z, boundaries.efficacy_z, strict=False)
        )
        efficacy = boundaries.efficacy_z[-1]
        fraction = boundaries.fractions[-1]
        futility = self._futility_bound(seeds, se) if fraction < 1.0 else None
        if futility is not None:
            # Bounds that cross leave no room to go on: below the efficacy bound is then a futility stop, so
            # the futility bound is drawn and stored at the efficacy bound (the decisions are the same).
            futility = min(futility, efficacy)
        statistic = abs(z) if sided == 2 else z
        if statistic >= efficacy or crossed_earlier:
            decision = {"superiority": "efficacy", "non_inferiority": "non_inferior"}.get(
                design.test, "equivalent"
            )
        elif design.test == "equivalence" and self._outside_margin(mean, se, boundaries):
            decision = "not_equivalent"
        elif futility is not None and statistic <= futility:
            decision = "futility"
        else:
            decision = "open"
        return LookPoint(
            look=look, seeds=n, fraction=fraction, estimate=mean, sd=sd, standard_error=se, z=z,
            level=level, efficacy=efficacy, futility=futility, decision=decision,
        )  # fmt: skip

    def _futility_bound(self, seeds: tuple[int, ...], se: float) -> float | None:
        """The look's non-binding futility bound on the statistic's z scale, None without one.

        Superiority stops when the look rejects a true difference of `effect` (either sign); non_inferiority
        when it shows the method worse by more than the margin (its own statistic far below 0). Each is
        one-sided, with 1 - power spent over the looks by the design's spending function, on the same
        calibrated paired-t law as the efficacy bounds (under the difference tested the statistic is a
        central t process). For superiority P(a futility stop | the effect) is at most 1 - power;
        for non_inferiority a stop needs the method beyond the margin, which a level method almost never is.
        """
        design = self.design
        if not design.futility or design.test == "equivalence" or se <= 0.0:
            return None
        df = seeds[-1] - 1
        bound_t = _design(seeds, design.max_seeds, 1.0 - design.power, 1, design.spending).efficacy_t[-1]
        if not math.isfinite(bound_t):
            return None
        if design.test == "non_inferiority":
            return -z_from_t(bound_t, df)  # (mean + margin) / se <= -bound: worse than the margin
        # (|mean| - effect) / se <= -bound, i.e. |mean| / se <= effect / se - bound.
        return z_from_t(float(design.effect or 0.0) / se - bound_t, df)

    def _outside_margin(self, mean: float, se: float, boundaries: PairedTDesign) -> bool:
        low, high = boundaries.interval(mean, se, boundaries.looks)
        margin = float(self.design.margin or 0.0)
        return low >= margin or high <= -margin

    # -- after the study --------------------------------------------------------------------------------

    def outcomes(self) -> list[ComparisonOutcome]:
        """Every comparison's numbers at its last point: where it stopped, or where it stands while open.

        The repeated confidence interval and the stage-wise p-value use the design the comparison was last
        tested with (its Holm level, at its own information fractions), so they agree with its decision:
        the interval excludes no difference (superiority) exactly when the looks decided one, and p is at
        most the level exactly then. Each interval covers with 1 - level over every look; across the
        comparisons, Holm's procedure controls the family-wise error of the decisions. The p-value is
        defined where a comparison stopped: None while it is open.
        """
        design = self.design
        sided = 2 if design.test == "superiority" else 1
        outcomes = []
        for method, state in self.comparisons.items():
            if not state.points:
                outcomes.append(
                    ComparisonOutcome(
                        method,
                        state.decision,
                        0,
                        0,
                        math.nan,
                        (-math.inf, math.inf),
                        math.nan,
                        None,
                        reference=state.reference,
                    )
                )
                continue
            last = state.points[-1]
            seeds = tuple(p.seeds for p in state.points)
            boundaries = _design(seeds, design.max_seeds, last.level, sided, design.spending)
            interval = boundaries.interval(last.estimate, last.standard_error, len(seeds))
            outcomes.append(
                ComparisonOutcome(
                    method=method,
                    decision=state.decision,
                    stopped_at_look=last.look,
                    seeds=last.seeds,
                    estimate=last.estimate,
                    interval=interval,
                    interval_level=1.0 - last.level if sided == 2 else 1.0 - 2.0 * last.level,
                    p_value=None if state.is_open else self._p_value(last, boundaries),
                    reference=state.reference,
                )
            )
        return outcomes

    def _p_value(self, last: LookPoint, boundaries: PairedTDesign) -> float | None:
        if last.standard_error <= 0.0:
            return None
        look = boundaries.looks
        if self.design.test == "equivalence":
            margin = float(self.design.margin or 0.0)
            tails = [
                (last.estimate + margin) / last.standard_error,
                (margin - last.estimate) / last.standard_error,
            ]
            return max(boundaries.stagewise_p(t, look) for t in tails)
        return boundaries.stagewise_p(self._statistic(last.estimate, last.standard_error), look)

    # -- persistence ------------------------------------------------------------------------------------

    @classmethod
    def replay(
        cls,
        design: SequentialDesign,
        records: list[LookRecord],
        *,
        methods: list[str],
        reference: str | None,
        higher_is_better: bool,
    ) -> SequentialMonitor:
        """The monitor as it stood after `records` (stored looks, in order): what the API and reports read."""
        monitor = cls(design, methods=methods, reference=reference, higher_is_better=higher_is_better)
        for record in sorted(records, key=lambda r: r.look):
            for method, point in record.comparisons.items():
                monitor.comparisons[method].points.append(point)
            for method, decision in record.decisions.items():
                monitor.comparisons[method].decision = decision
            monitor.records.append(record)
        return monitor

    def to_json(self) -> dict[str, Any]:
        return {
            "design": self.design.model_dump(mode="json"),
            "reference": self.reference,
            "methods": list(self.methods),
            "higher_is_better": self.higher_is_better,
            "looks": [r.to_json() for r in self.records],
            "outcomes": [asdict(o) for o in self.outcomes()],
        }
