"""Plugins as stored source: read from a file or a package, hashed, written back as a package named after
the hash, imported so that their records register, and swapped for another study's in a long-lived
process."""

from __future__ import annotations

import sys

import pytest

from normlab import REGISTRY
from normlab.loading import (
    PluginError,
    changed_on_disk,
    import_plugin,
    keep_only_plugins,
    read_plugin,
    records_of,
    source_from_files,
)

PLUGIN = 'from normlab.plugin import method\nmethod("{name}", norm="layernorm")\n'


@pytest.fixture(autouse=True)
def _forget_plugins():
    yield
    keep_only_plugins(())


def test_a_file_is_stored_as_a_package_named_after_its_hash(tmp_path):
    path = tmp_path / "my-norm.py"
    path.write_text(PLUGIN.format(name="m1"))
    source = read_plugin(str(path))
    assert source.files == {"__init__.py": path.read_text()}
    assert source.package == f"normlab_plugin_my_norm_{source.sha256[:8]}"
    path.write_text(PLUGIN.format(name="m2"))
    assert read_plugin(str(path)).sha256 != source.sha256


def test_a_package_keeps_its_python_files_and_needs_an_init(tmp_path):
    package = tmp_path / "mypkg"
    (package / "layers").mkdir(parents=True)
    (package / "layers" / "rms.py").write_text("X = 1\n")
    with pytest.raises(PluginError, match=r"add an __init__\.py"):
        read_plugin(str(package))
    (package / "__init__.py").write_text("from .layers import rms\n")
    assert set(read_plugin(str(package)).files) == {"__init__.py", "layers/rms.py"}


@pytest.mark.parametrize(
    ("files", "message"),
    [({"../evil.py": "x"}, "relative .py paths"), ({"a.py": "x"}, "no __init__.py"), ({}, "maps paths")],
)
def test_inline_files_are_refused_unless_they_form_a_package(files, message):
    with pytest.raises(PluginError, match=message):
        source_from_files("p.py", files)


def test_importing_registers_its_records_under_its_label_and_a_second_import_is_a_no_op(tmp_path):
    source = source_from_files("p.py", {"__init__.py": PLUGIN.format(name="loaded_method")})
    import_plugin(source, tmp_path)
    import_plugin(source, tmp_path)
    assert REGISTRY.methods.get("loaded_method").source == source.label
    assert records_of(source.label)["methods"][0]["name"] == "loaded_method"
    assert (tmp_path / source.package / "__init__.py").exists()


def test_another_study_s_version_of_a_plugin_replaces_it_in_a_long_lived_process(tmp_path):
    first = source_from_files("p.py", {"__init__.py": PLUGIN.format(name="same") + "# v1\n"})
    second = source_from_files("p.py", {"__init__.py": PLUGIN.format(name="same") + "# v2\n"})
    import_plugin(first, tmp_path)
    keep_only_plugins([second.label])
    import_plugin(second, tmp_path)
    assert REGISTRY.methods.get("same").source == second.label
    keep_only_plugins([first.label])  # back to the first study: its module is re-run, not just cached
    import_plugin(first, tmp_path)
    assert REGISTRY.methods.get("same").source == first.label
    assert first.package in sys.modules


def test_a_plugin_whose_path_changed_says_so(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(PLUGIN.format(name="x"))
    stored = read_plugin(str(path))
    entry = {"path": str(path), "sha256": stored.sha256}
    assert changed_on_disk(entry) is None
    path.write_text(PLUGIN.format(name="y"))
    assert "changed on disk since the study was submitted" in (changed_on_disk(entry) or "")
    assert changed_on_disk({"path": str(tmp_path / "gone.py"), "sha256": stored.sha256}) is None
