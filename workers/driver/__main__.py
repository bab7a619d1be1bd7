"""`python -m workers.driver --study-id ID`: the entry point of a study's Ray job.

With a warm driver server (NORMLAB_WARM_DRIVER_SOCKET, workers.driver.warm_server) this process hands the
study to it and stands in for the driver it forks; without one, or when it starts no driver, this process
is the driver. Either way the driver is `run_in_process`.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from workers.settings import WorkerSettings


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def run_in_process(argv: list[str] | None = None) -> None:
    """Be the study's driver: parse the job's arguments, then run the study to its end."""
    from studies.store import make_engine
    from workers.driver.study import DriverContext, run_study

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


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    socket_path = WorkerSettings.from_env().warm_driver_socket
    if socket_path is not None:
        from workers.driver.warm_client import run_on_warm_server

        code = run_on_warm_server(socket_path, argv)
        if code is not None:
            raise SystemExit(code)
    run_in_process(argv)


if __name__ == "__main__":
    main()
