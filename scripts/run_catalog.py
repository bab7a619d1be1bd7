"""Run the reproduction catalog against a running NormLab server and write one report per claim.

    normlab serve &                                   # on this machine (or point NORMLAB_API_URL elsewhere)
    python scripts/run_catalog.py --size cpu --output reports/
    python scripts/run_catalog.py --size smoke --output reports/smoke/
    python scripts/run_catalog.py --claim rank_post_norm_collapse --output reports/

Submits each chosen claim's study once (studies/catalog/<claim>/<size>.yaml; claims that share a study
are judged on the one study), waits for each study to end, then writes reports/<claim>.md, .html and
.json (GET /studies/{id}/report?claim=<claim>) and reports/README.md, an index that keeps verdicts on the
paper's data, verdicts about stand-ins, verdicts at initialisation and claims not tested apart, each
with its own tally. A study that fails still gets its report (it says why); a claim whose spec the server
refuses is listed with the server's message; a claim with no study at this size is listed as not tested,
with the catalog's reason. The index covers the whole catalog: claims run by an earlier invocation keep
the report it left in the output folder (so the catalog can run in batches), and claims not run yet are
listed as such. `--index-only` rebuilds the index alone.

`--rejudge` trains nothing: for each claim whose report is already in the output folder, it fetches the
report again for the same study from a server at this revision, so the verdict is judged with this tree's
check code, catalog entry and convergence level on the trials the study already has (no GPU-hour spent
again). A report whose study trained another spec than this tree's is left as it is (re-judging would pair
one spec's verdict with another's trials); each re-judged report keeps the revision its study was trained
at (`provenance.trained_at_git_revision`).

Each report's JSON records, in its provenance, the fingerprint of what its verdict depends on (the check
code, the claim's catalog entry and its spec: studies.catalog.fingerprint). The index compares every
report's fingerprint with this tree's and marks a report whose fingerprint differs, or which has none, as
stale, saying why; stale verdicts are tallied apart from current ones. Every tally counts claims and the
independent experiments (distinct studies) behind them: claims that share a study are one experiment.
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
from service.cli.client import TERMINAL, ApiClient, CliError, fetch_report, submit_spec_text
from service.settings import Settings
from studies.catalog import PAPERS, SIZES, claim_ids, get_claim, spec_path, study_claim
from studies.catalog.fingerprint import CHECK_CODE, Fingerprint, check_code_hash, claim_fingerprint, staleness
from studies.provenance import git_revision

REPORT_FORMATS = ("md", "html", "json")
NOT_TESTED = "not tested"


@dataclass
class ClaimRun:
    """One claim's way through the run: its study, how it ended, and the report's verdict."""

    claim: str
    study_id: str | None = None
    status: str = "not submitted"
    error: str | None = None
    report: dict[str, Any] = field(default_factory=dict)
    shares_with: str | None = None  # the claim whose study this claim reads
    not_run: str | None = None  # why the claim has no study at this size
    current: Fingerprint | None = None  # this tree's fingerprint of the claim (set for a claim with a report)
    stale: str | None = None  # why the report's verdict is stale against `current`; None: it is current

    @property
    def verdict(self) -> str:
        if self.not_run is not None:
            return NOT_TESTED
        return str(self.report.get("verdict") or "–") if self.report else "–"

    @property
    def recorded_fingerprint(self) -> Fingerprint | None:
        return Fingerprint.from_json((self.report.get("provenance") or {}).get("fingerprint"))

    @property
    def experiment(self) -> str | None:
        """The study behind the verdict (claims that read one study share it); None without one."""
        if not self.report:
            return None
        return self.study_id or self.report.get("study_id") or study_claim(self.claim)


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
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="submit nothing: judge again, at this revision, the studies of the reports already in the output",
    )
    parser.add_argument(
        "--index-only",
        action="store_true",
        help="submit nothing: rebuild the index from the reports already in the output folder",
    )
    args = parser.parse_args(argv)
    known = claim_ids()
    unknown = [c for c in args.claims or [] if c not in known]
    if unknown:
        parser.error(f"unknown claim(s) {', '.join(unknown)}; catalog claims: {', '.join(known)}")
    return args


def plan_runs(chosen: list[str], size: str) -> list[ClaimRun]:
    """One run per chosen claim; a claim whose study another claim hosts reads that study, and a claim
    with no study at this size says why (its host's reason, when the host has none either)."""
    runs = []
    for claim in chosen:
        host = study_claim(claim, size)
        run = ClaimRun(claim, shares_with=host if host != claim else None)
        if not spec_path(claim, size).exists():
            reason = get_claim(host).no_spec.get(size) or f"no {size} study in the catalog"
            run.not_run, run.status = reason, NOT_TESTED
        runs.append(run)
    return runs


def catalog_runs(ran: list[ClaimRun], output: Path, size: str) -> list[ClaimRun]:
    """Every catalog claim for the index, in catalog order: this invocation's runs, else the report an
    earlier invocation left in `output`, else not tested (no study at this size, or not run yet)."""
    by_claim = {run.claim: run for run in ran}
    runs = []
    for planned in plan_runs(list(claim_ids()), size):
        if planned.claim in by_claim:
            runs.append(by_claim[planned.claim])
            continue
        stored = output / f"{planned.claim}.json"
        if planned.not_run is None and stored.exists():
            planned.report = json.loads(stored.read_text(encoding="utf-8"))
            planned.study_id = planned.report.get("study_id")
            planned.status = (planned.report.get("provenance") or {}).get("status", "succeeded")
        elif planned.not_run is None:
            planned.not_run, planned.status = f"not run at the {size} size yet", NOT_TESTED
        runs.append(planned)
    mark_staleness(runs, size)
    return runs


def mark_staleness(runs: list[ClaimRun], size: str, *, check_code: str | None = None) -> None:
    """Set each reported run's current fingerprint and, where its report recorded another (or none),
    why it is stale. A claim with no report has nothing to be stale: its row is read from the catalog."""
    check_code = check_code or check_code_hash()
    for run in runs:
        if not run.report:
            continue
        run.current = claim_fingerprint(run.claim, spec_path(run.claim, size), check_code=check_code)
        run.stale = staleness((run.report.get("provenance") or {}).get("fingerprint"), run.current)


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


def write_reports(
    api_url: str, run: ClaimRun, output: Path, size: str, *, trained_at: str | None = None
) -> None:
    """The claim's report in every format; the JSON's provenance gains the claim's fingerprint (and, for a
    re-judged study, the revision it was trained at)."""
    for fmt in REPORT_FORMATS:
        text = fetch_report(api_url, run.study_id or "", fmt=fmt, claim=run.claim)
        if fmt == "json":
            run.report = with_fingerprint(json.loads(text), run.claim, size)
            if trained_at is not None:
                run.report["provenance"]["trained_at_git_revision"] = trained_at
            text = json.dumps(run.report, ensure_ascii=False, separators=(",", ":"))
        (output / f"{run.claim}.{fmt}").write_text(text, encoding="utf-8")


def rejudge(api_url: str, runs: list[ClaimRun], output: Path, size: str) -> None:
    """Fetch again, from a server at this revision, the report of each run whose study's report is in
    `output` and trained this tree's spec (the module docstring)."""
    for run in runs:
        stored = output / f"{run.claim}.json"
        if run.not_run is not None or not stored.exists():
            continue
        earlier = json.loads(stored.read_text(encoding="utf-8"))
        provenance = earlier.get("provenance") or {}
        recorded = Fingerprint.from_json(provenance.get("fingerprint"))
        current = claim_fingerprint(run.claim, spec_path(run.claim, size))
        if recorded is None or recorded.spec != current.spec:
            print(f"{run.claim}: left as it is: its study trained another spec than this tree's")
            continue
        run.study_id = earlier.get("study_id")
        run.status = provenance.get("status", "succeeded")
        trained_at = provenance.get("trained_at_git_revision") or provenance.get("git_revision")
        write_reports(api_url, run, output, size, trained_at=trained_at)
        print(
            f"{run.claim}: re-judged study {run.study_id} (trained at git {trained_at}): {run.report.get('verdict')}"
        )


def with_fingerprint(report: dict[str, Any], claim: str, size: str) -> dict[str, Any]:
    """The report with this tree's fingerprint of the claim in its provenance. The server judged the
    study; the fingerprint is this checkout's, so a server at another revision is named (the fingerprint
    then describes this checkout, not the code that judged)."""
    provenance = report.setdefault("provenance", {})
    here = git_revision()
    served = provenance.get("git_revision")
    if served not in (None, here):
        print(
            f"  warning: the server ran git {served}, this checkout is git {here}: "
            f"{claim}'s fingerprint is this checkout's"
        )
    provenance["fingerprint"] = {
        **claim_fingerprint(claim, spec_path(claim, size)).to_json(),
        "git_revision": here,
    }
    return report


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


# Index groups, in order: what a verdict is about decides which tally it joins (no headline mixes them).
GROUPS = (
    ("paper data", "Verdicts on the paper's data"),
    ("init", "Verdicts at initialisation (the claims hold on any input)"),
    ("stand-in", "Verdicts about stand-ins (about the stand-in dataset, not the paper's)"),
    (NOT_TESTED, "Not tested (the experiment could not answer)"),
)
SIZE_NOTES = {
    "smoke": "Smoke studies are a pipeline check: tiny models, a few epochs, offline stand-in data. They "
    "carry no scientific weight, whatever their verdicts say.",
    "cpu": "CPU studies are the smallest setting on the real offline data at which the reference converges "
    "(each claim's precondition); a claim whose reference still fell short is listed as not tested.",
    "paper": "Paper studies run the papers' datasets and sizes on a GPU cluster.",
}


def _group(run: ClaimRun) -> str:
    if run.verdict == NOT_TESTED or not run.report:
        return NOT_TESTED
    return str(run.report.get("scope") or "paper data")


def _tally(runs: list[ClaimRun]) -> str:
    """Claims per verdict and the independent experiments (distinct studies) behind them: several
    claims read off one study are one experiment, not several."""
    claims: dict[str, int] = {}
    experiments: dict[str, set[str]] = {}
    for run in runs:
        claims[run.verdict] = claims.get(run.verdict, 0) + 1
        studies = experiments.setdefault(run.verdict, set())
        if run.experiment is not None:
            studies.add(run.experiment)
    return ", ".join(
        f"{n} {verdict} ({_experiments(len(experiments[verdict]))})"
        for verdict, n in sorted(claims.items(), key=lambda kv: -kv[1])
    )


def _experiments(n: int) -> str:
    if n == 0:
        return "no experiment"
    return f"{n} independent experiment" + ("s" if n != 1 else "")


def _group_heading(title: str, members: list[ClaimRun]) -> str:
    """The group's tally of current verdicts; stale ones are tallied apart, never as current."""
    current = [run for run in members if run.stale is None]
    stale = [run for run in members if run.stale is not None]
    heading = f"## {title}: " + (_tally(current) if current else "none current")
    return heading + (f"; stale (not counted as current): {_tally(stale)}" if stale else "")


def _fingerprint_cell(run: ClaimRun) -> str:
    if run.current is None:
        return "–"
    now = f"`{run.current.claim[:12]}`"
    if run.stale is None:
        return f"current {now}"
    recorded = run.recorded_fingerprint
    was = f"recorded `{recorded.claim[:12]}`, " if recorded is not None else ""
    return f"**stale** ({run.stale}): {was}now {now}"


def _fingerprint_lines(runs: list[ClaimRun], size: str) -> list[str]:
    """This tree's fingerprints, and which reports are stale against them and why."""
    reported = [run for run in runs if run.current is not None]
    fingerprints = [run.current for run in reported if run.current is not None]
    check_code = fingerprints[0].check_code if fingerprints else check_code_hash()
    lines = [
        f"Indexed at git {git_revision()}. Check code fingerprint: `{check_code}` (sha256 of "
        + ", ".join(f"`{pattern}`" for pattern in CHECK_CODE)
        + "). A claim's fingerprint (the table's fingerprint column) adds its entry in "
        "`studies/catalog/claims.yaml`, its dataset's convergence level and its spec file; each report "
        "records the one it was judged with (`provenance.fingerprint` in its JSON).",
        "",
    ]
    stale = [run for run in reported if run.stale is not None]
    lines += [
        f"## Stale reports: {len(stale)} of {len(reported)}",
        "",
    ]
    if not stale:
        return [*lines, "Every report's fingerprint matches this tree's.", ""]
    lines += [
        "A stale report was judged with other check code, another catalog entry or another spec than this "
        "tree's, or predates fingerprinting (nothing shows what it was judged with). Its verdict may not be "
        "what this tree would give: it is tallied apart from the current verdicts below until its claim "
        f"runs again (`scripts/run_catalog.py --size {size} --claim <id>`).",
        "",
    ]
    by_reason: dict[str, list[str]] = {}
    for run in stale:
        by_reason.setdefault(str(run.stale), []).append(f"`{run.claim}`")
    lines += [f"- {reason}: {', '.join(claims)}" for reason, claims in by_reason.items()]
    return [*lines, ""]


def _study_cell(run: ClaimRun) -> str:
    if run.not_run is not None:
        return run.not_run if run.not_run.startswith("not run") else f"no study at this size: {run.not_run}"
    study = f"{run.status} ({run.study_id})" if run.study_id else run.status
    if run.shares_with:
        study = f"same study as `{run.shares_with}`: {study}"
    if run.error:
        study += f": {run.error.splitlines()[0][:160]}"
    return study


def _verdict_cell(run: ClaimRun) -> str:
    reason = (run.report.get("result") or {}).get("reason") if run.report else None
    return run.verdict + (f": {reason}" if reason else "")


def _revision_lines(runs: list[ClaimRun]) -> list[str]:
    """Which NormLab each report came from: batches run at different commits are named apart."""
    claims_by_revision: dict[str, list[str]] = {}
    for run in runs:
        if run.report:
            provenance = run.report.get("provenance") or {}
            revision = f"NormLab {provenance.get('normlab_version', '?')} (git {provenance.get('git_revision', '?')})"
            claims_by_revision.setdefault(revision, []).append(f"`{run.claim}`")
    if len(claims_by_revision) == 1:
        return [f"Every report here came from {next(iter(claims_by_revision))}.", ""]
    return [
        "The reports came from more than one commit:",
        "",
        *(f"- {revision}: {', '.join(claims)}" for revision, claims in claims_by_revision.items()),
        "",
    ]


def index_markdown(runs: list[ClaimRun], *, size: str, api_url: str | None) -> str:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = [
        f"# NormLab catalog reports ({size} size)",
        "",
        f"Generated {now} by `scripts/run_catalog.py --size {size}` "
        + (f"against {api_url}." if api_url else "`--index-only`, from the reports in this folder."),
        "",
        SIZE_NOTES.get(size, ""),
        "",
        *_revision_lines(runs),
        *_fingerprint_lines(runs, size),
    ]
    for group, title in GROUPS:
        members = [run for run in runs if _group(run) == group]
        if not members:
            continue
        lines += [_group_heading(title, members), ""]
        lines += [
            "| claim | paper | verdict | dataset | study | fingerprint | report |",
            "|---|---|---|---|---|---|---|",
        ]
        for run in members:
            claim = get_claim(run.claim)
            links = " · ".join(f"[{fmt}]({run.claim}.{fmt})" for fmt in REPORT_FORMATS) if run.report else "–"
            cells = (
                f"{claim.title} (`{claim.id}`)",
                PAPERS[claim.paper].split(":")[0],
                _verdict_cell(run),
                _dataset_cell(run.report) if run.report else "–",
                _study_cell(run),
                _fingerprint_cell(run),
                links,
            )
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings()
    api_url = args.api_url or settings.api_url
    token = read_api_token(settings)
    if token is None and not args.index_only:
        print(f"no API token: set NORMLAB_API_TOKEN or start the server here ({settings.api_token_path})")
        return 1
    args.output.mkdir(parents=True, exist_ok=True)
    chosen = [] if args.index_only else args.claims or list(claim_ids())
    if args.skip_existing:
        chosen = [c for c in chosen if not (args.output / f"{c}.json").exists()]
    runs = plan_runs(chosen, args.size)
    try:
        if args.rejudge:
            rejudge(api_url, runs, args.output, args.size)
        else:
            submit_and_report(api_url, token or "", runs, args)
    except CliError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "stopped waiting; submitted studies keep running (`normlab studies` lists them)", file=sys.stderr
        )
        return 130
    # A re-judged run has its new report; the claims it left as they were are read from the folder.
    reported = [r for r in runs if r.report] if args.rejudge else runs
    (args.output / "README.md").write_text(
        index_markdown(
            catalog_runs(reported, args.output, args.size),
            size=args.size,
            api_url=None if args.index_only else api_url,
        ),
        encoding="utf-8",
    )
    print(f"wrote {len([r for r in runs if r.report])} report(s) and the index to {args.output}/README.md")
    return 0 if all(r.status == "succeeded" for r in reported if r.not_run is None) else 1


def submit_and_report(api_url: str, token: str, runs: list[ClaimRun], args: argparse.Namespace) -> None:
    """Submit each host claim's study once, wait for them all, then write every run's reports."""
    hosts: dict[str, ClaimRun] = {}  # study host claim -> the run that submitted its study
    for run in runs:
        if run.not_run is not None:
            print(f"{run.claim}: not tested ({run.not_run})")
            continue
        host = study_claim(run.claim, args.size)
        if host in hosts:
            continue
        hosts[host] = submitter = ClaimRun(host)
        submit(api_url, token, submitter, args.size)
        print(
            f"{host}: {submitter.status}"
            + (f" as study {submitter.study_id}" if submitter.study_id else f" ({submitter.error})")
        )
    wait(api_url, list(hosts.values()), args.poll)
    for run in runs:
        if run.not_run is not None:
            continue
        submitter = hosts[study_claim(run.claim, args.size)]
        run.study_id, run.status, run.error = submitter.study_id, submitter.status, submitter.error
        if run.study_id is not None:
            write_reports(api_url, run, args.output, args.size)
            print(f"{run.claim}: {run.status}, verdict {run.report.get('verdict')}")


if __name__ == "__main__":
    sys.exit(main())
