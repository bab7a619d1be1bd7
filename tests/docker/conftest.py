"""docker-compose.yml with its CPU override, run for real: the images built from docker/, the services
started as the file describes them (through the Docker CLI: tests/docker/docker_stack.py), and everything
removed afterwards. Skipped, with the reason, where no Docker engine answers."""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from service.stack.processes import http_ok, wait_until
from tests.docker.base_images import ensure_base_images
from tests.docker.compose_plan import load_plan
from tests.docker.docker_stack import DockerError, DockerStack, build_image, docker
from tests.docker.wheelhouse import fill_wheelhouse, serve_directory

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILES = (REPO / "docker-compose.yml", REPO / "docker-compose.cpu.yml")
# Built images get their own names, so a test never replaces a user's normlab:latest; they stay cached.
IMAGE_PREFIX = "normlab-docker-test/"
WORKERS = 2


# cgroup v1 accounting of every container the engine ran (builds included), where it is readable.
DOCKER_CPUACCT = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")


def cpu_seconds() -> float | None:
    """CPU time of this process's children (pip, debootstrap, docker CLI) plus all containers; None where
    the engine's cgroup accounting is not readable. Wall time on a shared machine says little alone."""
    try:
        containers = int(DOCKER_CPUACCT.read_text()) / 1e9
    except (OSError, ValueError):
        return None
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return containers + children.ru_utime + children.ru_stime


@dataclass
class PhaseClock:
    """Wall (and CPU) time of each phase, printed as it ends: the docker tests' cost is part of CI's budget."""

    report: Callable[[str], None]
    phases: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start, cpu_start = time.monotonic(), cpu_seconds()
        try:
            yield
        finally:
            self.phases[name] = time.monotonic() - start
            cpu_end = cpu_seconds()
            cpu = "" if cpu_start is None or cpu_end is None else f", {cpu_end - cpu_start:.0f} s CPU"
            self.report(f"{name}: {self.phases[name]:.0f} s{cpu} (load average {os.getloadavg()[0]:.1f})")


@dataclass(frozen=True)
class RunningStack:
    stack: DockerStack
    variables: dict[str, str]
    clock: PhaseClock

    @property
    def api_url(self) -> str:
        return self.stack.url("api", 8000)

    @property
    def mlflow_url(self) -> str:
        return self.stack.url("mlflow", 5000)

    @property
    def ray_dashboard_url(self) -> str:
        return self.stack.url("ray-head", 8265)

    @property
    def api_token(self) -> str:
        return self.variables["NORMLAB_API_TOKEN"]

    @property
    def plugin_token(self) -> str:
        return self.variables["NORMLAB_PLUGIN_TOKEN"]

    @property
    def ray_token(self) -> str:
        return self.variables["NORMLAB_RAY_AUTH_TOKEN"]


def stack_variables() -> dict[str, str]:
    """What a user writes into .env (.env.example), with fresh secrets, and the CPU override's knobs."""
    return {
        "POSTGRES_PASSWORD": secrets.token_hex(16),
        "NORMLAB_RAY_AUTH_TOKEN": secrets.token_hex(32),
        "NORMLAB_API_TOKEN": secrets.token_hex(16),
        # The operator's opt-in to plugins, and the token a study that names one is sent with.
        "NORMLAB_ALLOW_PLUGINS": "true",
        "NORMLAB_PLUGIN_TOKEN": secrets.token_hex(16),
        "MLFLOW_TRACKING_USERNAME": "normlab",
        "MLFLOW_TRACKING_PASSWORD": secrets.token_hex(16),
        "NORMLAB_CPU_WORKERS": str(WORKERS),
        # One Ray CPU per worker on a 2-core machine: two trials at a time, one on each worker.
        "NORMLAB_CPU_WORKER_CPUS": "1",
        "NORMLAB_POLL_INTERVAL_S": "1",
    }


@pytest.fixture(scope="session")
def report(request) -> Callable[[str], None]:
    """A line on the terminal as it happens (stand-ins, caches, timings), also while output is captured."""
    terminal = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def write(line: str) -> None:
        if terminal is None:
            return
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            terminal.write_line(f"[docker] {line}")

    return write


@pytest.fixture(scope="session")
def docker_engine(report) -> str:
    """The engine's version; skips the docker tests where none answers."""
    if shutil.which("docker") is None:
        pytest.skip("no `docker` command: install docker.io (.ci/run does so where it can)")
    try:
        version = docker("version", "--format", "{{.Server.Version}}", timeout=30)
    except (DockerError, subprocess.TimeoutExpired) as exc:
        pytest.skip(
            f"no Docker engine answers (.ci/run starts dockerd where it can): {str(exc).strip()[-300:]}"
        )
    report(f"Docker engine {version}")
    return version


@pytest.fixture(scope="session")
def compose_images(docker_engine, request, report) -> PhaseClock:
    """Base images (pulled or stand-ins), the wheelhouse, then the compose file's own builds."""
    clock = PhaseClock(report)
    wheelhouse = Path(request.config.cache.mkdir("normlab-docker-wheelhouse"))
    with clock.phase("base images and wheelhouse"), ThreadPoolExecutor(max_workers=2) as pool:
        bases = pool.submit(ensure_base_images, report)
        wheels = pool.submit(fill_wheelhouse, wheelhouse)
        bases.result()
        report(f"wheelhouse {wheelhouse}: {'filled' if wheels.result() else 'cached'}")
    with serve_directory(wheelhouse) as url:
        variables = {**stack_variables(), "NORMLAB_PIP_INSTALL_ARGS": f"--no-index --find-links={url}"}
        plan = load_plan(COMPOSE_FILES, variables, project="build", image_prefix=IMAGE_PREFIX)
        with clock.phase("image builds"), ThreadPoolExecutor(max_workers=len(plan.builds)) as pool:
            # --network host: the builds reach the wheelhouse server on this machine's loopback.
            list(pool.map(lambda step: build_image(step, extra_args=["--network", "host"]), plan.builds))
    return clock


@pytest.fixture(scope="module")
def compose_stack(compose_images: PhaseClock, report) -> Iterator[RunningStack]:
    """Every service of the compose file (CPU override, two workers) on a network of its own."""
    variables = stack_variables()
    project = f"normlab-test-{uuid.uuid4().hex[:8]}"
    plan = load_plan(COMPOSE_FILES, variables, project=project, image_prefix=IMAGE_PREFIX)
    stack = DockerStack(plan)
    running = RunningStack(stack=stack, variables=variables, clock=compose_images)
    try:
        with compose_images.phase("stack up"):
            stack.up()
            # Workers serve nothing to ask: `ray start` says when the node has joined the head.
            for worker in stack.containers("ray-worker"):
                stack.wait_for_log(worker, "Ray runtime started", timeout=300)
            up = wait_until(lambda: http_ok(f"{running.api_url}/healthz"), timeout=180, interval=1)
            assert up, f"the API did not answer on {running.api_url}:\n{stack.all_logs()}"
        yield running
    finally:
        with compose_images.phase("stack removal"):
            removed = stack.down()
        leftovers = stack.leftovers()
        report(f"removed {len(removed)} containers, networks and volumes of {project}")
        assert not leftovers, f"still present after removal: {leftovers}"
