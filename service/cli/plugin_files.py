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
from service.cli.client import CliError
from service.settings import Settings
from studies.spec import parse_spec_text

__all__ = ["inline_plugins", "names_extensions", "plugin_token_or_fail"]


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
