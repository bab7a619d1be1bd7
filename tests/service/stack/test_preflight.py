"""Every port the local stack listens on comes from a setting, and one already taken is a one-line error
naming the port and the setting before anything starts (service.stack.preflight, service.settings)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import service.stack.launcher as launcher
from service.settings import RAY_PORT_OFFSETS, RAY_PORT_RANGE, Settings
from service.stack.launcher import local_stack
from service.stack.preflight import PortUnavailableError, check_ports, planned_ports, ray_head_ports
from service.stack.processes import free_port, free_port_range
from tests.service.stack.heads import default_head


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith("NORMLAB_") or name in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "DATABASE_URL"):
            monkeypatch.delenv(name)


def _base() -> int:
    # A whole free range, below Linux's ephemeral range (32768+) where the kernel's own picks come from.
    return free_port_range(RAY_PORT_RANGE)


def _settings(tmp_path: Path, **changes) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", ray_temp_dir=tmp_path / "ray", **changes)


@pytest.fixture
def held() -> Iterator[socket.socket]:
    """A port another process listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder


def _port(holder: socket.socket) -> int:
    return int(holder.getsockname()[1])


def test_one_base_setting_gives_the_stack_a_contiguous_range_of_ray_ports(tmp_path):
    base = _base()
    settings = _settings(tmp_path, ray_port_base=base)
    ports = [port for entry in ray_head_ports(settings) for port in entry.ports]
    assert sorted(ports) == sorted(set(ports)), "each port is named once"
    assert min(ports) == base and max(ports) == base + RAY_PORT_RANGE - 1
    assert settings.ray_dashboard_url == f"http://127.0.0.1:{base + RAY_PORT_OFFSETS['ray_dashboard_port']}"


def test_a_port_set_explicitly_wins_over_the_base(tmp_path, monkeypatch):
    monkeypatch.setenv("NORMLAB_RAY_PORT_BASE", "21000")
    monkeypatch.setenv("NORMLAB_RAY_DASHBOARD_PORT", "8265")
    settings = Settings(_env_file=None, data_dir=tmp_path)
    assert (settings.ray_gcs_port, settings.ray_dashboard_port, settings.ray_node_manager_port) == (
        21000,
        8265,
        21004,
    )


def test_the_default_ports_lie_outside_linuxs_ephemeral_range_and_never_overlap(tmp_path):
    ports = [port for entry in ray_head_ports(_settings(tmp_path)) for port in entry.ports]
    assert len(ports) == len(set(ports))
    assert max(ports) < 32768  # where the kernel picks ports for outgoing connections


def test_the_ray_head_is_told_every_port_the_settings_name(tmp_path):
    settings = _settings(tmp_path, ray_port_base=_base())
    head = launcher._ray_head(settings, "token", tmp_path / "ray")
    flags = " ".join(head.argv)
    told = {int(arg.split("=", 1)[1]) for arg in head.argv if arg.startswith("--") and "port=" in arg} | {
        int(head.env["DASHBOARD_METRIC_PORT"])
    }
    singles = {entry.port for entry in ray_head_ports(settings) if entry.count == 1}
    assert singles <= told, flags
    assert "--ray-client-server-port" not in flags  # Ray's client server runs only when a port is set


def test_a_head_built_without_the_extra_ports_leaves_them_to_ray():
    assert not any(arg.startswith("--node-manager-port") for arg in default_head().argv)


def test_a_port_another_process_holds_is_one_line_naming_port_and_setting(tmp_path, held):
    settings = _settings(tmp_path, ray_port_base=_base(), ray_node_manager_port=_port(held))
    with pytest.raises(PortUnavailableError) as raised:
        check_ports(planned_ports(settings, mlflow=False, ray=True, api=False))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        f"port {_port(held)} (NORMLAB_RAY_NODE_MANAGER_PORT) on 127.0.0.1 is already in use"
    )
    assert "set NORMLAB_RAY_NODE_MANAGER_PORT to a free port" in message


def test_a_taken_worker_port_names_the_range_and_its_settings(tmp_path, held):
    port = _port(held)
    settings = _settings(
        tmp_path, ray_port_base=_base(), ray_min_worker_port=port - 5, ray_max_worker_port=port + 5
    )
    # The first taken port of the range is named: the held one, or one another process of the machine holds.
    taken = (
        rf"^port \d+ \(in NORMLAB_RAY_MIN_WORKER_PORT\.\.NORMLAB_RAY_MAX_WORKER_PORT, {port - 5}-{port + 5}\)"
    )
    with pytest.raises(PortUnavailableError, match=taken):
        check_ports(planned_ports(settings, mlflow=False, ray=True, api=False))


def test_two_settings_naming_one_port_is_an_error_before_any_bind(tmp_path):
    base = _base()
    settings = _settings(tmp_path, ray_port_base=base, mlflow_port=base + 4)
    with pytest.raises(PortUnavailableError) as raised:
        check_ports(planned_ports(settings, mlflow=True, ray=True, api=False))
    assert str(raised.value) == (
        f"port {base + 4} (NORMLAB_RAY_NODE_MANAGER_PORT) is also port {base + 4} (NORMLAB_MLFLOW_PORT): "
        "give each its own port"
    )


def test_free_ports_pass(tmp_path):
    settings = _settings(tmp_path, ray_port_base=_base(), mlflow_port=free_port(), api_port=free_port())
    check_ports(planned_ports(settings, mlflow=True, ray=True, api=True))


def test_serve_refuses_to_start_anything_while_one_of_its_ports_is_taken(tmp_path, held, monkeypatch):
    started: list[str] = []
    monkeypatch.setattr(launcher, "_start_mlflow", lambda *args: started.append("mlflow"))
    monkeypatch.setattr(launcher, "_start_ray", lambda *args: started.append("ray"))
    settings = _settings(
        tmp_path,
        ray_port_base=_base(),
        mlflow_port=free_port(),
        ray_dashboard_agent_listen_port=_port(held),  # the port whose loss left a head refusing every job
    )
    with (
        pytest.raises(PortUnavailableError, match="NORMLAB_RAY_DASHBOARD_AGENT_LISTEN_PORT"),
        local_stack(settings),
    ):
        pass
    assert started == []
    assert not (tmp_path / "data" / "logs").exists()  # no process was started, so none wrote a log


def test_the_api_port_is_checked_with_the_rest_when_serve_asks(tmp_path, held):
    settings = _settings(tmp_path, ray_port_base=_base(), mlflow_port=free_port(), api_port=_port(held))
    check_ports(planned_ports(settings, mlflow=True, ray=True, api=False))
    with pytest.raises(PortUnavailableError, match=r"\(NORMLAB_API_PORT\)"):
        check_ports(planned_ports(settings, mlflow=True, ray=True, api=True))
