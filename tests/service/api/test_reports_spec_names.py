"""Which claims a study serves depends on its catalog spec's name, read from YAML on every report and
results page: the name is parsed once per version of the file, and an edited file is read again."""

from __future__ import annotations

import os

from service.api.reports import _spec_name, served_claims


def test_a_spec_name_is_read_again_once_its_file_changes(tmp_path):
    spec = tmp_path / "cpu.yaml"
    spec.write_text("name: first\n", encoding="utf-8")
    assert _spec_name(spec) == "first"
    spec.write_text("name: second\n", encoding="utf-8")
    os.utime(spec, ns=(spec.stat().st_atime_ns, spec.stat().st_mtime_ns + 1_000_000))
    assert _spec_name(spec) == "second"


def test_a_catalog_spec_serves_the_claims_that_read_its_study_at_its_size():
    assert served_claims("cifar10_autonorm_s_beats_frozen_ln", "catalog-cifar10-cpu")[0] == (
        "cifar10_autonorm_s_beats_frozen_ln"
    )
    assert served_claims("no_such_claim") == []
