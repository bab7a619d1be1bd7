#!/usr/bin/env bash
# `make test`: the whole suite. The main run is two pytest passes: first every test that is safe beside
# another (free ports, its own temp dirs, one PostgreSQL schema and MLflow server per worker), spread by
# module over NORMLAB_TEST_WORKERS xdist workers ("auto": one per core, at most 4; 0: none); then the
# `serial` tests (they start Ray or the whole stack, or hold a server to time bounds: tests/conftest.py),
# one after another.
#
# Where a Docker engine answers, the docker tests run in a second pytest process beside the main run:
# they spend most of their wall time waiting on image builds and containers (about 6 of their 13 minutes
# from scratch on 2 cores), so side by side the suite finishes minutes sooner than one after the other.
# Their output is kept in a log and printed after the main run; without an engine they run in the first
# pass, where they skip and say why. The exit status fails when any run fails. Every run's summary (what
# failed, the counts) is printed again last: CI keeps only the end of the output, and the serial pass and
# the docker log pushed the earlier failures out of it. With arguments (a path, -k, -m), one plain pytest
# run.
set -uo pipefail

python="${VENV:-.venv}/bin/python"
# Modules go to the workers in the order tests/conftest.py puts them: the costliest first.
workers=(-n "${NORMLAB_TEST_WORKERS:-auto}" --maxprocesses=4 --dist loadfile --no-loadscope-reorder)

if [[ $# -gt 0 ]]; then
  exec "$python" -m pytest "$@"
fi

main_log="$(mktemp "${TMPDIR:-/tmp}/normlab-main-tests.XXXXXX")"
docker_log=""
parallel_selection="not serial"
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  docker_log="$(mktemp "${TMPDIR:-/tmp}/normlab-docker-tests.XXXXXX")"
  echo "make test: the docker tests run alongside, their output follows the main run ($docker_log)"
  "$python" -m pytest -m docker >"$docker_log" 2>&1 &
  docker_pid=$!
  trap 'kill "$docker_pid" 2>/dev/null' INT TERM
  parallel_selection="not serial and not docker"
fi

"$python" -m pytest "${workers[@]}" -m "$parallel_selection" 2>&1 | tee "$main_log"
parallel_status=${PIPESTATUS[0]}
"$python" -m pytest -m "serial and not docker" 2>&1 | tee -a "$main_log"
serial_status=${PIPESTATUS[0]}
main_status=$((parallel_status != 0 ? parallel_status : serial_status))

docker_status=0
if [[ -n "$docker_log" ]]; then
  wait "$docker_pid"
  docker_status=$?
  echo
  echo "================================ docker tests ================================"
  cat "$docker_log"
fi

# pytest's own summary of each run in a log: from its "short test summary info" header (written under -ra
# when anything failed, errored or skipped) through its counts line, else the counts line alone. Each
# stops there: what the interpreter writes at exit after pytest is done (nanobind's leak report of
# Triton's bindings, about 30 lines) would push the failures back out of CI's tail.
print_summary() {
  local name="$1" log="$2"
  echo
  echo "================================ summary: $name ================================"
  awk '
    /short test summary info/ { keep = 1; summary = "" }
    keep { summary = summary $0 "\n" }
    / in [0-9.]+s( \([0-9:]+\))? =+$/ {
      if (keep) printf "%s", summary
      else print
      keep = 0; found = 1
    }
    END {
      if (keep) printf "%s", summary
      else if (!found) print "(pytest wrote no summary: see its output above)"
    }' "$log"
}
print_summary "main run (exit $main_status): parallel pass $parallel_status, serial pass $serial_status" "$main_log"
if [[ -n "$docker_log" ]]; then
  print_summary "docker tests (exit $docker_status)" "$docker_log"
fi
if [[ $main_status -ne 0 || $docker_status -ne 0 ]]; then
  if [[ -n "$docker_log" ]]; then
    echo "make test: FAILED (main run exit $main_status, docker run exit $docker_status)"
  else
    echo "make test: FAILED (main run exit $main_status; no Docker engine: the docker tests skipped)"
  fi
  exit 1
fi
