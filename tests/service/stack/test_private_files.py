"""What `normlab serve` writes is its user's only (service.stack.private_files): a data dir left open is tightened
(and the one warning says what was), new files are 0600 under the serve process's umask, and the local Ray
head's temp dir lies in a private parent."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import service.cli.commands as cli
from service.stack.local_stack import default_ray_temp_dir
from service.stack.private_files import (
    PRIVATE_UMASK,
    PrivateDirError,
    prepare_data_dir,
    private_tmp_dir,
    private_umask,
    tighten,
)
from service.stack.processes import free_port
from tests.service.stack.heads import default_head


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def open_data_dir(tmp_path: Path) -> Path:
    """A data dir as an older `normlab serve` left it: 0755 dirs, 0644 files, a token already 0600."""
    root = tmp_path / "data"
    for directory in ("logs", "ray_results/study/trial/checkpoint_000001", "mlartifacts"):
        (root / directory).mkdir(parents=True)
    for name in (
        "normlab.db",
        "mlflow.db",
        "logs/mlflow.log",
        "ray_results/study/trial/checkpoint_000001/m.pt",
    ):
        (root / name).write_text("x")
        (root / name).chmod(0o644)
    (root / "api_token").write_text("t")
    (root / "api_token").chmod(0o600)
    for directory in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        directory.chmod(0o755)
    return root


def test_an_open_data_dir_and_everything_in_it_is_tightened(open_data_dir):
    tightened = tighten(open_data_dir)
    assert _mode(open_data_dir) == 0o700
    for path in open_data_dir.rglob("*"):
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path
    changed = {name for name, _old, _new in tightened.changed}
    assert {"the data dir", "normlab.db", "mlflow.db", "logs", "logs/mlflow.log"} <= changed
    assert "api_token" not in changed  # already private: not named
    assert ("normlab.db", 0o644, 0o600) in tightened.changed and not tightened.failed


def test_the_warning_is_one_line_naming_what_was_tightened(open_data_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="service.stack.private_files"):
        prepare_data_dir(open_data_dir)
    [record] = caplog.records
    message = record.getMessage()
    assert "\n" not in message and str(open_data_dir) in message
    assert "the data dir 0755 -> 0700" in message and "and " in message and "more" in message


def test_a_private_data_dir_is_left_alone_and_says_nothing(tmp_path, caplog):
    data_dir = tmp_path / "fresh" / "data"
    with caplog.at_level(logging.WARNING):
        assert not prepare_data_dir(data_dir)  # created 0700
        assert not prepare_data_dir(data_dir)  # and found so again
    assert _mode(data_dir) == 0o700 and caplog.records == []


def test_a_closed_data_dir_has_only_its_own_entries_tightened(tmp_path):
    # Inside a 0700 dir deeper entries are out of others' reach: a start does not walk every checkpoint.
    root = tmp_path / "data"
    (root / "deep" / "deeper").mkdir(parents=True)
    (root / "normlab.db").write_text("x")
    (root / "deep" / "deeper" / "old.log").write_text("x")
    for path in (root / "normlab.db", root / "deep", root / "deep" / "deeper" / "old.log"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    root.chmod(0o700)
    assert [name for name, _old, _new in tighten(root).changed] == ["deep", "normlab.db"]
    assert _mode(root / "deep" / "deeper" / "old.log") == 0o644


def test_symlinks_are_not_followed(tmp_path, open_data_dir):
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours to change")
    outside.chmod(0o644)
    (open_data_dir / "link").symlink_to(outside)
    tighten(open_data_dir)
    assert _mode(outside) == 0o644


def test_the_private_umask_makes_new_files_and_children_private_and_is_restored(tmp_path):
    before = os.umask(0o022)
    try:
        with private_umask():
            (tmp_path / "own").write_text("x")
            subprocess.run(  # a child, as MLflow and the Ray head are: it inherits the umask
                [
                    sys.executable,
                    "-c",
                    "import pathlib,sys; pathlib.Path(sys.argv[1]).mkdir()",
                    tmp_path / "d",
                ],
                check=True,
            )
        assert os.umask(0o022) == 0o022  # restored
    finally:
        os.umask(before)
    assert _mode(tmp_path / "own") == 0o600 and _mode(tmp_path / "d") == 0o700
    assert PRIVATE_UMASK == 0o077


def test_serve_makes_its_data_dir_and_database_private(monkeypatch, tmp_path, caplog):
    """`normlab serve` for real, as far as it gets without MLflow and Ray (--api-only fails after it has
    prepared the data dir and written the database), on a data dir an older version left open."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    (data_dir / "logs").mkdir()
    (data_dir / "logs").chmod(0o755)
    monkeypatch.chdir(tmp_path)  # no .env from the working tree
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(data_dir))
    monkeypatch.setenv("NORMLAB_API_PORT", str(free_port()))
    monkeypatch.setenv("NORMLAB_API_TOKEN", "private-files-test-token")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("RAY_ADDRESS", f"http://127.0.0.1:{free_port()}")
    before = os.umask(0o022)
    try:
        result = CliRunner().invoke(cli.app, ["serve", "--api-only"])
        assert os.umask(0o022) == 0o022  # serve gave the umask back
    finally:
        os.umask(before)
    assert result.exit_code == 1  # nothing answers: it stops after the preparation
    assert _mode(data_dir) == 0o700 and _mode(data_dir / "logs") == 0o700
    assert _mode(data_dir / "normlab.db") == 0o600  # written under the private umask


def test_the_ray_temp_dir_defaults_under_a_private_short_parent():
    temp_dir = default_ray_temp_dir(6390)
    parent = temp_dir.parent
    assert parent == private_tmp_dir() and parent.stat().st_uid == os.getuid()
    assert _mode(parent) == 0o700
    # Ray's session sockets (session_<date>_<time>_<pid>/sockets/plasma_store) must fit in ~107 bytes.
    socket = temp_dir / "session_2026-01-01_00-00-00_000000_4194304" / "sockets" / "plasma_store"
    assert len(str(socket)) < 107
    head = default_head()
    assert f"--temp-dir={temp_dir}" in head.argv


def test_a_loose_private_tmp_dir_is_tightened_and_a_foreign_one_refused(tmp_path):
    base = tmp_path / "tmp"
    base.mkdir()
    mine = base / f"normlab-{os.getuid()}"
    mine.mkdir()
    mine.chmod(0o777)
    assert private_tmp_dir(base) == mine and _mode(mine) == 0o700
    mine.rmdir()
    mine.symlink_to(tmp_path)  # someone else's trick: a link where the dir should be
    with pytest.raises(PrivateDirError, match="is not a directory of this user"):
        private_tmp_dir(base)
