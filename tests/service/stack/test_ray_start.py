"""The local Ray head's dashboard loads only the modules the stack uses (service.stack.ray_start)."""

from __future__ import annotations

from pathlib import Path

from service.stack.local_stack import ray_head
from service.stack.ray_start import DASHBOARD_MODULES, with_modules


def test_the_dashboard_is_told_to_load_the_jobs_api_and_the_views_the_stack_uses():
    command = with_modules(["python", "dashboard.py", "--port=8265"])
    assert command[-1] == f"--modules-to-load={','.join(DASHBOARD_MODULES)}"
    assert "JobHead" in DASHBOARD_MODULES  # the Jobs API every study is submitted through


def test_a_dashboard_already_told_which_modules_to_load_is_left_as_it_is():
    command = ["python", "dashboard.py", "--modules-to-load=UsageStatsHead"]
    assert with_modules(command) == command


def test_the_local_head_starts_through_the_wrapper_without_the_autoscaler():
    head = ray_head(
        data_dir=Path("/tmp"),
        token="t",
        gcs_port=6390,
        dashboard_port=8265,
        dashboard_agent_listen_port=52365,
        client_server_port=10001,
        min_worker_port=10002,
        max_worker_port=10999,
    )
    assert head.argv[1:5] == ["-m", "service.stack.ray_start", "start", "--head"]
    assert "--no-monitor" in head.argv and "--block" in head.argv
