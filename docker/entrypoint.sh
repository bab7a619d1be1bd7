#!/usr/bin/env bash
# One image, three roles. Ray's token authentication stays on: RAY_AUTH_TOKEN comes from the
# compose file (NORMLAB_RAY_AUTH_TOKEN in .env) and is the same on every node and in the API.
set -euo pipefail
role="${1:-api}"
shift || true
: "${RAY_GCS_PORT:=6390}"
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN="${RAY_AUTH_TOKEN:-${NORMLAB_RAY_AUTH_TOKEN:?set NORMLAB_RAY_AUTH_TOKEN in .env (see .env.example)}}"

case "$role" in
  ray-head)
    exec ray start --head --block \
      --port="${RAY_GCS_PORT}" \
      --dashboard-host=0.0.0.0 --dashboard-port=8265 \
      --num-gpus="${RAY_HEAD_GPUS:-0}" \
      --disable-usage-stats "$@"
    ;;
  ray-worker)
    exec ray start --block \
      --address="${RAY_HEAD_HOST:-ray-head}:${RAY_GCS_PORT}" \
      --disable-usage-stats "$@"
    ;;
  api)
    exec normlab serve "$@"
    ;;
  *)
    exec "$role" "$@"
    ;;
esac
