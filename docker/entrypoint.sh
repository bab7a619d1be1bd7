#!/usr/bin/env bash
# One image, three roles. Ray's token authentication stays on: RAY_AUTH_TOKEN comes from the
# compose file (NORMLAB_RAY_AUTH_TOKEN in .env) and is the same on every node and in the API.
# Workers join the head by its service name (RAY_HEAD_HOST, default ray-head) on the compose network.
set -euo pipefail
role="${1:-api}"
shift || true
: "${RAY_GCS_PORT:=6390}"
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN="${RAY_AUTH_TOKEN:-${NORMLAB_RAY_AUTH_TOKEN:?set NORMLAB_RAY_AUTH_TOKEN in .env (see .env.example)}}"

case "$role" in
  ray-head)
    # The head runs study drivers, not trials: no CPUs or GPUs for Ray to schedule unless asked.
    exec ray start --head --block \
      --port="${RAY_GCS_PORT}" \
      --dashboard-host=0.0.0.0 --dashboard-port=8265 \
      --num-cpus="${RAY_HEAD_CPUS:-0}" \
      --num-gpus="${RAY_HEAD_GPUS:-0}" \
      --disable-usage-stats "$@"
    ;;
  ray-worker)
    # Unset RAY_WORKER_CPUS / RAY_WORKER_GPUS: Ray counts the container's CPUs and GPUs.
    exec ray start --block \
      --address="${RAY_HEAD_HOST:-ray-head}:${RAY_GCS_PORT}" \
      ${RAY_WORKER_CPUS:+--num-cpus="$RAY_WORKER_CPUS"} \
      ${RAY_WORKER_GPUS:+--num-gpus="$RAY_WORKER_GPUS"} \
      --disable-usage-stats "$@"
    ;;
  api)
    exec normlab serve "$@"
    ;;
  *)
    exec "$role" "$@"
    ;;
esac
