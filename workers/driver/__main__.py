"""`python -m workers.driver --study-id ID`: the entry point of a study's Ray job."""

from __future__ import annotations

import argparse
import logging
import signal

from service.store import make_engine
from workers.driver.study import DriverContext, run_study
from workers.settings import WorkerSettings


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workers.driver", description=__doc__)
    parser.add_argument("--study-id", required=True)
    args = parser.parse_args(argv)
    # Ray stops a job (cancel) with SIGTERM: turn it into SystemExit so the MLflow parent run is closed.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = WorkerSettings.from_env()
    if not settings.database_url or not settings.tracking_uri:
        raise SystemExit("the driver needs DATABASE_URL and MLFLOW_TRACKING_URI in its environment")
    ctx = DriverContext(
        engine=make_engine(settings.database_url),
        database_url=settings.database_url,
        mlflow_tracking_uri=settings.tracking_uri,
        results_dir=settings.data_dir / "ray_results" / args.study_id,
    )
    run_study(args.study_id, ctx)


if __name__ == "__main__":
    main()
