"""How a trial that stops by SystemExit closes its MLflow runs. Torch-free: the warm trial host raises
TrialGone, and light processes import this module with it.

A trial's `send`/`settle` (workers.trials.trainable.run_trial) raise SystemExit to stop it: code 0 when Tune stopped
it (ASHA, stop criteria: the run FINISHED), TrialGone when nobody is left to train it for (its Tune trial
died with a killed driver, or its study was cancelled: the run KILLED, MLflow's status for a run whose
process was stopped from outside, as the README promises for a trial lost with its driver), any other code
a failure (FAILED).
"""

from __future__ import annotations

__all__ = ["TrialGone", "closing_status"]


class TrialGone(SystemExit):
    """The Tune trial a warm trial host was training for is gone; the host stops the trial."""


def closing_status(stop: SystemExit) -> str:
    """The MLflow status the runs of a trial stopped by `stop` close with."""
    if isinstance(stop, TrialGone):
        return "KILLED"
    return "FAILED" if stop.code else "FINISHED"
