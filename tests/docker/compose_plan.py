"""Read docker-compose.yml (plus override files) into a plan of `docker build` / `docker run` steps.

Compose v2 cannot be installed on every test machine, so the docker tests start the services of the real
compose file through the Docker CLI. This module covers the part of the compose spec that file uses, with
compose's own semantics: variable interpolation (`${VAR}`, `${VAR:-default}`, `${VAR-default}`,
`${VAR:?error}`, `${VAR?error}`, `${VAR:+alt}`, `$$`), `<<` merge keys, override files merged onto the
base (mappings merge key by key, anything else is replaced, `!reset` removes a key, `!override` replaces
a mapping whole), `env_file` with `environment` on top, named volumes and bind mounts, published ports,
healthchecks, `depends_on` conditions, `deploy.replicas`, GPU reservations, `shm_size`, `restart` and
`build`.

`variables` plays the role of the project's `.env` file: it supplies interpolation and the content of
`env_file: .env`. Nothing is read from the process environment, so a plan depends only on its inputs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "BuildStep",
    "ComposeError",
    "ComposePlan",
    "ContainerStep",
    "Healthcheck",
    "Mount",
    "PublishedPort",
    "interpolate",
    "load_plan",
]

DOTENV = ".env"


class ComposeError(ValueError):
    """The compose files ask for something this reader does not do, or a required variable is missing."""


@dataclass(frozen=True)
class BuildStep:
    image: str
    context: Path
    dockerfile: Path
    args: Mapping[str, str]


@dataclass(frozen=True)
class Mount:
    source: str  # a named volume's full name, or an absolute host path
    target: str
    read_only: bool
    named: bool


@dataclass(frozen=True)
class PublishedPort:
    host_ip: str
    host_port: int
    container_port: int


@dataclass(frozen=True)
class Healthcheck:
    shell_command: str  # what `docker run --health-cmd` takes (run by the container's /bin/sh)
    interval: str | None
    timeout: str | None
    retries: int | None
    start_period: str | None


@dataclass(frozen=True)
class ContainerStep:
    service: str
    name: str  # <project>-<service>-<replica>, as compose names it
    image: str
    command: Sequence[str] | None
    environment: Mapping[str, str]
    mounts: Sequence[Mount]
    ports: Sequence[PublishedPort]
    healthcheck: Healthcheck | None
    depends_on: Mapping[str, str]  # service -> condition (service_started | service_healthy | ...)
    shm_size: str | None
    gpus: bool
    restart: str | None  # docker's restart policy (no, always, on-failure, unless-stopped)


@dataclass(frozen=True)
class ComposePlan:
    project: str
    network: str  # every container joins it with its service name as alias
    volumes: Sequence[str]  # full names of the named volumes
    builds: Sequence[BuildStep]
    containers: Sequence[ContainerStep]  # in dependency order

    def service(self, name: str) -> list[ContainerStep]:
        return [step for step in self.containers if step.service == name]


# ------------------------------------------------------------------------------------------ YAML


@dataclass(frozen=True)
class _Reset:
    """`!reset`: the key disappears from the merged result."""


@dataclass(frozen=True)
class _Override:
    """`!override value`: the value replaces the base's instead of merging into it."""

    value: Any


class _ComposeLoader(yaml.SafeLoader):
    pass


_ComposeLoader.add_constructor("!reset", lambda loader, node: _Reset())


