"""The API burst benchmark's bookkeeping: what counts as shed, what as a failure, and its table."""

from __future__ import annotations

from collections import Counter

from benchmarks.bench_api_burst import Level, section


def _level(clients: int, outcomes: dict[str, int], throughput: float, latency_ms: float) -> Level:
    level = Level(clients, throughputs=[throughput], outcomes=Counter(outcomes))
    level.latencies_ms = [latency_ms] * sum(outcomes.values())
    return level


def test_a_503_is_shed_load_while_other_5xx_and_unanswered_requests_are_failures():
    level = _level(200, {"200": 5, "201": 2, "404": 1, "503": 3, "500": 1, "ReadTimeout": 2}, 10.0, 5.0)
    assert level.shed == 3
    assert level.failures == Counter({"500": 1, "ReadTimeout": 2})


def test_the_table_gives_each_level_against_one_client_of_its_backend():
    levels = [_level(1, {"200": 4}, 10.0, 20.0), _level(50, {"200": 3, "503": 1}, 15.0, 400.0)]
    table = section({"sqlite": levels}, rounds=1, requests=4)
    assert "| sqlite | 1 | 10 | 1.00x | 20 | 1.0x | 20 | 1.0x | 0 | 0 |" in table
    assert "| sqlite | 50 | 15 | 1.50x | 400 | 20.0x | 400 | 20.0x | 1 | 0 |" in table
