"""The study driver: runs on the Ray cluster as a Ray job, one per study."""

from workers.driver.study import DriverContext, run_study

__all__ = ["DriverContext", "run_study"]
