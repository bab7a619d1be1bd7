#!/usr/bin/env bash
# `make test`: the whole suite. Where a Docker engine answers, the docker tests run in a second pytest
# process beside the rest: they spend most of their wall time waiting on image builds and containers
# (about 6 of their 13 minutes from scratch on 2 cores), so side by side the suite finishes minutes
# sooner than one after the other. Their output is kept in a log and printed after the main run; the
# exit status fails when either run fails. With arguments (a path, -k, -m), one plain pytest run.
set -uo pipefail

python="${VENV:-.venv}/bin/python"

if [[ $# -gt 0 ]]; then
  exec "$python" -m pytest "$@"
fi

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  # No engine: one run, in which the docker tests skip and say why.
  exec "$python" -m pytest
fi

docker_log="$(mktemp "${TMPDIR:-/tmp}/normlab-docker-tests.XXXXXX")"
echo "make test: the docker tests run alongside, their output follows the main run ($docker_log)"
"$python" -m pytest -m docker >"$docker_log" 2>&1 &
docker_pid=$!
trap 'kill "$docker_pid" 2>/dev/null' INT TERM

"$python" -m pytest -m "not docker"
main_status=$?
wait "$docker_pid"
docker_status=$?

echo
echo "================================ docker tests ================================"
cat "$docker_log"
if [[ $main_status -ne 0 || $docker_status -ne 0 ]]; then
  echo "make test: FAILED (main run exit $main_status, docker run exit $docker_status)"
  exit 1
fi
