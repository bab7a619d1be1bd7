"""The wheels the images install, collected on the host and served to `docker build` over loopback.

pip inside a container may not reach a package index (no route, or TLS interception it does not trust), and
an air-gapped cluster has none: the Dockerfiles then install with `PIP_INSTALL_ARGS="--no-index
--find-links=URL"`. Here URL is a throwaway HTTP server on 127.0.0.1 that the builds reach through
`--network host`, so the wheels never enter the build context or an image layer.

The versions are the ones this test environment runs (`pip freeze` as constraints), including its CPU
build of torch.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["IMAGE_REQUIREMENTS", "fill_wheelhouse", "serve_directory"]

REPO = Path(__file__).resolve().parents[2]

# What docker/Dockerfile and docker/Dockerfile.mlflow install (torch and the project's own dependencies,
# MLflow's server with its PostgreSQL drivers) and what building the project needs (setuptools, wheel).
IMAGE_REQUIREMENTS = (
    "torch",
    str(REPO),
    "mlflow[auth]>=3,<4",
    "psycopg[binary]>=3.1",
    "psycopg2-binary>=2.9",
    "setuptools>=77",
    "wheel",
)
_STAMP = ".complete"
SERVER_PORT = 18763  # below Linux's ephemeral range, so no outgoing connection holds it


def fill_wheelhouse(directory: Path, requirements: Sequence[str] = IMAGE_REQUIREMENTS) -> bool:
    """Download the wheels of `requirements` (pinned to this environment) into `directory`.

    Skipped when the directory already holds the same request (same pins, same pyproject.toml); returns
    whether it downloaded.
    """
    pins = _pip("freeze", "--exclude-editable")
    key = hashlib.sha256(
        "\n".join([*requirements, pins, (REPO / "pyproject.toml").read_text(encoding="utf-8")]).encode()
    ).hexdigest()
    stamp = directory / _STAMP
    if stamp.exists() and stamp.read_text(encoding="utf-8").strip() == key:
        return False
    directory.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    constraints = directory / "constraints.txt"
    constraints.write_text(pins + "\n", encoding="utf-8")
    _pip("download", "--quiet", "--dest", str(directory), "--constraint", str(constraints), *requirements)
    stamp.write_text(key + "\n", encoding="utf-8")
    return True


def _pip(*args: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=900, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"pip {args[0]} failed:\n{completed.stderr[-3000:]}")
    return completed.stdout.strip()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve_directory(directory: Path, port: int = SERVER_PORT) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 listing `directory` (pip's --find-links reads the listing); its URL.

    The URL is part of the images' build arguments, and a changed build argument rebuilds every layer
    after it: the same port each run keeps the builds cached (any free port when it is taken)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
