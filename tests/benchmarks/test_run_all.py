"""`make bench` rewrites BENCHMARKS.md from the benchmarks it runs and the sections it keeps as written."""

from __future__ import annotations

from pathlib import Path

from benchmarks import run_all

BENCHMARKS_MD = Path(run_all.__file__).resolve().parent.parent / "BENCHMARKS.md"


def test_every_kept_section_is_a_markdown_section_that_benchmarks_md_carries_verbatim():
    written = BENCHMARKS_MD.read_text(encoding="utf-8")
    for path in run_all.KEPT_SECTIONS:
        kept = path.read_text(encoding="utf-8")
        assert kept.startswith("## "), path
        assert kept.strip() in written, f"{path.name} differs from BENCHMARKS.md: edit it there, not here"