def _construct_override(loader: yaml.SafeLoader, node: yaml.Node) -> _Override:
    if isinstance(node, yaml.MappingNode):
        return _Override(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return _Override(loader.construct_sequence(node, deep=True))
    return _Override(loader.construct_scalar(node))


_ComposeLoader.add_constructor("!override", _construct_override)


def _merge(base: Any, override: Any) -> Any:
    if isinstance(override, _Override):
        return _strip_tags(override.value)
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            if isinstance(value, _Reset):
                merged.pop(key, None)
            elif key in merged:
                merged[key] = _merge(merged[key], value)
            else:
                merged[key] = _strip_tags(value)
        return merged
    return _strip_tags(override)


def _strip_tags(value: Any) -> Any:
    """A tag with nothing under it to act on: `!reset` drops the key, `!override` is its value."""
    if isinstance(value, _Override):
        return _strip_tags(value.value)
    if isinstance(value, dict):
        return {k: _strip_tags(v) for k, v in value.items() if not isinstance(v, _Reset)}
    if isinstance(value, list):
        return [_strip_tags(v) for v in value if not isinstance(v, _Reset)]
    return value


# ---------------------------------------------------------------------------------- interpolation

_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """Compose's substitution of `$VAR` / `${VAR...}` in one string value."""

    def substitute(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["bare"]
        value = variables.get(name)
        op, arg = match["op"], match["arg"] or ""
        unset_or_empty = value is None or (op is not None and op.startswith(":") and value == "")
        if op in ("-", ":-"):
            return arg if unset_or_empty else str(value)
        if op in ("?", ":?"):
            if unset_or_empty:
                raise ComposeError(f"required variable {name} is missing: {arg or 'no message'}")
            return str(value)
        if op in ("+", ":+"):
            return "" if unset_or_empty else arg
        return "" if value is None else str(value)

    return _VARIABLE.sub(substitute, text)


def _interpolate_tree(value: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return interpolate(value, variables)
    if isinstance(value, _Override):
        return _Override(_interpolate_tree(value.value, variables))
    if isinstance(value, dict):
        return {k: _interpolate_tree(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate_tree(v, variables) for v in value]
    return value


# ----------------------------------------------------------------------------------------- plan


def load_plan(
    files: Sequence[Path],
    variables: Mapping[str, str],
    *,
    project: str,
    image_prefix: str = "",
) -> ComposePlan:
    """The run plan of `docker compose -f files[0] -f files[1] ... up` under project name `project`.

    `image_prefix` goes in front of the images the plan builds (`normlab:latest` -> `<prefix>normlab:latest`)
    so a test's builds never replace a user's own; pulled images keep their names.
    """
    if not files:
        raise ComposeError("no compose file given")
    project_dir = files[0].resolve().parent
    merged: dict[str, Any] = {}
    for path in files:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=_ComposeLoader) or {}
        merged = _merge(merged, _interpolate_tree(document, variables))
    compose_name = str(merged.get("name") or project_dir.name)
    services: dict[str, dict[str, Any]] = merged.get("services") or {}
    volumes = {name: f"{project}_{name}" for name in (merged.get("volumes") or {})}

    builds: dict[str, BuildStep] = {}
    images: dict[str, str] = {}
    for service, spec in services.items():
        image = str(spec.get("image") or f"{compose_name}-{service}")
        if "build" in spec:
            step = _build_step(spec["build"], image_prefix + image, project_dir)
            if step.image in builds and builds[step.image] != step:
                raise ComposeError(f"service {service} builds {step.image} differently from another service")
            builds[step.image] = step
            image = step.image
        images[service] = image

    containers = [
        _container_step(
            service, services[service], images[service], replica, project, project_dir, volumes, variables
        )
        for service in _dependency_order(services)
        for replica in range(1, _replicas(services[service]) + 1)
    ]
    return ComposePlan(
        project=project,
        network=f"{project}_default",
        volumes=list(volumes.values()),
        builds=list(builds.values()),
        containers=containers,
    )


def _build_step(build: Any, image: str, project_dir: Path) -> BuildStep:
    if isinstance(build, str):
        build = {"context": build}
    context = (project_dir / str(build.get("context", "."))).resolve()
    dockerfile = context / str(build.get("dockerfile", "Dockerfile"))
    return BuildStep(image=image, context=context, dockerfile=dockerfile, args=_key_values(build.get("args")))


def _container_step(
    service: str,
    spec: Mapping[str, Any],
    image: str,
    replica: int,
    project: str,
    project_dir: Path,
    volumes: Mapping[str, str],
    variables: Mapping[str, str],
) -> ContainerStep:
    environment: dict[str, str] = {}
    for env_file in _as_list(spec.get("env_file")):
        environment.update(_env_file(str(env_file), project_dir, variables))
    environment.update(_key_values(spec.get("environment")))
    command = spec.get("command")
    if isinstance(command, str):
        command = shlex.split(command)
    return ContainerStep(
        service=service,
        name=f"{project}-{service}-{replica}",
        image=image,
        command=None if command is None else [str(part) for part in command],
        environment=environment,
        mounts=[_mount(str(entry), project_dir, volumes) for entry in spec.get("volumes") or []],
        ports=[_published_port(str(entry)) for entry in spec.get("ports") or []],
        healthcheck=_healthcheck(spec.get("healthcheck")),
        depends_on=_depends_on(spec.get("depends_on")),
        shm_size=None if spec.get("shm_size") is None else str(spec["shm_size"]),
        gpus=_reserves_gpus(spec),
        restart=_optional_str(spec.get("restart")),
    )


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _key_values(value: Any) -> dict[str, str]:
    """`environment` / `args` as a mapping or as a list of KEY=VALUE strings."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): _scalar(v) for k, v in value.items() if v is not None}
    pairs = {}
    for entry in value:
        key, sep, val = str(entry).partition("=")
        if sep:
            pairs[key] = val
    return pairs


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _env_file(path: str, project_dir: Path, variables: Mapping[str, str]) -> dict[str, str]:
    if path == DOTENV:
        return dict(variables)
    lines = (project_dir / path).read_text(encoding="utf-8").splitlines()
    return _key_values([line for line in lines if line.strip() and not line.lstrip().startswith("#")])


def _mount(entry: str, project_dir: Path, volumes: Mapping[str, str]) -> Mount:
    parts = entry.split(":")
    if len(parts) not in (2, 3):
        raise ComposeError(f"volume {entry!r}: only SOURCE:TARGET[:MODE] is supported")
    source, target = parts[0], parts[1]
    read_only = len(parts) == 3 and "ro" in parts[2].split(",")
    if source.startswith((".", "/", "~")):
        return Mount(str((project_dir / source).resolve()), target, read_only, named=False)
    if source not in volumes:
        raise ComposeError(f"volume {source!r} is not declared under the top-level `volumes`")
    return Mount(volumes[source], target, read_only, named=True)


def _published_port(entry: str) -> PublishedPort:
    parts = entry.split(":")
    if len(parts) != 3:
        raise ComposeError(f"port {entry!r}: only HOST_IP:HOST_PORT:CONTAINER_PORT is supported")
    return PublishedPort(host_ip=parts[0], host_port=int(parts[1]), container_port=int(parts[2]))


def _healthcheck(spec: Mapping[str, Any] | None) -> Healthcheck | None:
    if not spec or spec.get("disable"):
        return None
    test = spec["test"]
    if isinstance(test, str):
        shell_command = test
    elif test[0] == "CMD-SHELL":
        shell_command = " ".join(str(part) for part in test[1:])
    elif test[0] == "CMD":
        shell_command = shlex.join(str(part) for part in test[1:])
    else:
        raise ComposeError(f"healthcheck test {test!r} is not supported")
    return Healthcheck(
        shell_command=shell_command,
        interval=_optional_str(spec.get("interval")),
        timeout=_optional_str(spec.get("timeout")),
        retries=None if spec.get("retries") is None else int(spec["retries"]),
        start_period=_optional_str(spec.get("start_period")),
    )


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _depends_on(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        return {str(name): "service_started" for name in value}
    return {str(name): str((spec or {}).get("condition", "service_started")) for name, spec in value.items()}


def _replicas(spec: Mapping[str, Any]) -> int:
    replicas = (spec.get("deploy") or {}).get("replicas", 1)
    return int(replicas)


def _reserves_gpus(spec: Mapping[str, Any]) -> bool:
    reservations = ((spec.get("deploy") or {}).get("resources") or {}).get("reservations") or {}
    return any("gpu" in (device.get("capabilities") or []) for device in reservations.get("devices") or [])


def _dependency_order(services: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Services after everything they depend on; file order among independent ones."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order:
            return
        if name in visiting:
            raise ComposeError(f"depends_on has a cycle through {name}")
        if name not in services:
            raise ComposeError(f"depends_on names an unknown service {name!r}")
        visiting.add(name)
        for dependency in _depends_on(services[name].get("depends_on")):
            visit(dependency)
        visiting.discard(name)
        order.append(name)

    for name in services:
        visit(name)
    return order
