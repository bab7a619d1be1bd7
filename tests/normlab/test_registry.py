"""The registry: one record per name, refusing a clash; an overlay that shows a plugin's facts for one
context only; live views that callers index by name."""

from __future__ import annotations

import threading

import pytest

from normlab import REGISTRY, Knob, Method, NormKind, Registry, RegistryError, UnknownName
from normlab.records import from_facts, to_facts


def test_a_record_is_found_by_name_and_an_unknown_name_lists_the_known_ones():
    registry = Registry()
    registry.methods.add(Method("a", norm="layernorm"))
    assert registry.methods.get("a").norm == "layernorm"
    with pytest.raises(UnknownName, match="unknown method 'b'; choose one of a"):
        registry.methods.get("b")


def test_adding_an_equal_record_again_is_a_no_op_and_a_different_one_under_the_name_is_refused():
    registry = Registry()
    registry.methods.add(Method("a", norm="layernorm"))
    registry.methods.add(Method("a", norm="layernorm"))
    with pytest.raises(RegistryError, match=r"method 'a' is already registered \(by builtin\); mine.py"):
        registry.methods.add(Method("a", norm="dyt", source="mine.py"))
    assert len(registry.methods) == 1


def test_the_overlay_shows_records_inside_the_block_only_and_never_to_another_thread():
    registry = Registry()
    seen_elsewhere = []
    with registry.overlay([Method("plugged", norm="rms", source="p.py")]):
        assert "plugged" in registry.methods
        worker = threading.Thread(target=lambda: seen_elsewhere.append("plugged" in registry.methods))
        worker.start()
        worker.join()
    assert "plugged" not in registry.methods
    assert seen_elsewhere == [False]


def test_the_overlay_refuses_a_record_that_contradicts_a_registered_one():
    registry = Registry()
    registry.methods.add(Method("a", norm="layernorm"))
    with pytest.raises(RegistryError), registry.overlay([Method("a", norm="dyt", source="p.py")]):
        pass


def test_a_view_stays_current_as_records_are_added():
    registry = Registry()
    view = registry.knobs.as_mapping()
    assert "k" not in view
    registry.knobs.add(Knob("k", "float", "a knob", 0.0, 1.0))
    assert view["k"].contains(0.5) and list(view) == ["k"]


def test_a_record_travels_as_json_facts_without_its_code():
    record = NormKind("rms", ("eps",), True, "root mean square", "p.py", (0.0, 1.0, 0.0), layer=object)
    facts = to_facts(record)
    assert "layer" not in facts and facts["options"] == ["eps"]
    back = from_facts("norms", facts)
    assert back == record and back.layer is None


def test_removing_a_source_forgets_its_records_only():
    registry = Registry()
    registry.methods.add(Method("builtin", norm="layernorm"))
    registry.methods.add(Method("mine", norm="layernorm", source="p.py"))
    registry.methods.remove_source("p.py")
    assert registry.methods.names() == ("builtin",)


def test_the_built_ins_are_registered_as_records():
    import models.norms  # noqa: F401
    import studies.datasets
    import studies.knobs  # noqa: F401

    assert REGISTRY.methods.get("autonorm_s").gate_freeze
    assert REGISTRY.norms.get("autonorm").layer is not None
    assert REGISTRY.knobs.get("tau").norm_option == "tau"
    assert REGISTRY.knobs.get("width_expansion").model_field == "mlp_ratio"
    assert {r.source for r in REGISTRY.methods} == {"builtin"}


def test_a_plugin_imported_here_is_overlaid_by_its_checked_facts_keeping_its_code():
    registry = Registry()
    registry.norms.add(NormKind("rms", ("eps",), source="p.py@1", layer=len))
    checked = NormKind("rms", ("eps",), True, source="p.py@1", parameters=(0.0, 1.0, 0.0))
    with registry.overlay([checked]):
        seen = registry.norms.get("rms")
        assert seen.parameters == (0.0, 1.0, 0.0) and seen.layer is len
