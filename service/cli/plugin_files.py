"""`normlab submit` for a spec that names plugins: send each local plugin's files with the spec.

The server may be another machine (a cluster's head, a container), so a plugin path in a spec is read
here, relative to the spec file, and its files travel inline; the server checks them (a plugin cannot be
checked here without importing it, which the CLI never does). The plugin token is what such a spec is
sent with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from normlab.loading import PluginError, read_plugin
from service.auth import read_plugin_token
from service.cli.client import CliError, check_spec_text
from service.settings import Settings
from studies.spec import parse_spec_text

__all__ = ["inline_plugins", "names_extensions", "plugin_token_or_fail", "spec_to_send"]


def names_extensions(spec_text: str, content_type: str) -> bool:
    """Whether the spec names plugins or user datasets (checked by the server, in a child process)."""
    try:
        data = parse_spec_text(spec_text, content_type)
    except (ValueError, TypeError, RecursionError):
        return False
    return isinstance(data, dict) and bool(data.get("plugins") or data.get("user_datasets"))


def inline_plugins(spec_text: str, content_type: str, spec_dir: Path) -> str:
    """The spec as JSON with each `path` plugin's files read from disk (relative to the spec's folder)."""
    data: dict[str, Any] = parse_spec_text(spec_text, content_type)
    entries = []
    for entry in data.get("plugins") or ():
        entry = {"path": entry} if isinstance(entry, str) else dict(entry)
        if entry.get("path") and not entry.get("files"):
            try:
                source = read_plugin(entry["path"], spec_dir)
            except PluginError as exc:
                raise CliError(
                    f"{exc} (paths are read relative to the spec file's folder, {spec_dir})"
                ) from exc
            entry["files"] = dict(source.files)
        entries.append(entry)
    if entries:
        data["plugins"] = entries
    return json.dumps(data)


def plugin_token_or_fail(settings: Settings) -> str:
    found = read_plugin_token(settings)
    if found is None:
        raise CliError(
            "this spec names plugins or user datasets, which need the plugin token: set NORMLAB_PLUGIN_TOKEN, "
            f"or run this on the server machine once it runs with NORMLAB_ALLOW_PLUGINS=true (it writes "
            f"{settings.plugin_token_path})"
        )
    return found


def spec_to_send(spec: Path, settings: Settings, *, api_token: str | None) -> tuple[str, str, str]:
    """(text, content type, token) of a spec file as `submit` and `plan` send it: checked here first as
    the API would; or, where it names plugins or user datasets (which the server checks in a child
    process), with the plugins' files inline and the plugin token."""
    content_type = "application/json" if spec.suffix == ".json" else "application/yaml"
    spec_text = spec.read_text(encoding="utf-8")
    if names_extensions(spec_text, content_type):
        return (
            inline_plugins(spec_text, content_type, spec.resolve().parent),
            "application/json",
            plugin_token_or_fail(settings),
        )
    check_spec_text(spec_text, content_type=content_type)
    if api_token is None:
        raise CliError(
            f"no API token: set NORMLAB_API_TOKEN, or run `make run` once on this machine "
            f"(it writes {settings.api_token_path})"
        )
    return spec_text, content_type, api_token
