"""`normlab submit` with a spec that names a plugin: the plugin's files are read beside the spec and sent
inline, with the plugin token; without that token nothing is sent and the message says where it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

import service.cli.commands as cli
from service.cli.plugin_files import inline_plugins, names_extensions

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plugins"
runner = CliRunner()


def test_the_example_spec_names_a_plugin_and_its_file_is_read_beside_the_spec():
    text = (EXAMPLES / "rmsnorm_study.yaml").read_text()
    assert names_extensions(text, "application/yaml")
    sent = json.loads(inline_plugins(text, "application/yaml", EXAMPLES))
    assert sent["plugins"] == [
        {"path": "rmsnorm.py", "files": {"__init__.py": (EXAMPLES / "rmsnorm.py").read_text()}}
    ]


def test_without_the_plugin_token_nothing_is_sent(monkeypatch, tmp_path):
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NORMLAB_API_URL", "http://normlab.test")
    monkeypatch.setenv("NORMLAB_API_TOKEN", "t")
    monkeypatch.delenv("NORMLAB_PLUGIN_TOKEN", raising=False)
    monkeypatch.setattr(
        cli, "submit_spec_text", lambda *a, **k: (_ for _ in ()).throw(AssertionError("sent"))
    )
    for name in ("rmsnorm_study.yaml", "rmsnorm.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    result = runner.invoke(cli.app, ["submit", str(tmp_path / "rmsnorm_study.yaml")])
    assert result.exit_code == 1
    assert "plugin token" in result.output and "NORMLAB_PLUGIN_TOKEN" in result.output


def test_a_missing_plugin_file_is_named_with_where_it_was_looked_for(monkeypatch, tmp_path):
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NORMLAB_PLUGIN_TOKEN", "p")
    shutil.copy(EXAMPLES / "rmsnorm_study.yaml", tmp_path / "spec.yaml")
    result = runner.invoke(cli.app, ["submit", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 1
    assert "rmsnorm.py" in result.output and "relative to the spec file's folder" in result.output
