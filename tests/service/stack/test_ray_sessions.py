"""A stop removes the Ray session folders its head made under the Ray temp dir, and nothing of another
stack's there (service.stack.local_stack.RaySessions; tests/e2e/test_serve_ports_and_sessions.py does it with
a real head)."""

from __future__ import annotations

import os
from pathlib import Path

from service.stack.local_stack import RaySessions, StackRecord

HEAD_PID = 4242
GCS = "127.0.0.1:6390"


def _session(temp_dir: Path, stamp: str, pid: int) -> Path:
    folder = temp_dir / f"session_2025-06-01_{stamp}_{pid}"
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "raylet.out").write_text("log")
    (folder / "prom_metrics_service_discovery.json").write_text("[]")
    return folder


def _latest(temp_dir: Path, folder: Path) -> None:
    for name, target in (
        ("session_latest", folder),
        ("prom_metrics_service_discovery.json", folder / "prom_metrics_service_discovery.json"),
    ):
        link = temp_dir / name
        if link.is_symlink():
            link.unlink()
        os.symlink(target, link)


def test_the_heads_own_session_and_what_points_at_it_go_and_the_empty_temp_dir_with_them(tmp_path):
    temp_dir = tmp_path / "ray-6390"
    sessions = RaySessions.before_start(temp_dir, GCS)  # Ray makes the dir as the head starts
    ours = _session(temp_dir, "12-00-00_000001", HEAD_PID)
    _latest(temp_dir, ours)
    (temp_dir / "ray_current_cluster").write_text(GCS)
    sessions.head_pid = HEAD_PID
    assert sessions.remove() == [ours]
    assert not temp_dir.exists()


def test_another_stacks_sessions_and_older_ones_of_the_same_pid_stay(tmp_path):
    temp_dir = tmp_path / "ray"
    older = _session(temp_dir, "09-00-00_000001", HEAD_PID)  # an earlier head that had our pid now
    sessions = RaySessions.before_start(temp_dir, GCS)
    ours = _session(temp_dir, "12-00-00_000001", HEAD_PID)
    theirs = _session(temp_dir, "12-00-01_000001", 777)  # another stack given the same temp dir
    _latest(temp_dir, theirs)  # the latest session is theirs: its links stay
    (temp_dir / "ray_current_cluster").write_text("127.0.0.1:7000")
    sessions.head_pid = HEAD_PID
    assert sessions.remove() == [ours]
    assert older.exists() and theirs.exists() and not ours.exists()
    assert os.readlink(temp_dir / "session_latest") == str(theirs)
    assert (temp_dir / "prom_metrics_service_discovery.json").exists()
    assert (temp_dir / "ray_current_cluster").read_text() == "127.0.0.1:7000"


def test_the_links_to_our_session_go_while_another_stacks_session_stays(tmp_path):
    temp_dir = tmp_path / "ray"
    sessions = RaySessions.before_start(temp_dir, GCS)
    theirs = _session(temp_dir, "11-00-00_000001", 777)
    ours = _session(temp_dir, "12-00-00_000001", HEAD_PID)
    _latest(temp_dir, ours)
    (temp_dir / "ray_current_cluster").write_text(GCS)
    sessions.head_pid = HEAD_PID
    sessions.remove()
    assert sorted(p.name for p in temp_dir.iterdir()) == [theirs.name]


def test_a_head_that_never_ran_removes_nothing(tmp_path):
    temp_dir = tmp_path / "ray"
    sessions = RaySessions.before_start(temp_dir, GCS)
    theirs = _session(temp_dir, "11-00-00_000001", 777)
    assert sessions.remove() == []
    assert theirs.exists()


def test_a_guards_stop_removes_the_sessions_its_record_names(tmp_path):
    # The launcher was killed: its guard (or the next start) stops the stack from its record alone.
    temp_dir = tmp_path / "ray"
    sessions = RaySessions.before_start(temp_dir, GCS)
    ours = _session(temp_dir, "12-00-00_000001", HEAD_PID)
    theirs = _session(temp_dir, "12-00-01_000001", 777)
    sessions.head_pid = HEAD_PID
    record = StackRecord.for_this_launcher(tmp_path / "data")
    record.note_ray_sessions(sessions)
    read_back = StackRecord.read(record.path)  # what the guard reads
    assert read_back is not None and read_back.ray_sessions is not None
    read_back.stop_everything(grace_s=0.1)
    assert not ours.exists() and theirs.exists()
    assert not record.path.exists()
