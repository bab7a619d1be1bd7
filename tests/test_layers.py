"""The layers of docs/architecture.md, checked on the imports of every product module.

    normlab   the registry, the floor under every layer: plain Python, imports no layer (every layer may
              import it; a plugin writes against it)
    models    torch only: knows nothing of studies, workers or service
    studies   the science in plain Python (spec, stats, tables, catalog, reports): no other layer
    workers   training, data, tracking and the study driver: models and studies, never the service; of
              the workers, only the study driver reaches the database (studies.store, as the API does):
              trial processes never touch it
    service   the API, the CLI, the local stack: studies, never models or workers (the API stays torch-free)

And no import cycle between product modules. Imports anywhere in a module count (a function-level import
is still a dependency); imports under `if TYPE_CHECKING:` do not (they never run). The results tables
(studies.tables) keep no cycle even counting those: the renderers depend on the table's data alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("normlab", "models", "studies", "workers", "service")
DRIVER_MAY_IMPORT = {"studies.store", "studies.store.results"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for layer in LAYERS
        for path in (ROOT / layer).rglob("*.py")
        if "versions" not in path.parts  # alembic migration scripts: loaded by alembic, not imported
    }


MODULES = _modules()


def _is_type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def imports_of(path: Path, *, type_checking: bool = False) -> set[str]:
    """Product modules `path` imports at run time (a package counts as its __init__); with
    `type_checking`, also those it imports for annotations only."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _is_type_checking_block(node) and not type_checking:
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(
                f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES
            )
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {name for name in found if name.split(".")[0] in LAYERS}


GRAPH = {name: imports_of(path) for name, path in MODULES.items()}
GRAPH_WITH_TYPE_CHECKING = {name: imports_of(path, type_checking=True) for name, path in MODULES.items()}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _layer_violation(module: str, target: str) -> str | None:
    source, dest = module.split(".")[0], target.split(".")[0]
    if source == dest or dest == "normlab":
        return None
    if source == "normlab":
        return "normlab is the floor: it imports no layer"
    if source == "models":
        return "models imports only torch and itself"
    if source == "studies":
        return "studies imports no other layer"
    if source == "service" and dest in ("models", "workers"):
        return "the service never imports models or workers (the API stays torch-free)"
    if source == "workers" and dest == "service":
        return "workers never import the service (the store they share lives in studies.store)"
    if source == "workers" and _within(target, "studies.store") and not _within(module, "workers.driver"):
        return "of the workers, only the study driver reaches the database (trial processes never do)"
    return None


def test_every_import_follows_the_layers():
    violations = [
        f"{module} imports {target}: {why}"
        for module, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if (why := _layer_violation(module, target)) is not None
    ]
    assert violations == []


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    # A package's __init__ importing its own submodules is how packages re-export, not a cycle.
    def edges(module: str) -> set[str]:
        return {t for t in graph.get(module, ()) if t in graph and not module.startswith(t + ".")}

    cycles: set[tuple[str, ...]] = set()
    for start in graph:
        stack = [(start, (start,))]
        while stack:
            node, path = stack.pop()
            for nxt in edges(node):
                if nxt == start:
                    turn = path.index(min(path))
                    cycles.add(path[turn:] + path[:turn])
                elif nxt not in path and len(path) < 8:
                    stack.append((nxt, (*path, nxt)))
    return sorted(" -> ".join(cycle) for cycle in cycles)


def test_no_product_module_takes_part_in_an_import_cycle():
    assert _cycles(GRAPH) == []


# The cycles through type-only imports kept on purpose: the spec's rules (rules.py and the three modules it
# gathers: the model's size, a sequential design, a plugin's layers) are StudySpec's own validators (StudySpec runs them),
# typed against the model they check.
TYPE_ONLY_CYCLES_BY_DESIGN = {
    "studies.spec.rules -> studies.spec.study",
    "studies.spec.rules -> studies.spec.rules_model -> studies.spec.study",
    "studies.spec.rules -> studies.spec.rules_sequential -> studies.spec.study",
    "studies.spec.rules -> studies.spec.rules_plugins -> studies.spec.study",
}


def test_no_cycle_even_through_type_checking_imports_but_the_specs_own_validators():
    assert set(_cycles(GRAPH_WITH_TYPE_CHECKING)) == TYPE_ONLY_CYCLES_BY_DESIGN


@pytest.mark.parametrize("rule", ["normlab", "models", "studies", "service", "workers", "trials"])
def test_the_checks_catch_a_violation(rule):
    bad = {
        "normlab": ("normlab.registry", "studies.methods"),
        "models": ("models.build", "studies.spec"),
        "studies": ("studies.stats", "workers.training"),
        "service": ("service.api.app", "models.norms"),
        "workers": ("workers.driver.study", "service.api.app"),
        "trials": ("workers.training.loop", "studies.store"),
    }[rule]
    assert _layer_violation(*bad) is not None


def test_evidence_is_below_the_tables_that_draw_it():
    """The results tables render mechanism evidence; evidence never reaches up into the tables (both build
    on the plain trial records of studies.records), even for annotations."""
    upward = [
        f"{module} imports {target}"
        for module, targets in sorted(GRAPH_WITH_TYPE_CHECKING.items())
        if _within(module, "studies.evidence")
        for target in sorted(targets)
        if _within(target, "studies.tables")
    ]
    assert upward == []
