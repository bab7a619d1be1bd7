"""An installed distribution announces its plugin through an entry point: found by name in any of the
normlab groups, its files kept for the record, its records registered under `entry_point:<name>`."""

from __future__ import annotations

import pytest

from normlab import REGISTRY
from normlab.loading import PluginError, import_plugin, keep_only_plugins, read_entry_point


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A distribution `scalenorm-plugin 0.3` installed on sys.path, announcing `scalenorm` in
    normlab.methods."""
    package = tmp_path / "scalenorm_plugin"
    package.mkdir()
    (package / "__init__.py").write_text(
        'from normlab.plugin import method\nmethod("scalenorm_method", norm="layernorm")\n'
    )
    info = tmp_path / "scalenorm_plugin-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: scalenorm-plugin\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[normlab.methods]\nscalenorm = scalenorm_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    keep_only_plugins(())


def test_an_entry_point_is_read_with_its_distribution_and_files(installed):
    source = read_entry_point("scalenorm")
    assert source.ref == "entry_point:scalenorm"
    assert source.distribution == "scalenorm-plugin 0.3"
    assert set(source.files) == {"__init__.py"} and not source.shipped


def test_importing_it_registers_its_records(installed):
    import_plugin(read_entry_point("scalenorm"))
    assert REGISTRY.methods.get("scalenorm_method").source.startswith("entry_point:scalenorm@")


def test_an_entry_point_no_distribution_announces_is_an_error_listing_the_installed_ones(installed):
    with pytest.raises(PluginError, match=r"installed: .*scalenorm"):
        read_entry_point("nope")
