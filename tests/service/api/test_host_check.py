"""The Host header check (service.api.host_check): the API answers only requests naming a host it serves, so a
web page cannot read it through DNS rebinding; what the CLI and the compose stack send still passes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

import service.cli.client as api_client
from service.api.app import create_app
from service.api.host_check import AllowedHosts, host_name
from service.settings import Settings
from tests.docker.compose_plan import load_plan
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import AUTH

REPO = Path(__file__).resolve().parents[3]
COMPOSE_ENV = {
    "POSTGRES_PASSWORD": "pg-secret",
    "NORMLAB_RAY_AUTH_TOKEN": "ray-secret",
    "NORMLAB_API_TOKEN": "api-secret",
    "MLFLOW_TRACKING_USERNAME": "tracker",
    "MLFLOW_TRACKING_PASSWORD": "mlflow-secret-pw",
}


@pytest.fixture
def host_settings(settings: Settings) -> Settings:
    """The test settings with the default allowed hosts (conftest adds TestClient's)."""
    return settings.model_copy(update={"allowed_hosts": []})


@pytest.fixture
def app_on(host_settings: Settings, dispatcher) -> Iterator:
    """A client factory for the app with `host_settings` (plus `changes`), calling it as `base_url`."""
    clients: list[TestClient] = []

    def client(base_url: str = "http://127.0.0.1:8000", **changes) -> TestClient:
        settings = host_settings.model_copy(update=changes)
        opened = TestClient(create_app(settings=settings, dispatcher=dispatcher), base_url=base_url)
        clients.append(opened.__enter__())
        return opened

    yield client
    for opened in clients:
        opened.__exit__(None, None, None)


def _submit(client: TestClient, **headers: str):
    return client.post(
        "/studies",
        content=QUICK_SPEC_YAML,
        headers={"Content-Type": "application/yaml", **AUTH, **headers},
    )


@pytest.mark.parametrize("path", ["/studies", "/healthz", "/results/digits", "/docs"])
def test_a_foreign_host_is_a_400_in_the_error_format(app_on, path):
    response = app_on().get(path, headers={"Host": "evil.example"})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "'evil.example'" in detail and "NORMLAB_ALLOWED_HOSTS" in detail


def test_a_foreign_host_stores_nothing_and_is_never_echoed_in_a_location(app_on):
    client = app_on()
    response = _submit(client, Host="evil.example:8000")
    assert response.status_code == 400
    assert "location" not in response.headers
    assert client.get("/studies").json() == []  # nothing was stored


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.0.0.1:8000", "localhost", "LOCALHOST:1234", "localhost.", "[::1]", "[::1]:8000"],
)
def test_loopback_hosts_pass_with_any_port(app_on, host):
    client = app_on()
    assert client.get("/healthz", headers={"Host": host}).status_code == 200
    response = _submit(client, Host=host)
    assert response.status_code == 201
    assert urlsplit(response.headers["location"]).netloc == host


