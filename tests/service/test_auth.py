"""Tokens: taken from settings, else generated once into the data dir with owner-only permissions."""

from __future__ import annotations

import stat

from service.auth import ensure_api_token, ensure_ray_auth_token, read_api_token, token_matches
from service.settings import Settings


def _settings(tmp_path, **values) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", **values)


def test_the_configured_token_wins_and_nothing_is_written(tmp_path):
    settings = _settings(tmp_path, api_token="from-env")
    assert ensure_api_token(settings) == "from-env"
    assert not settings.api_token_path.exists()


def test_without_a_configured_token_one_is_generated_once_and_stored_owner_only(tmp_path):
    settings = _settings(tmp_path)
    first = ensure_api_token(settings)
    assert len(first) >= 40
    assert ensure_api_token(settings) == first  # stable across restarts
    assert read_api_token(settings) == first
    mode = stat.S_IMODE(settings.api_token_path.stat().st_mode)
    assert mode == 0o600


def test_an_empty_token_file_is_replaced(tmp_path):
    settings = _settings(tmp_path)
    settings.data_dir.mkdir(parents=True)
    settings.api_token_path.write_text("")
    assert ensure_api_token(settings)


def test_read_api_token_never_creates_one(tmp_path):
    settings = _settings(tmp_path)
    assert read_api_token(settings) is None
    assert not settings.api_token_path.exists()


def test_the_ray_token_is_separate_from_the_api_token(tmp_path):
    settings = _settings(tmp_path)
    assert ensure_ray_auth_token(settings) != ensure_api_token(settings)
    assert ensure_ray_auth_token(_settings(tmp_path, ray_auth_token="ray-secret")) == "ray-secret"


def test_token_matching_is_exact():
    assert token_matches("abc", "abc")
    assert not token_matches("abd", "abc")
    assert not token_matches("ab", "abc")
    assert not token_matches("", "abc")
    assert not token_matches(None, "abc")
