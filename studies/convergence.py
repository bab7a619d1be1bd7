"""A convergence level: what a study's reference must reach before its comparisons count as evidence.

Its own module (pure pydantic) so the spec can carry one without importing the claim checks (scipy).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Convergence"]


class Convergence(BaseModel):
    """The level the reference must reach on the study's metric before any verdict, and its source."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    at_least: float | None = None  # for metrics where higher is better (accuracy)
    at_most: float | None = None  # for errors (RMSE, perplexity)
    source: str = Field(min_length=1)  # where the level comes from: a paper, a baseline, NormLab's choice
    metric: str | None = None  # None: the study's primary test metric
    method: str | None = None  # None: the study's reference method

    @model_validator(mode="after")
    def _one_bound(self) -> Convergence:
        if (self.at_least is None) == (self.at_most is None):
            raise ValueError("give exactly one of at_least or at_most")
        return self

    @property
    def level_text(self) -> str:
        return f">= {self.at_least:.4g}" if self.at_least is not None else f"<= {self.at_most:.4g}"

    def met_by(self, value: float) -> bool:
        if self.at_least is not None:
            return value >= self.at_least
        assert self.at_most is not None
        return value <= self.at_most
