"""The local Ray head is `ray start` trimmed (service.stack.ray_start): a dashboard that loads only the modules
the stack uses, no client server unless asked for, and a lean watcher where `--block` waited."""

from __future__ import annotations

from pathlib import Path

from service.stack.ray_start import DASHBOARD_MODULES, wants_client_server, watcher_command, with_modules
from tests.service.stack.heads import default_head


def test_the_dashboard_is_told_to_load_the_jobs_api_and_the_views_the_stack_uses():
    command = with_modules(["python", "dashboard.py", "--port=8265"])
    assert command[-1] == f"--modules-to-load={','.join(DASHBOARD_MODULES)}"
    assert "JobHead" in DASHBOARD_MODULES  # the Jobs API every study is submitted through


def test_a_dashboard_already_told_which_modules_to_load_is_left_as_it_is():
    command = ["python", "dashboard.py", "--modules-to-load=UsageStatsHead"]
    assert with_modules(command) == command


def test_the_local_head_starts_through_the_wrapper_without_the_autoscaler():
    head = default_head()
    assert head.argv[1:5] == ["-m", "service.stack.ray_start", "start", "--head"]
    assert "--no-monitor" in head.argv and "--block" in head.argv


def test_the_head_runs_rays_client_server_only_when_a_port_is_set_for_it():
    assert not wants_client_server(default_head().argv)
    with_port = default_head(client_server_port=10001).argv
    assert "--ray-client-server-port=10001" in with_port and wants_client_server(with_port)
    assert wants_client_server(["start", "--ray-client-server-port", "10001"])


def test_the_watcher_is_given_each_process_of_the_head_by_kind():
    command = watcher_command({"raylet": [12], "gcs_server": [13], "dashboard": [14]})
    assert command[-3:] == ["raylet=12", "gcs_server=13", "dashboard=14"]
    assert Path(command[3]).name == "ray_watch.py" and Path(command[3]).is_file()
