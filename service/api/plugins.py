"""A submitted spec's plugins and user datasets: the permission, then a check in a child process.

Before a spec naming a plugin is validated, the server (1) refuses it unless plugins are on
(NORMLAB_ALLOW_PLUGINS) and the request carries the plugin token, then (2) reads each plugin's source and
imports and checks it in `python -m workers.plugins.check`, under a time and a memory limit, never in
this process. It fills each entry in with what the check found (the source, its hash, the package it
ships as, the facts of its records, its norm layers' checks), so the spec validates the plugin's names
from facts. A plugin that fails is a 422 at its entry naming the plugin, the check and the error; nothing
is stored. A user dataset's files are opened in the same child (they are read on the cluster's side).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from normlab.child import last_line, out_of_memory, run_limited
from normlab.loading import PluginError, read_plugin, source_from_files
from service.api.errors import InvalidSpecError, PluginsForbiddenError
from service.settings import Settings
from studies.spec.user_data import UserDataset

__all__ = ["CHECK_MODULE", "check_plugins", "plugin_permission"]

CHECK_MODULE = "workers.plugins.check"
# The source tree holding `workers`: the check runs the workers' module by name, as the dispatcher does
# the driver, so the API imports none of it.
SOURCE_ROOT = Path(__file__).resolve().parents[2]


def plugin_permission(
    data: dict[str, Any], *, settings: Settings, bearer: str | None, plugin_token: str | None
) -> None:
    """Raise PluginsForbiddenError (403) unless this request may run code on the cluster."""
    if not (data.get("plugins") or data.get("user_datasets")):
        return
    what = "plugins" if data.get("plugins") else "user_datasets"
    if not settings.allow_plugins or plugin_token is None:
        raise PluginsForbiddenError(
            f"this server does not accept {what}: a plugin runs its code, and a user dataset reads files, on "
            "every node of the cluster. The operator turns that on with NORMLAB_ALLOW_PLUGINS=true "
            "(README: Plugins, the trust model)"
        )
    if bearer != plugin_token:
        raise PluginsForbiddenError(
            f"a study with {what} needs the plugin token, not the API token: send "
            "`Authorization: Bearer <plugin token>` (NORMLAB_PLUGIN_TOKEN, or `normlab token --plugin` on the server)"
        )


def _request_item(index: int, entry: Any) -> dict[str, Any]:
    """What the child gets for one plugin entry: its source, or the entry point to read."""
    if isinstance(entry, str):
        entry = {"path": entry}
    if not isinstance(entry, dict):
        raise _entry_error(index, "a plugin is a path or a mapping with `path` or `entry_point`")
    if entry.get("entry_point"):
        return {"entry_point": str(entry["entry_point"])}
    path = entry.get("path")
    if not isinstance(path, str) or not path:
        raise _entry_error(
            index, "a plugin names exactly one of `path` (a .py file or package) or `entry_point`"
        )
    try:
        source = source_from_files(path, entry["files"]) if entry.get("files") else read_plugin(path)
    except (PluginError, OSError, UnicodeDecodeError, TypeError) as exc:
        raise _entry_error(index, str(exc)) from exc
    return {"source": source.to_json()}


def _listed(data: dict[str, Any], field: str) -> list[Any]:
    value = data.get(field)
    return list(value) if isinstance(value, list) else []


def _declared(index: int, raw: Any) -> dict[str, Any]:
    """A user dataset as its model fills it in (its own 422s at their fields), for the child to open."""
    try:
        return UserDataset.model_validate(raw).model_dump(exclude={"facts"})
    except ValidationError as exc:
        raise InvalidSpecError(
            [
                {**error, "loc": ("user_datasets", index, *error["loc"])}
                for error in exc.errors(include_url=False)
            ]
        ) from exc


def _entry_error(index: int, message: str, field: str | None = None) -> InvalidSpecError:
    loc: tuple[Any, ...] = ("plugins", index) if field is None else ("plugins", index, field)
    return InvalidSpecError([{"type": "plugin", "loc": loc, "msg": message}])


async def check_plugins(data: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """`data` with every plugin entry and user dataset filled in from the child's check; InvalidSpecError
    (422) for one that fails. A spec with neither comes back as it is."""
    # Anything but a list is left to the spec's validation (a 422 at the field).
    entries = _listed(data, "plugins")
    datasets = [_declared(i, d) for i, d in enumerate(_listed(data, "user_datasets"))]
    if not entries and not datasets:
        return data
    request = {"plugins": [_request_item(i, e) for i, e in enumerate(entries)], "user_datasets": datasets}
    answer = await asyncio.to_thread(_run_check, request, settings)
    problems: list[dict[str, Any]] = []
    filled: list[dict[str, Any]] = []
    for index, (entry, result) in enumerate(zip(entries, answer["plugins"], strict=True)):
        entry = {"path": entry} if isinstance(entry, str) else dict(entry)
        if not result["ok"]:
            problems.append(
                {
                    "type": "plugin",
                    "loc": ("plugins", index),
                    "msg": f"plugin {result['ref']}: {result['stage']} failed: {result['error']}",
                }
            )
            continue
        source = result["source"]
        entry.update(
            package=source["package"],
            sha256=source["sha256"],
            files=source["files"],
            distribution=source["distribution"],
            provides=result["provides"],
            checks=result["checks"],
        )
        filled.append(entry)
    for index, (declaration, result) in enumerate(zip(datasets, answer["user_datasets"], strict=True)):
        if not result["ok"]:
            problems.append(
                {"type": "user_dataset", "loc": ("user_datasets", index, "path"), "msg": result["error"]}
            )
        else:
            declaration["facts"] = result["facts"]
    if problems:
        raise InvalidSpecError(problems)
    return {
        **data,
        **({"plugins": filled} if entries else {}),
        **({"user_datasets": datasets} if datasets else {}),
    }


def _run_check(request: dict[str, Any], settings: Settings) -> dict[str, Any]:
    finished = run_limited(
        [sys.executable, "-m", CHECK_MODULE],
        stdin=json.dumps(request),
        timeout_s=settings.plugin_check_timeout_s,
        memory_mb=settings.plugin_check_memory_mb,
        env={"PYTHONPATH": os.pathsep.join(p for p in (str(SOURCE_ROOT), os.environ.get("PYTHONPATH")) if p)},
    )
    where = ("plugins", 0) if request["plugins"] else ("user_datasets", 0)
    if finished.timed_out:
        raise InvalidSpecError(
            [
                {
                    "type": "plugin",
                    "loc": where,
                    "msg": (
                        f"the plugin check ran past {settings.plugin_check_timeout_s:g} s (NORMLAB_PLUGIN_CHECK_TIMEOUT_S): "
                        "does the plugin train or download something when it is imported?"
                    ),
                }
            ]
        )
    lines = [line for line in finished.stdout.splitlines() if line.startswith("{")]
    if not lines:
        if out_of_memory(finished.stderr):
            msg = (
                f"the plugin check ran out of memory (limit {settings.plugin_check_memory_mb} MB, "
                f"NORMLAB_PLUGIN_CHECK_MEMORY_MB): {last_line(finished.stderr)}"
            )
        else:
            msg = f"the plugin check {finished.how}: {last_line(finished.stderr)}"
        raise InvalidSpecError([{"type": "plugin", "loc": where, "msg": msg}])
    return json.loads(lines[-1])  # type: ignore[no-any-return]
