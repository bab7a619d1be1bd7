"""Markers that say what a test costs, which the suite applies itself; the migrated database tests copy.

The tiers (README, "Testing"): `make test-fast` runs the in-process tests only, in parallel; `make test`
runs everything. The markers that choose between them (registered in pyproject.toml) are added here at
collection, so a new test gets the right one from what it uses rather than from someone remembering:

- `process`: the test starts processes, itself or through a fixture: a fixture in PROCESS_FIXTURES
  (MLflow, Ray, `normlab serve`, PostgreSQL), a module in PROCESS_MODULES, or code of its own (the test
  function, a fixture or a helper under tests/ that it calls) that starts `sys.executable`.
- `browser`: the test drives the pages in headless Chromium (tests/browser.py; it skips, saying why,
  where no Chromium or Playwright is found); such a test is `process` and `serial` too.
- `triton_interp`: the Triton kernel tests, which run under Triton's interpreter (minutes) without CUDA.
- `serial`: the test starts Ray or the whole stack, or holds a server to time bounds (under load, in an
  outage, while it stops): `make test` runs these one after another, after the rest has run on every
  core (scripts/run_tests.sh).

Both make targets spread tests over xdist workers by module (`--dist loadfile`): a module's tests run in
order on one worker, as they were written to (module-scoped fixtures, tests that count what the tests
before them did), the costliest modules first. A session-scoped server (PostgreSQL, MLflow) starts once
per worker that needs it.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Fixtures that start a server process (or a cluster) for the tests that use them.
PROCESS_FIXTURES = frozenset(
    {"mlflow_server", "ray_cluster", "running_service", "postgres_server", "chromium"}
)
# Fixtures that drive a real browser (tests/browser.py): headless Chromium, its own processes.
BROWSER_FIXTURES = frozenset({"chromium"})
# Modules whose tests start processes through product code the check below does not read: an embedded
# PostgreSQL, the local stack, torch.compile (Inductor compiles in a pool of worker processes: tens of
# seconds a test on 2 cores).
PROCESS_MODULES = frozenset(
    {
        "studies/store/test_postgres_server.py",
        "service/stack/test_local_stack.py",
        "workers/training/test_compile.py",
        "workers/training/test_seed_batch_compile.py",
    }
)
TRITON_INTERPRETER_MODULES = frozenset(
    {"models/norms/test_mixed_triton.py", "models/norms/test_autonorm_triton.py"}
)
# Tests that start Ray or `normlab serve`, or hold a server to time bounds under load, in an outage or
# while it stops: one at a time, each with the machine to itself.
# A browser test waits on a live page against a real server: on a busy machine its waits would stretch.
SERIAL_FIXTURES = frozenset({"ray_cluster", "running_service", "chromium"})
SERIAL_PATHS = (
    "e2e/",
    "service/stack/test_local_stack.py",
    "service/stack/test_stop_under_load.py",
    "service/api/test_burst.py",
    "service/api/test_body_timeout.py",
    "workers/tracking/test_outage.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    interpreted_triton = _any_in(items, TRITON_INTERPRETER_MODULES) and _triton_runs_interpreted()
    for item in items:
        path = _relative(item)
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & PROCESS_FIXTURES or path in PROCESS_MODULES or _starts_processes(item):
            item.add_marker(pytest.mark.process)
        if fixtures & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if interpreted_triton and path in TRITON_INTERPRETER_MODULES:
            item.add_marker(pytest.mark.triton_interp)
        if fixtures & SERIAL_FIXTURES or path.startswith(SERIAL_PATHS):
            item.add_marker(pytest.mark.serial)
    if hasattr(config, "workerinput"):  # an xdist worker: the scheduler hands out modules in this order
        _costliest_modules_first(items)


def _costliest_modules_first(items: list[pytest.Item]) -> None:
    """Modules with a slow test first, then those with a process or offline-data test, then the rest,
    each group in collection order and every module's tests in theirs. xdist (`--dist loadfile
    --no-loadscope-reorder`) hands modules out in this order: the long ones start at once, on different
    workers, instead of ending the run alone on one."""
    rank: dict[Path, int] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            cost = 0
        elif item.get_closest_marker("process") or item.get_closest_marker("offline_data"):
            cost = 1
        else:
            cost = 2
        rank[item.path] = min(rank.get(item.path, cost), cost)
    items.sort(key=lambda item: rank[item.path])  # stable


def _relative(item: pytest.Item) -> str:
    try:
        return item.path.relative_to(TESTS).as_posix()
    except ValueError:
        return item.path.as_posix()


def _any_in(items: list[pytest.Item], modules: frozenset[str]) -> bool:
    return any(_relative(item) in modules for item in items)


def _triton_runs_interpreted() -> bool:
    """Whether the Triton kernels run under the interpreter here (no CUDA device)."""
    import torch

    return not torch.cuda.is_available()


def _starts_processes(item: pytest.Item) -> bool:
    """Whether the test's own code, or a fixture defined under tests/, names `sys.executable` (through
    nested functions and helpers of tests/ modules it calls). A subprocess of another program (`true`,
    `bash -n`) costs little and does not count."""
    functions: list[Callable] = []
    if isinstance(item, pytest.Function):
        functions.append(item.function)
    fixture_info = getattr(item, "_fixtureinfo", None)
    if fixture_info is not None:
        for definitions in fixture_info.name2fixturedefs.values():
            functions.extend(definition.func for definition in definitions)
    return any(_code_spawns(function, seen=set()) for function in functions if _in_tests(function))


def _in_tests(function: Callable) -> bool:
    return getattr(function, "__module__", "").startswith("tests.")


def _code_spawns(function: Callable, *, seen: set[types.CodeType], depth: int = 0) -> bool:
    function = getattr(function, "__wrapped__", function)
    code = getattr(function, "__code__", None)
    if code is None or code in seen or depth > 3:
        return False
    seen.add(code)
    if _spawns(code):
        return True
    module_globals = getattr(function, "__globals__", {})
    helpers = (module_globals.get(name) for name in _all_names(code))
    return any(
        _code_spawns(helper, seen=seen, depth=depth + 1)
        for helper in helpers
        if isinstance(helper, types.FunctionType) and _in_tests(helper)
    )


def _spawns(code: types.CodeType) -> bool:
    return {"sys", "executable"} <= _all_names(code)


def _all_names(code: types.CodeType) -> set[str]:
    """The global and attribute names a code object and the functions nested in it use."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _all_names(constant)
    return names


pytest_plugins = ["tests.database", "tests.browser"]
