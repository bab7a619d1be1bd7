"""Run the reproduction catalog against a running NormLab server and write one report per claim.

    normlab serve &                                   # on this machine (or point NORMLAB_API_URL elsewhere)
    python scripts/run_catalog.py --size smoke --output reports/
    python scripts/run_catalog.py --claim rank_post_norm_collapse --output reports/

Submits every chosen claim's spec (studies/catalog/<claim>/<size>.yaml), waits for each study to end,
then writes reports/<claim>.md, .html and .json (GET /studies/{id}/report) and reports/README.md, an
index of claim -> verdict -> dataset (stand-in or not) -> links. A study that fails still gets its report
(it says why); a claim whose spec the server refuses is listed with the server's message.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from service.auth import read_api_token
from service.client import TERMINAL, ApiClient, CliError, fetch_report, submit_spec_text
from service.settings import Settings
from studies.catalog import PAPERS, SIZES, claim_ids, get_claim, spec_path

REPORT_FORMATS = ("md", "html", "json")


@dataclass
class ClaimRun:
    """One claim's way through the run: its study, how it ended, and the report's verdict."""

    claim: str
    study_id: str | None = None
    status: str = "not submitted"
    error: str | None = None
    report: dict[str, Any] = field(default_factory=dict)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=SIZES, default="smoke", help="catalog size to run (default smoke)")
    parser.add_argument(
        "--output", type=Path, default=Path("reports"), help="report folder (default reports/)"
    )
    parser.add_argument(
        "--claim", action="append", dest="claims", metavar="ID", help="run only this claim (repeatable)"
    )
    parser.add_argument(
        "--api-url", default=None, help="API address (default: NORMLAB_API_URL or the settings)"
    )
    parser.add_argument("--poll", type=float, default=5.0, help="seconds between status polls")
    parser.add_argument(
        "--skip-existing",
        action="store_true",
        help="leave out claims whose <claim>.json report already exists",
    )
    args = parser.parse_args(argv)
    known = claim_ids()
    unknown = [c for c in args.claims or [] if c not in known]
    if unknown:
        parser.error(f"unknown claim(s) {', '.join(unknown)}; catalog claims: {', '.join(known)}")
    return args


def submit(api_url: str, token: str, run: ClaimRun, size: str) -> None:
    text = spec_path(run.claim, size).read_text(encoding="utf-8")
    try:
        study = submit_spec_text(api_url, token, text)
    except CliError as error:
        run.status, run.error = "refused", str(error)
        return
    run.study_id, run.status = study["id"], study["status"]


def wait(api_url: str, runs: list[ClaimRun], poll_s: float) -> None:
    """Poll every submitted study until all have ended, printing each change of status."""
    pending = [r for r in runs if r.study_id is not None and r.status not in TERMINAL]
    with ApiClient(api_url) as api:
        while pending:
            for run in list(pending):
                study = api.json("GET", f"/studies/{run.study_id}")
                if study["status"] != run.status:
                    progress = study["progress"]
                    print(
                        f"  {run.claim}: {study['status']} ({progress['done']}/{progress['planned']} trials)"
                    )
                run.status, run.error = study["status"], study.get("error")
                if run.status in TERMINAL:
                    pending.remove(run)
            if pending:
                time.sleep(poll_s)


def write_reports(api_url: str, run: ClaimRun, output: Path) -> None:
    for fmt in REPORT_FORMATS:
        text = fetch_report(api_url, run.study_id or "", fmt=fmt)
        (output / f"{run.claim}.{fmt}").write_text(text, encoding="utf-8")
        if fmt == "json":
            run.report = json.loads(text)


def _dataset_cell(report: dict[str, Any]) -> str:
    dataset = report.get("dataset") or {}
    name = dataset.get("dataset", "?")
    parts = []
    if dataset.get("stand_in_for"):
        parts.append(f"stand-in for {dataset['stand_in_for']}")
    if dataset.get("paper_dataset") and not dataset.get("comparable", True):
        parts.append(f"paper: {dataset['paper_dataset']}, not comparable")
    return name + (f" ({'; '.join(parts)})" if parts else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def index_markdown(runs: list[ClaimRun], *, size: str, api_url: str) -> str:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    versions = next((r.report.get("provenance") for r in runs if r.report), None) or {}
    lines = [
        f"# NormLab catalog reports ({size} size)",
        "",
        f"Generated {now} by `scripts/run_catalog.py --size {size}` against {api_url}"
        + (
            f"; NormLab {versions.get('normlab_version')} (git {versions.get('git_revision')})."
            if versions
            else "."
        ),
        "",
    ]
    if size == "smoke":
        lines += [
            "Smoke studies run tiny models for a few epochs, mostly on offline stand-in data: their verdicts "
            "test the pipeline and the direction of an effect at low power, not the paper's numbers.",
            "",
        ]
    lines += [
        "| claim | paper | verdict | dataset | study | report |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        claim = get_claim(run.claim)
        study = f"{run.status} ({run.study_id})" if run.study_id else run.status
        if run.error:
            study += f": {run.error.splitlines()[0][:160]}"
        links = " · ".join(f"[{fmt}]({run.claim}.{fmt})" for fmt in REPORT_FORMATS) if run.report else "–"
        verdict = (run.report.get("verdict") or "–") if run.report else "–"
        lines.append(
            "| "
            + " | ".join(
                _cell(cell)
                for cell in (
                    f"{claim.title} (`{claim.id}`)",
                    PAPERS[claim.paper].split(":")[0],
                    verdict,
                    _dataset_cell(run.report) if run.report else "–",
                    study,
                    links,
                )
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings()
    api_url = args.api_url or settings.api_url
    token = read_api_token(settings)
    if token is None:
        print(f"no API token: set NORMLAB_API_TOKEN or start the server here ({settings.api_token_path})")
        return 1
    args.output.mkdir(parents=True, exist_ok=True)
    chosen = args.claims or list(claim_ids())
    if args.skip_existing:
        chosen = [c for c in chosen if not (args.output / f"{c}.json").exists()]
    runs = [ClaimRun(claim) for claim in chosen]
    try:
        for run in runs:
            submit(api_url, token, run, args.size)
            print(
                f"{run.claim}: {run.status}"
                + (f" as study {run.study_id}" if run.study_id else f" ({run.error})")
            )
        wait(api_url, runs, args.poll)
        for run in runs:
            if run.study_id is not None:
                write_reports(api_url, run, args.output)
                print(f"{run.claim}: {run.status}, verdict {run.report.get('verdict')}")
    except CliError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "stopped waiting; submitted studies keep running (`normlab studies` lists them)", file=sys.stderr
        )
        return 130
    (args.output / "README.md").write_text(
        index_markdown(runs, size=args.size, api_url=api_url), encoding="utf-8"
    )
    print(f"wrote {len([r for r in runs if r.report])} report(s) and the index to {args.output}/README.md")
    return 0 if all(r.status == "succeeded" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
