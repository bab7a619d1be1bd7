"""The trial config contract: every key of the dict that a study's driver hands Ray Tune for each trial.

One dict per trial travels from the study driver (workers.driver.trial_configs builds every one from the
StudySpec) through Tune to the trial process (workers.trials.entry names the trial, .trainable trains it),
to its training run (workers.training.config.TrainConfig, the typed view of the training part) and to its
MLflow run (workers.tracking). The recorder stores its scientific part as the trial row's config
(studies.store), which the results, the evidence and the API read. Every key is named here and nowhere
else; plain Python (no pydantic, no torch), since the driver, the trial processes and the API all read it.

A trial config holds:
- the training part: TrainConfig's fields, by their names (`TrainConfig.from_trial_config` refuses a key
  that is neither a field nor an ORCHESTRATION_KEYS one); `Key` names those the driver writes or reads;
- what the trial is: study, phase, method, knobs, seed(s), and the trial keys its process derives;
- wiring: where the trial reports (MLflow, the node's spool) and how often it checkpoints;
- driver bookkeeping (DRIVER_ONLY_KEYS), which the trial process drops before it trains.

How `resources.seeds_per_trial` changes form on its way through a trial:
1. workers.trials.plan resolves it to a number k and cuts the study's seeds into batches of at most k;
2. a final or grid trial of a batch carries the batch under SEEDS and its first seed under SEED
   (`seed_fields`; a batch of one seed carries SEED alone, as every trial did before batches);
3. the trial process gives every seed of it that seed's own trial key, under SEED_TRIAL_KEYS
   (workers.trials.keys.seed_trial_keys), so each seed stays its own trial outside Tune;
4. the trial reports every seed's metrics under PER_SEED in its Tune result, which the recorder and the
   finalizer split back into one trial per seed, each with its own config (`one_seed_config`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = [
    "DRIVER_ONLY_KEYS",
    "FINAL_PHASE",
    "GRID_PHASE",
    "ORCHESTRATION_KEYS",
    "PER_SEED",
    "TUNE_PHASE",
    "Key",
    "checkpoint_every_s_of",
    "one_seed_config",
    "seed_fields",
    "trial_seeds",
]


class Key:
    """Every key of a trial config (see the module docstring)."""

    # What the trial is: its database row, its MLflow tags, its trial key.
    STUDY_ID: Final = "study_id"
    PHASE: Final = "phase"  # TUNE_PHASE, FINAL_PHASE or GRID_PHASE
    METHOD: Final = "method"  # a studies.methods.METHODS name
    KNOBS: Final = "knobs"  # knob name -> value (studies.knobs.KNOBS)
    GROUP: Final = "group"  # a grid point's label ("tau=0.5"); absent outside grid studies
    SEED: Final = "seed"
    SEEDS: Final = "seeds"  # a seed batch (see the module docstring); SEED is then its first seed
    TRIAL_KEY: Final = "trial_key"  # set by the trial process (workers.trials.keys)
    SEED_TRIAL_KEYS: Final = "seed_trial_keys"  # a seed batch's seed -> that seed's trial key

    # The training part the driver writes from the spec (TrainConfig fields of the same names).
    DATASET: Final = "dataset"
    MODEL: Final = "model"
    MODEL_OVERRIDES: Final = "model_overrides"
    EPOCHS: Final = "epochs"
    BATCH_SIZE: Final = "batch_size"
    WARMUP_EPOCHS: Final = "warmup_epochs"
    COMPILE: Final = "compile"
    SPLIT_SEED: Final = "split_seed"
    EVAL_SPLIT: Final = "eval_split"  # "val" (tuning, memory probes) or "test" (final and grid trials)
    CORRUPTIONS: Final = "corruptions"
    SEVERITIES: Final = "severities"
    NUM_THREADS: Final = "num_threads"

    # Wiring: where the trial reports, and how often it checkpoints.
    MLFLOW_TRACKING_URI: Final = "mlflow_tracking_uri"
    MLFLOW_EXPERIMENT_ID: Final = "mlflow_experiment_id"
    MLFLOW_PARENT_RUN_ID: Final = "mlflow_parent_run_id"
    # The node's spool directory, where trackers journal what MLflow has not taken yet (workers.tracking).
    MLFLOW_SPOOL_DIR: Final = "mlflow_spool_dir"
    # Seconds of training between a trial's checkpoints (budget.checkpoint_every_s, resolved by the driver;
    # workers.training.checkpoint.CheckpointSchedule); absent or 0: every epoch.
    CHECKPOINT_EVERY_S: Final = "checkpoint_every_s"
    # The study's plugins (their stored source) and user datasets, which the trial imports and registers
    # before it builds anything (workers.plugins.activate); absent for a study with neither.
    EXTENSIONS: Final = "extensions"

    # Driver bookkeeping.
    # False where no scheduler can stop the trial before its last epoch (final and grid trials, tuning
    # without ASHA): a warm trial host may then train the next epoch while Tune takes a report
    # (workers.trials.host). Absent (a trial restored from an older experiment) counts as True.
    MAY_STOP_EARLY: Final = "may_stop_early"
    # Final and grid experiments grid-search over whole per-trial parts under this key; the trial process
    # lifts them to the top (workers.trials.keys.flatten_trial_config).
    VARIANT: Final = "variant"


# The key of a seed batch's Tune result under which each seed's own report sits ({"3": {...}}); Tune
# flattens it to `per_seed/3/<metric>` in its records.
PER_SEED: Final = "per_seed"

# Values of Key.PHASE (studies.store.Phase names the same ones for the stored trials).
TUNE_PHASE: Final = "tune"  # a method's search, on the validation split
FINAL_PHASE: Final = "final"  # each method's best knobs on every declared seed, on the test split
GRID_PHASE: Final = "grid"  # every grid point on every seed, on the test split

# Keys the orchestration adds that TrainConfig does not take (the trial process, the tracker and the
# driver read them); they are not hyperparameters, so they are not MLflow params either.
ORCHESTRATION_KEYS: frozenset[str] = frozenset(
    {
        Key.STUDY_ID,
        Key.PHASE,
        Key.TRIAL_KEY,
        Key.MLFLOW_TRACKING_URI,
        Key.MLFLOW_EXPERIMENT_ID,
        Key.MLFLOW_PARENT_RUN_ID,
        Key.MLFLOW_SPOOL_DIR,
        Key.CHECKPOINT_EVERY_S,
        Key.SEEDS,
        Key.SEED_TRIAL_KEYS,
        Key.EXTENSIONS,
    }
)

# Keys the driver uses for its bookkeeping, which the trial process drops before it trains.
DRIVER_ONLY_KEYS: tuple[str, ...] = (Key.GROUP, Key.MAY_STOP_EARLY)


def checkpoint_every_s_of(config: Mapping[str, Any]) -> float:
    """A trial config's checkpoint interval; absent (a config from before intervals existed): every epoch."""
    return float(config.get(Key.CHECKPOINT_EVERY_S) or 0.0)


def seed_fields(batch: Sequence[int]) -> dict[str, Any]:
    """A final or grid trial's seed fields: SEED, plus SEEDS when the trial trains a batch of seeds."""
    seeds = [int(seed) for seed in batch]
    return {Key.SEED: seeds[0], Key.SEEDS: seeds} if len(seeds) > 1 else {Key.SEED: seeds[0]}


def trial_seeds(config: Mapping[str, Any]) -> list[int]:
    """The seeds one Tune trial trains: its SEEDS when seed-batched, else its one SEED."""
    seeds = config.get(Key.SEEDS)
    return [int(s) for s in seeds] if seeds else [int(config[Key.SEED])]


def one_seed_config(config: Mapping[str, Any], seed: int, trial_key: str | None = None) -> dict[str, Any]:
    """The config of one seed of a (possibly seed-batched) trial, as a single-seed trial of that seed would
    have it: its seed, its own trial key where given, and no batch keys."""
    single = {k: v for k, v in config.items() if k not in (Key.SEEDS, Key.SEED_TRIAL_KEYS)}
    single[Key.SEED] = int(seed)
    if trial_key is not None:
        single[Key.TRIAL_KEY] = trial_key
    return single
