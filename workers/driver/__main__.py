"""`python -m workers.driver --study-id ID`: the entry point of a study's Ray job."""

from __future__ import annotations

import argparse
import logging
import os
import signal
from pathlib import Path

from service.store import make_engine
from workers.driver.study import DriverContext, run_study


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workers.driver", description=__doc__)
    parser.add_argument("--study-id", required=True)
    args = parser.parse_args(argv)
    # Ray stops a job (cancel) with SIGTERM: turn it into SystemExit so the MLflow parent run is closed.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    database_url = os.environ.get("DATABASE_URL")
    tracking_uri = os.environ.get("MLFLOW_TRACKING_URI")
    if not database_url or not tracking_uri:
        raise SystemExit("the driver needs DATABASE_URL and MLFLOW_TRACKING_URI in its environment")
    data_dir = Path(os.environ.get("NORMLAB_DATA_DIR", Path.home() / ".normlab")).expanduser()
    ctx = DriverContext(
        engine=make_engine(database_url),
        database_url=database_url,
        mlflow_tracking_uri=tracking_uri,
        results_dir=data_dir / "ray_results" / args.study_id,
    )
    run_study(args.study_id, ctx)


if __name__ == "__main__":
    main()
