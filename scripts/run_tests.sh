#!/usr/bin/env bash
# `make test`: the whole suite. Where a Docker engine answers, the docker tests run in a second pytest
# process beside the rest: they spend most of their wall time waiting on image builds and containers
# (about 6 of their 13 minutes from scratch on 2 cores), so side by side the suite finishes minutes
# sooner than one after the other. Their output is kept in a log and printed after the main run; the
# exit status fails when either run fails. Both runs' summaries (what failed, the counts) are printed
# again last: CI keeps only the end of the output, and the docker log pushed the main run's failures out
# of it. With arguments (a path, -k, -m), one plain pytest run.
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
main_log="$(mktemp "${TMPDIR:-/tmp}/normlab-main-tests.XXXXXX")"
echo "make test: the docker tests run alongside, their output follows the main run ($docker_log)"
"$python" -m pytest -m docker >"$docker_log" 2>&1 &
docker_pid=$!
trap 'kill "$docker_pid" 2>/dev/null' INT TERM

"$python" -m pytest -m "not docker" 2>&1 | tee "$main_log"
main_status=${PIPESTATUS[0]}
wait "$docker_pid"
docker_status=$?

echo
echo "================================ docker tests ================================"
cat "$docker_log"

# pytest's own summary: from its "short test summary info" header (written under -ra when anything
# failed, errored or skipped) through its counts line, else the counts line alone. It stops there: what
# the interpreter writes at exit after pytest is done (nanobind's leak report of Triton's bindings, about
# 30 lines) would push the failures back out of CI's tail.
print_summary() {
  local name="$1" log="$2"
  echo
  echo "================================ summary: $name ================================"
  awk '
    /short test summary info/ { keep = 1; summary = "" }
    keep { summary = summary $0 "\n" }
    / in [0-9.]+s( \([0-9:]+\))? =+$/ { counts = $0; if (keep) { printf "%s", summary; done = 1; exit } }
    END {
      if (done) exit
      if (keep) printf "%s", summary
      else if (counts != "") print counts
      else print "(pytest wrote no summary: see its output above)"
    }' "$log"
}
print_summary "main run (exit $main_status)" "$main_log"
print_summary "docker tests (exit $docker_status)" "$docker_log"
if [[ $main_status -ne 0 || $docker_status -ne 0 ]]; then
  echo "make test: FAILED (main run exit $main_status, docker run exit $docker_status)"
  exit 1
fi
