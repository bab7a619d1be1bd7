"""`normlab figure <dataset> <name>`: a results page's figure written to a file as SVG or PDF, with the
options `normlab results` takes; an unknown figure or format fails saying what there is."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import service.cli.commands as cli
from tests.factories import add_final_trials, submit
from tests.studies.tables.pdf_reading import pdf_pages

runner = CliRunner()

ACCURACY = {"frozen_ln": [0.90, 0.91, 0.89], "dyt": [0.905, 0.90, 0.895], "autonorm_s": [0.95, 0.96, 0.94]}


@pytest.fixture
def study(wired, client, app_engine) -> str:
    study_id = submit(client)
    add_final_trials(app_engine, study_id, ACCURACY)
    return study_id


def test_it_writes_the_forest_plot_as_pdf_taking_the_format_from_the_files_suffix(study, tmp_path):
    target = tmp_path / "paper" / "forest.pdf"
    result = runner.invoke(cli.app, ["figure", "digits", "forest_plot", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert f"wrote forest_plot of digits as PDF to {target}" in result.output
    [(_, _, text)] = pdf_pages(target.read_bytes())
    assert "frozen_ln (reference)" in text


def test_it_writes_the_svg_the_api_serves_for_the_same_options(study, client, tmp_path):
    target = tmp_path / "forest.svg"
    args = ["figure", "digits", "forest_plot", "--format", "svg", "-o", str(target), "--study", study]
    result = runner.invoke(cli.app, [*args, "--reference", "dyt"])
    assert result.exit_code == 0, result.output
    served = client.get(f"/results/digits/figures/forest_plot.svg?study={study}&reference=dyt").text
    assert target.read_text(encoding="utf-8") == served and "vs dyt" in served


def test_without_an_output_it_names_the_file_after_the_dataset_and_figure(study, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli.app, ["figure", "digits", "forest_plot", "-f", "pdf"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "digits_forest_plot.pdf").read_bytes().startswith(b"%PDF-")


def test_an_unknown_figure_fails_listing_the_pages_figures(study, tmp_path):
    target = tmp_path / "x.svg"
    result = runner.invoke(cli.app, ["figure", "digits", "forest", "-o", str(target)])
    assert result.exit_code == 1
    assert "unknown figure 'forest'; this results page has: forest_plot" in result.output
    assert not target.exists()


def test_an_unknown_format_fails_before_asking_the_api(wired):
    result = runner.invoke(cli.app, ["figure", "digits", "forest_plot", "--format", "png"])
    assert result.exit_code == 1 and "choose one of svg, pdf" in result.output
