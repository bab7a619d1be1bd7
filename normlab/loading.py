"""Plugins: read a user's file or package into a stored source, write it back as a package, import it.

A plugin is stored and shipped as one package named `normlab_plugin_<name>_<sha8>`: a single file becomes
its `__init__.py`, a package keeps its files (its own imports must be relative). The name carries the
source's hash, so two versions of a plugin never shadow each other on a worker, and a resumed study
imports exactly the source it was submitted with. Ray ships the package to every node (`py_modules`).
An installed distribution announces itself through an entry point in one of ENTRY_POINT_GROUPS instead;
it must be installed on every node, and its files are stored for the record.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from normlab.plugin import registering_as
from normlab.records import BUILTIN, RECORD_TYPES, Record, from_facts, to_facts
from normlab.registry import REGISTRY

__all__ = [
    "ENTRY_POINT_GROUPS",
    "MAX_PLUGIN_BYTES",
    "PluginError",
    "PluginSource",
    "changed_on_disk",
    "import_plugin",
    "keep_only_plugins",
    "read_entry_point",
    "read_plugin",
    "records_from_facts",
    "records_of",
    "source_from_files",
    "write_package",
]

ENTRY_POINT_GROUPS = (
    "normlab.plugins",
    "normlab.methods",
    "normlab.norms",
    "normlab.datasets",
    "normlab.knobs",
    "normlab.backbones",
)
PACKAGE_PREFIX = "normlab_plugin_"
MAX_PLUGIN_BYTES = 2_000_000  # a plugin is code, not data: a larger source is refused
_SKIPPED_DIRS = {"__pycache__", ".git", ".venv", "node_modules"}


class PluginError(ValueError):
    """A plugin that cannot be read or imported; the message names it and the fix."""


@dataclass(frozen=True)
class PluginSource:
    """A plugin's code as stored with its study: the files, their hash, the package they import as."""

    ref: str  # as the spec names it: a path, or "entry_point:<name>"
    package: str  # the importable name: normlab_plugin_<name>_<sha8>, or an installed module's own
    sha256: str
    files: Mapping[str, str] = field(default_factory=dict)  # path within the package -> text
    distribution: str | None = None  # "name version" of an installed plugin

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "package": self.package,
            "sha256": self.sha256,
            "files": dict(self.files),
            "distribution": self.distribution,
        }

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> PluginSource:
        """The source a checked `plugins` entry of a stored spec holds."""
        files = dict(entry.get("files") or {})
        return cls(entry_ref(entry), entry["package"], entry["sha256"], files, entry.get("distribution"))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PluginSource:
        return cls(
            data["ref"], data["package"], data["sha256"], dict(data["files"]), data.get("distribution")
        )

    @property
    def label(self) -> str:
        """What its records name as their source: the reference and the source's hash."""
        return f"{self.ref}@{self.sha256[:8]}"

    @property
    def shipped(self) -> bool:
        """Whether the stored files travel with the study (False: an installed distribution)."""
        return self.distribution is None


def entry_ref(entry: Mapping[str, Any]) -> str:
    """How a `plugins` entry of a spec names its plugin: its path, or `entry_point:<name>`."""
    return entry.get("path") or f"entry_point:{entry.get('entry_point')}"


def provided_names(entry: Mapping[str, Any]) -> dict[str, list[str]]:
    """Section -> the names a checked `plugins` entry registered (sections it left empty left out)."""
    provides = entry.get("provides") or {}
    return {section: [r["name"] for r in records] for section, records in provides.items() if records}