@pytest.mark.parametrize("host", ["", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example"])
def test_names_that_merely_contain_a_loopback_name_are_refused(app_on, host):
    assert app_on().get("/healthz", headers={"Host": host}).status_code == 400


def test_the_setting_admits_named_hosts_and_subdomains(app_on):
    client = app_on(allowed_hosts=["normlab.example.org", "*.lab.example"])
    for host in ("normlab.example.org", "Normlab.Example.Org:443", "a.lab.example", "b.a.lab.example"):
        assert client.get("/healthz", headers={"Host": host}).status_code == 200, host
    for host in ("example.org", "lab.example", "evil.example"):
        assert client.get("/healthz", headers={"Host": host}).status_code == 400, host


def test_a_star_admits_every_host_explicitly(app_on):
    client = app_on(allowed_hosts=["*"])
    response = _submit(client, Host="anything.example")
    assert response.status_code == 201 and response.headers["location"].startswith("http://anything.example/")


def test_a_specific_api_host_is_served_but_a_wildcard_bind_is_not_a_name():
    specific = AllowedHosts.for_settings(Settings(_env_file=None, api_host="10.1.2.3"))
    assert specific.admits("10.1.2.3:8000")
    wildcard = AllowedHosts.for_settings(
        Settings(_env_file=None, api_host="0.0.0.0", api_url="http://api:8000")
    )
    assert not wildcard.admits("0.0.0.0") and wildcard.admits("api:8000")


def test_the_environment_takes_a_comma_separated_list(monkeypatch):
    monkeypatch.setenv("NORMLAB_ALLOWED_HOSTS", " api, normlab.example.org ,,")
    assert Settings(_env_file=None).allowed_hosts == ["api", "normlab.example.org"]


@pytest.mark.parametrize(
    ("header", "name"),
    [("Example.ORG:80", "example.org"), ("[::1]:8000", "::1"), ("::1", "::1"), ("host.", "host"), ("", "")],
)
def test_host_names_drop_the_port_case_and_trailing_dot(header, name):
    assert host_name(header) == name


# --- What the clients send ---


@pytest.mark.parametrize(
    "changes",
    [
        {},  # `normlab serve` and the CLI with the defaults
        {"api_port": 9000},
        {"api_host": "0.0.0.0"},  # the CLI inside the compose api container: http://0.0.0.0:8000
        {"api_url": "http://localhost:8000/"},
    ],
)
def test_the_cli_client_sends_a_host_the_api_it_calls_serves(host_settings, dispatcher, changes):
    settings = Settings(
        _env_file=None,
        data_dir=host_settings.data_dir,
        database_url=host_settings.database_url,
        api_token="cli-test-token",
        **changes,
    )
    app = create_app(settings=settings, dispatcher=dispatcher)
    http = api_client.make_http_client(str(settings.api_url), token=None)
    # The Host the CLI's own HTTP client would put on the wire, sent to the app in-process.
    host = http.build_request("GET", "/healthz").headers["host"]
    with TestClient(app) as client:
        assert client.get("/healthz", headers={"Host": host}).status_code == 200, host


@pytest.mark.parametrize("files", [["docker-compose.yml"], ["docker-compose.yml", "docker-compose.cpu.yml"]])
def test_the_compose_api_serves_its_service_name_published_port_and_healthcheck(files):
    plan = load_plan([REPO / name for name in files], COMPOSE_ENV, project="t")
    api = plan.service("api")[0]
    allowed = AllowedHosts.for_settings(Settings(_env_file=None, **_settings_env(api.environment)))
    assert allowed.admits("api:8000")  # other containers, by its service name
    assert all(allowed.admits(f"{port.host_ip}:{port.host_port}") for port in api.ports)  # the host
    assert api.healthcheck is not None
    healthcheck_url = re.search(r"https?://[^\s\"']+", api.healthcheck.shell_command)
    assert healthcheck_url and allowed.admits(urlsplit(healthcheck_url.group()).netloc)
    assert allowed.admits("0.0.0.0:8000")  # `docker compose exec api normlab ...` calls its api_url
    assert not allowed.admits("evil.example")


def test_compose_adds_the_proxy_names_from_env_and_keeps_the_service_name():
    env = {**COMPOSE_ENV, "NORMLAB_ALLOWED_HOSTS": "normlab.example.org"}
    api = load_plan([REPO / "docker-compose.yml"], env, project="t").service("api")[0]
    settings = Settings(_env_file=None, **_settings_env(api.environment))
    assert AllowedHosts.for_settings(settings).admits("normlab.example.org")
    assert AllowedHosts.for_settings(settings).admits("api")


def _settings_env(environment) -> dict[str, str]:
    """The container's NORMLAB_* variables as Settings fields (the rest are read by other names)."""
    return {
        name.removeprefix("NORMLAB_").lower(): value
        for name, value in environment.items()
        if name in ("NORMLAB_API_HOST", "NORMLAB_API_PORT", "NORMLAB_API_URL", "NORMLAB_ALLOWED_HOSTS")
    }
