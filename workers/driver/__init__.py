"""The study driver: runs on the Ray cluster as a Ray job, one per study (`workers.driver.study.run_study`).

Nothing is imported here on purpose: every trial process imports `workers.trials.entry`, and a
package-level import of the driver would load Optuna, SQLAlchemy and the store into each of them (~1 s)."""
