"""What the driver's phase tests share: the Tuner a phase would build, captured instead of run."""

from __future__ import annotations

import pytest

from workers.driver import study as driver_study


class Stop(Exception):
    """Ends the phase where the Tuner would start: the captured arguments are what is tested."""


@pytest.fixture
def tuners(monkeypatch):
    seen: list[dict] = []

    def tuner(path, trainable, **kwargs):
        seen.append({"path": path, **kwargs})
        raise Stop

    monkeypatch.setattr(driver_study, "_tuner", tuner)
    monkeypatch.setattr(driver_study, "_run_config", lambda *args, **kwargs: None)
    monkeypatch.setattr(driver_study.ray, "is_initialized", lambda: True)
    monkeypatch.setattr(driver_study.ray, "cluster_resources", lambda: {"CPU": 2.0})
    return seen
