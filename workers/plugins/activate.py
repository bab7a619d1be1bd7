"""Import a study's plugins in this process, from their stored source, so their records register.

The driver and each trial call it before they validate the spec or build a model. Ray's `py_modules`
put the shipped packages on sys.path; where they are not (a local run, a test), the stored source is
written under `root` first. Never the user's path: a resumed study runs exactly what was submitted.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from normlab import REGISTRY
from normlab.loading import PluginSource, import_plugin, keep_only_plugins

__all__ = ["PLUGIN_ROOT", "activate_extensions", "activate_plugins", "stored_extensions"]

# Where a process writes a stored plugin that is not on sys.path (a warm trial host started by another
# study's job, a local run): per machine, under the package's hashed name, so versions never mix.
PLUGIN_ROOT = Path(tempfile.gettempdir()) / "normlab-plugins"

log = logging.getLogger(__name__)


def activate_plugins(entries: Iterable[Mapping[str, Any]], root: Path) -> list[PluginSource]:
    """Import each checked plugin entry of a spec (its stored source); returns what was imported."""
    sources = [PluginSource.from_entry(entry) for entry in entries]
    keep_only_plugins(source.label for source in sources)
    imported: list[PluginSource] = []
    for source in sources:
        import_plugin(source, root)
        log.info("plugin %s imported (package %s, sha256 %s)", source.ref, source.package, source.sha256[:12])
        imported.append(source)
    return imported


def activate_extensions(extensions: Mapping[str, Any] | None, *, data_builders: bool = True) -> None:
    """Make a study's plugins and user datasets known in this process (a trial, the driver); None or
    empty: the built-ins alone (a plugin an earlier study of this process imported is dropped).
    `data_builders` False registers a user dataset's facts only: the driver, which loads no data, never
    imports torch for it."""
    extensions = extensions or {}
    activate_plugins(extensions.get("plugins") or (), PLUGIN_ROOT)
    for declaration in extensions.get("user_datasets") or ():
        if data_builders:
            from workers.data.user_files import register_user_dataset

            register_user_dataset(declaration, facts=declaration.get("facts"))
        else:
            from studies.spec.user_data import UserDataset  # pydantic: only where a study declares one

            REGISTRY.datasets.add(UserDataset.model_validate(declaration).record())


def stored_extensions(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The extensions of a stored spec (as StudySpec.extensions gives them), read before it is validated."""
    return {
        "plugins": list(spec.get("plugins") or ()),
        "user_datasets": list(spec.get("user_datasets") or ()),
    }
