"""The CLI's fixture: `wired`, the `normlab` commands (and scripts built on service.cli.client) pointed at
the test app (tests/service/conftest.py), its HTTP going through FastAPI's TestClient."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from rich.console import Console

import service.cli.client as api_client
import service.cli.commands as cli
from tests.service.conftest import API_TOKEN


@pytest.fixture
def wired(monkeypatch, app, settings):
    """Point the CLI at the test app: same data dir and token, HTTP through TestClient, wide consoles."""
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("NORMLAB_API_URL", "http://normlab.test")
    monkeypatch.setenv("NORMLAB_API_TOKEN", API_TOKEN)
    monkeypatch.setattr(cli, "console", Console(width=200))
    monkeypatch.setattr(api_client, "console", Console(width=200))
    monkeypatch.setattr(cli, "err_console", Console(width=200, stderr=True))
    monkeypatch.setattr(api_client, "err_console", Console(width=200, stderr=True))

    def client(api_url, token):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return TestClient(app, base_url=api_url, headers=headers)

    monkeypatch.setattr(cli, "make_http_client", client)
    monkeypatch.setattr(api_client, "make_http_client", client)
    return app