def _hash(files: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()


def _identifier(stem: str) -> str:
    cleaned = re.sub(r"\W", "_", stem).strip("_").lower() or "plugin"
    return cleaned[:40]


def _python_files(root: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        if _SKIPPED_DIRS & set(path.relative_to(root).parts):
            continue
        files[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
    return files


def source_from_files(ref: str, files: Mapping[str, str]) -> PluginSource:
    """A plugin sent inline (`normlab submit` reads a local plugin and sends its files)."""
    if not files or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise PluginError(f"plugin {ref!r}: `files` maps paths within the package to their text")
    bad = [
        name for name in files if name.startswith("/") or ".." in Path(name).parts or not name.endswith(".py")
    ]
    if bad:
        raise PluginError(
            f"plugin {ref!r}: file names must be relative .py paths inside the package, got {bad}"
        )
    if "__init__.py" not in files:
        raise PluginError(
            f"plugin {ref!r}: the files have no __init__.py (a single file is sent as __init__.py)"
        )
    size = sum(len(text.encode()) for text in files.values())
    if size > MAX_PLUGIN_BYTES:
        raise PluginError(f"plugin {ref!r}: {size:,} bytes of source, over the {MAX_PLUGIN_BYTES:,} allowed")
    sha = _hash(files)
    stem = Path(ref).stem if Path(ref).suffix == ".py" else Path(ref).name
    return PluginSource(ref, f"{PACKAGE_PREFIX}{_identifier(stem)}_{sha[:8]}", sha, dict(files))


def read_plugin(ref: str, base_dir: Path | None = None) -> PluginSource:
    """The source of the plugin at `ref` (a .py file or a package directory, relative to `base_dir`)."""
    path = Path(ref).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.is_file():
        if path.suffix != ".py":
            raise PluginError(f"plugin {ref!r}: a plugin file must be Python source (.py)")
        files = {"__init__.py": path.read_text(encoding="utf-8")}
    elif path.is_dir():
        if not (path / "__init__.py").is_file():
            raise PluginError(f"plugin {ref!r}: a plugin directory must be a package (add an __init__.py)")
        files = _python_files(path)
    else:
        raise PluginError(f"plugin {ref!r}: no such file or directory ({path})")
    return source_from_files(ref, files)


def _entry_point(name: str) -> importlib.metadata.EntryPoint:
    for group in ENTRY_POINT_GROUPS:
        for entry in importlib.metadata.entry_points(group=group):
            if entry.name == name:
                return entry
    known = sorted({e.name for g in ENTRY_POINT_GROUPS for e in importlib.metadata.entry_points(group=g)})
    raise PluginError(
        f"no installed plugin announces the entry point {name!r} (groups {', '.join(ENTRY_POINT_GROUPS)}); "
        f"installed: {', '.join(known) or 'none'}"
    )


def read_entry_point(name: str) -> PluginSource:
    """The source of an installed plugin, for the record (it loads from the install): the files of its
    top-level package, found without running them."""
    entry = _entry_point(name)
    top = entry.module.split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin is None:
        raise PluginError(f"entry point {name!r} names module {entry.module!r}, which is not installed here")
    origin = Path(spec.origin)
    files = (
        _python_files(origin.parent) if spec.submodule_search_locations else {origin.name: origin.read_text()}
    )
    dist = entry.dist
    distribution = f"{dist.metadata['Name']} {dist.version}" if dist is not None else entry.module
    return PluginSource(f"entry_point:{name}", entry.module, _hash(files), files, distribution)


def write_package(source: PluginSource, root: Path) -> Path:
    """Write a stored plugin as its package under `root` (what Ray ships); returns the package's dir."""
    package_dir = root / source.package
    for name, text in source.files.items():
        target = package_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    return package_dir


def import_plugin(source: PluginSource, root: Path | None = None) -> ModuleType:
    """Import a plugin so that its records register (again, if another plugin's activation dropped them).

    The package is found on sys.path (Ray's py_modules put it there) or, failing that, written under
    `root` first. An installed plugin loads through its entry point."""
    module_name = source.package
    if module_name in sys.modules and not any(records_of(source.label).values()):
        _forget_modules(
            module_name
        )  # imported before, its records since dropped: run its registrations again
    with registering_as(source.label):
        if not source.shipped:
            entry = _entry_point(source.ref.removeprefix("entry_point:"))
            loaded = entry.load()
            if callable(loaded) and not isinstance(loaded, ModuleType):
                loaded()
            return sys.modules[entry.module]
        if module_name in sys.modules:
            return sys.modules[module_name]
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name or root is None:
                raise
        write_package(source, root)
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        importlib.invalidate_caches()
        return importlib.import_module(module_name)


def keep_only_plugins(labels: Iterable[str]) -> None:
    """Drop every plugin record but those of `labels` (built-ins stay): a long-lived process (a warm trial
    host, the warm driver server) that serves one study after another holds one study's plugins at a time,
    so two versions of a plugin never clash on a name."""
    keep = set(labels) | {BUILTIN}
    for section in RECORD_TYPES:
        for source in {r.source for r in REGISTRY.section(section)} - keep:
            REGISTRY.section(section).remove_source(source)


def _forget_modules(package: str) -> None:
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def records_of(source_ref: str) -> dict[str, list[dict[str, Any]]]:
    """The facts of every record `source_ref` registered, by section (what a plugin check reports)."""
    return {
        section: [to_facts(r) for r in REGISTRY.section(section) if r.source == source_ref]
        for section in RECORD_TYPES
    }


def records_from_facts(facts: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[Record]:
    """The records `records_of` reported, rebuilt without their code."""
    return [from_facts(section, item) for section, items in facts.items() for item in items]


def changed_on_disk(entry: Mapping[str, Any], base_dir: Path | None = None) -> str | None:
    """Whether a stored plugin's path now holds other source than the study ran: the sentence that says
    so, or None (unchanged, or a path this machine cannot read, such as a client's inline plugin)."""
    path, sha = entry.get("path"), entry.get("sha256")
    if not path or not sha:
        return None
    try:
        now = read_plugin(path, base_dir)
    except (PluginError, OSError, UnicodeDecodeError):
        return None
    if now.sha256 == sha:
        return None
    return (
        f"plugin {path} changed on disk since the study was submitted (sha256 {sha[:12]} then, "
        f"{now.sha256[:12]} now); the study runs, and resumes with, the source it stored"
    )
