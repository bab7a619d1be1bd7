"""Run a ComposePlan with the Docker CLI: build its images, start its containers in dependency order on one
network (service names as aliases), wait for healthchecks, and remove everything it created.

Published ports go to free host ports (a user's stack may hold 5000 / 8000 / 8265). Everything created is
labelled with the project name, so `down()` finds it even when `up()` failed half way.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from service.stack.processes import free_port
from tests.docker.compose_plan import BuildStep, ComposePlan, ContainerStep

__all__ = ["DockerError", "DockerStack", "docker"]

PROJECT_LABEL = "org.normlab.test-project"


class DockerError(RuntimeError):
    """A docker command failed or a container did not come up; the message carries its output."""


def docker(*args: str, timeout: float = 120, check: bool = True, env: Mapping[str, str] | None = None) -> str:
    """Run one docker CLI command; its stdout, stripped."""
    completed = subprocess.run(
        ["docker", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if check and completed.returncode != 0:
        # A build's own output (the failing step's pip or apt lines) is on stdout.
        raise DockerError(
            f"docker {' '.join(args[:3])} ... failed ({completed.returncode}):\n"
            f"{completed.stdout[-3000:]}\n{completed.stderr}"
        )
    return completed.stdout.strip()


def build_image(step: BuildStep, *, extra_args: Sequence[str] = (), timeout: float = 1200) -> None:
    """`docker build` with the classic builder (what an engine without buildx has)."""
    args = ["build", "-f", str(step.dockerfile), "-t", step.image, *extra_args]
    for key, value in step.args.items():
        args += ["--build-arg", f"{key}={value}"]
    docker(*args, str(step.context), timeout=timeout, env={"DOCKER_BUILDKIT": "0"})


@dataclass
class DockerStack:
    plan: ComposePlan
    host_ports: dict[tuple[str, int], int] = field(default_factory=dict)  # (service, container port)
    _env_dir: tempfile.TemporaryDirectory[str] | None = None

    # ------------------------------------------------------------------------------------- lifecycle

    def up(self, *, timeout_per_service: float = 300) -> None:
        """Start every container in dependency order, waiting for each dependency's condition."""
        label = f"{PROJECT_LABEL}={self.plan.project}"
        docker("network", "create", "--label", label, self.plan.network)
        for volume in self.plan.volumes:
            docker("volume", "create", "--label", label, volume)
        self._env_dir = tempfile.TemporaryDirectory(prefix="normlab-docker-env-")
        for step in self.plan.containers:
            for service, condition in step.depends_on.items():
                self.wait_for(service, condition, timeout=timeout_per_service)
            self._run(step)

    def down(self) -> list[str]:
        """Remove this project's containers, network and volumes (images stay cached); what was removed."""
        label = f"label={PROJECT_LABEL}={self.plan.project}"
        removed = []
        containers = docker("ps", "-aq", "--filter", label, check=False).split()
        if containers:
            docker("rm", "-f", "-v", *containers, check=False, timeout=180)
            removed += containers
        for network in docker("network", "ls", "-q", "--filter", label, check=False).split():
            docker("network", "rm", network, check=False)
            removed.append(network)
        volumes = docker("volume", "ls", "-q", "--filter", label, check=False).split()
        if volumes:
            docker("volume", "rm", "-f", *volumes, check=False, timeout=180)
            removed += volumes
        if self._env_dir is not None:
            self._env_dir.cleanup()
            self._env_dir = None
        return removed

    def leftovers(self) -> list[str]:
        """Containers, networks and volumes of this project that still exist."""
        label = f"label={PROJECT_LABEL}={self.plan.project}"
        return [
            *docker("ps", "-aq", "--filter", label, check=False).split(),
            *docker("network", "ls", "-q", "--filter", label, check=False).split(),
            *docker("volume", "ls", "-q", "--filter", label, check=False).split(),
        ]

    # ------------------------------------------------------------------------------------- queries

    def containers(self, service: str) -> list[str]:
        return [step.name for step in self.plan.service(service)]

    def url(self, service: str, container_port: int) -> str:
        return f"http://127.0.0.1:{self.host_ports[(service, container_port)]}"

    def state(self, container: str) -> dict:
        return json.loads(docker("inspect", "--format", "{{json .State}}", container))

    def hostname(self, container: str) -> str:
        return docker("inspect", "--format", "{{.Config.Hostname}}", container)

    def logs(self, container: str, lines: int = 60) -> str:
        completed = subprocess.run(
            ["docker", "logs", "--tail", str(lines), container],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return completed.stdout + completed.stderr

    def all_logs(self, lines: int = 40) -> str:
        return "\n".join(
            f"--- {step.name} ---\n{self.logs(step.name, lines)}" for step in self.plan.containers
        )

    def exec(self, container: str, *command: str, timeout: float = 60) -> str:
        return docker("exec", container, *command, timeout=timeout)

    def wait_for_log(self, container: str, text: str, *, timeout: float) -> None:
        """Block until `text` appears in the container's output (for services with no port to ask)."""
        deadline = time.monotonic() + timeout
        while text not in self.logs(container, lines=2000):
            if time.monotonic() > deadline:
                raise DockerError(
                    f"{container} did not print {text!r} in {timeout:.0f} s:\n{self.logs(container)}"
                )
            time.sleep(1)

    def wait_for(self, service: str, condition: str, *, timeout: float) -> None:
        """Block until every replica of `service` meets a depends_on condition."""
        deadline = time.monotonic() + timeout
        for container in self.containers(service):
            while True:
                state = self.state(container)
                health = (state.get("Health") or {}).get("Status")
                if condition == "service_healthy" and health == "healthy":
                    break
                if condition == "service_started" and state.get("Running"):
                    break
                if condition == "service_completed_successfully" and state.get("Status") == "exited":
                    if state.get("ExitCode") != 0:
                        raise DockerError(f"{container} exited with {state.get('ExitCode')}")
                    break
                if (
                    state.get("Status") in ("exited", "dead")
                    and condition != "service_completed_successfully"
                ):
                    raise DockerError(
                        f"{container} stopped ({state.get('ExitCode')}):\n{self.logs(container)}"
                    )
                if time.monotonic() > deadline:
                    raise DockerError(
                        f"{container} not {condition} after {timeout:.0f} s "
                        f"(health {health}):\n{self.logs(container)}"
                    )
                time.sleep(1)

    # ------------------------------------------------------------------------------------- internals

    def _run(self, step: ContainerStep) -> None:
        assert self._env_dir is not None
        # Secrets go through a file, not the command line (which any local user can read in `ps`).
        env_file = Path(self._env_dir.name) / f"{step.name}.env"
        env_file.write_text("".join(f"{k}={v}\n" for k, v in step.environment.items()), encoding="utf-8")
        args = [
            "run",
            "--detach",
            "--name",
            step.name,
            "--label",
            f"{PROJECT_LABEL}={self.plan.project}",
            "--network",
            self.plan.network,
            "--network-alias",
            step.service,
            "--env-file",
            str(env_file),
        ]
        for mount in step.mounts:
            args += ["--volume", f"{mount.source}:{mount.target}{':ro' if mount.read_only else ''}"]
        for port in step.ports:
            host_port = free_port()
            self.host_ports[(step.service, port.container_port)] = host_port
            args += ["--publish", f"{port.host_ip}:{host_port}:{port.container_port}"]
        if step.healthcheck is not None:
            check = step.healthcheck
            args += ["--health-cmd", check.shell_command]
            if check.interval:
                args += ["--health-interval", check.interval]
            if check.timeout:
                args += ["--health-timeout", check.timeout]
            if check.retries is not None:
                args += ["--health-retries", str(check.retries)]
            if check.start_period:
                args += ["--health-start-period", check.start_period]
        if step.shm_size:
            args += ["--shm-size", step.shm_size]
        if step.gpus:
            args += ["--gpus", "all"]
        if step.restart:
            args += ["--restart", step.restart]
        docker(*args, step.image, *(step.command or []))
