"""What a trial asks of its Ray Tune session: its reserved resources, the checkpoint to resume from, and
where its reports go. Torch-free, so that a Tune trial that only relays a warm trial host's reports
(workers.trials.relay) stays a light process."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["report_to_tune", "restored_checkpoint", "trial_resources"]


def trial_resources() -> dict[str, float]:
    """The trial's reserved resources ({"CPU": 2, "GPU": 0.5}); empty outside a Tune session."""
    from ray import tune

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Tune warns (and returns None) when called outside a trial
        resources = tune.get_context().get_trial_resources()
    return dict(resources.required_resources) if resources is not None else {}


@contextmanager
def restored_checkpoint() -> Iterator[Path | None]:
    """The directory of the checkpoint Tune restored this trial from (a retried or resumed trial), kept
    readable until the block ends; None for a trial that starts afresh."""
    from ray import tune

    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        yield None
        return
    with checkpoint.as_directory() as directory:
        yield Path(directory)


def report_to_tune(metrics: dict[str, Any], checkpoint_dir: Path | None) -> None:
    """One epoch's report, with that epoch's checkpoint directory (copied into Tune's storage before this
    returns); raises SystemExit when Tune stops the trial."""
    from ray import tune

    checkpoint = tune.Checkpoint.from_directory(str(checkpoint_dir)) if checkpoint_dir is not None else None
    tune.report(dict(metrics), checkpoint=checkpoint)
