"""Talking to a running NormLab API from Python: submit a spec, follow a study, fetch and print results.

The `normlab` CLI (service/cli/commands.py), `normlab serve --demo` (service/stack/launcher.py) and scripts use it; every
failure is a CliError whose message says what to do about it.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from rich.console import Console
from rich.markdown import Markdown
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from service.cli.results_view import WIDE_COLUMNS, narrow_results

__all__ = [
    "TERMINAL",
    "ApiClient",
    "CliError",
    "check_spec_text",
    "console",
    "err_console",
    "fetch_report",
    "follow_study",
    "make_http_client",
    "plan_spec_text",
    "print_results",
    "render_plan",
    "submit_spec_text",
]

# Piped output (CI logs, `make demo` under a pager) gets a width a results table fits in, not 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)

# The API's status vocabulary (studies.store.StudyStatus), as strings: this client imports nothing of the
# service, so the CLI starts without SQLAlchemy.
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
_FORMATS = ("table", "json", "csv", "md", "html", "latex")
REPORT_TIMEOUT_S = 900.0
# A plan simulates a sequential design (a few seconds for seven methods on one core, more on a busy one).
PLAN_TIMEOUT_S = 300.0


class CliError(Exception):
    """A failure the user can act on; the message says how."""


def make_http_client(api_url: str, token: str | None) -> httpx.Client:
    """The HTTP client every command uses (tests swap in FastAPI's TestClient)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=api_url, headers=headers, timeout=30.0)


class ApiClient:
    """Thin HTTP wrapper that turns transport and HTTP errors into CliError messages."""

    def __init__(self, api_url: str, token: str | None = None, *, timeout_s: float | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token
        self._http = make_http_client(self.api_url, token)
        if timeout_s is not None:
            self._http.timeout = timeout_s  # httpx takes a number of seconds

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise CliError(
                f"cannot reach the API at {self.api_url}: start it with `make run` (or `normlab serve`), "
                "or point NORMLAB_API_URL at a running server"
            ) from exc
        except httpx.HTTPError as exc:
            raise CliError(
                f"the request to {self.api_url}{path} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code >= 400:
            raise CliError(_describe_failure(response, self.api_url))
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()


def _describe_failure(response: httpx.Response, api_url: str) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text.strip()
    code = response.status_code
    if code == 401:
        return (
            f"the API at {api_url} refused the request ({detail}): set NORMLAB_API_TOKEN to the server's "
            "token (`normlab token` prints it on the server machine)"
        )
    if code == 422 and isinstance(detail, list):
        return _spec_problems(detail)
    if code >= 500:
        return f"the API failed ({code}): {detail}; see the `normlab serve` log"
    return f"{detail} ({code})"


def _spec_problems(errors: Sequence[Mapping[str, Any]]) -> str:
    """Validation errors (the API's 422 detail, or pydantic's) as one line per field path; a heading that
    says whether the spec or the request's options (a query value such as --reference) were refused."""
    about_options = bool(errors) and all(
        (error.get("loc") or [None])[0] in ("query", "path", "header") for error in errors
    )
    lines = ["the request's options are invalid:" if about_options else "the study spec is invalid:"]
    for error in errors:
        loc = ".".join(str(part) for part in error.get("loc", []) if part != "body") or "(spec)"
        lines.append(f"  {loc}: {error.get('msg')}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- reusable steps


def check_spec_text(spec_text: str, *, content_type: str = "application/yaml") -> None:
    """Parse and validate a spec here as the API does (minus the server's size limits), so a spec the
    API would refuse is reported, with the fix, before anything is sent."""
    from pydantic import ValidationError

    from service.api.routes.spec_body import json_problems
    from studies.spec import parse_spec_text, validate_spec_data

    unsent = "nothing was sent: fix the file and submit it again"
    try:
        data = parse_spec_text(spec_text, content_type)
    except (ValueError, TypeError, RecursionError) as exc:  # SpecFormatError is a ValueError
        raise CliError(f"{exc}\n({unsent})") from exc
    problems: Sequence[Mapping[str, Any]] = json_problems(data)
    if not problems:
        try:
            validate_spec_data(data)
            return
        except ValidationError as exc:
            problems = exc.errors(include_url=False)
    raise CliError(f"{_spec_problems(problems)}\n({unsent})")


def submit_spec_text(
    api_url: str, api_token: str | None, spec_text: str, *, content_type: str = "application/yaml"
) -> dict[str, Any]:
    """POST a spec; returns the stored study (id, status, progress, ...)."""
    with ApiClient(api_url, api_token) as api:
        return api.json(
            "POST", "/studies", content=spec_text.encode("utf-8"), headers={"Content-Type": content_type}
        )


def follow_study(api_url: str, study_id: str, *, poll_s: float = 2.0) -> dict[str, Any]:
    """Show a progress bar until the study finishes; returns its final state."""
    with (
        ApiClient(api_url) as api,
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("trials"),
            TimeElapsedColumn(),
            console=console,
        ) as progress,
    ):
        study = api.json("GET", f"/studies/{study_id}")
        task = progress.add_task(_progress_label(study), total=study["progress"]["planned"] or None)
        looks_shown = 0
        while True:
            progress.update(task, description=_progress_label(study), completed=study["progress"]["done"])
            # A sequential study: each look's decisions as it is taken (the bar's total is its maximum).
            looks = (study.get("sequential") or {}).get("looks") or []
            for look in looks[looks_shown:]:
                progress.console.print(
                    look_text(look, two_sided=_two_sided(study)), markup=False, highlight=False
                )
            looks_shown = max(looks_shown, len(looks))
            if study["status"] in TERMINAL:
                return study
            time.sleep(poll_s)
            study = api.json("GET", f"/studies/{study_id}")


def _two_sided(study: dict[str, Any]) -> bool:
    return ((study.get("sequential") or {}).get("design") or {}).get("test") == "superiority"


def look_text(look: dict[str, Any], *, two_sided: bool) -> str:
    """One sequential look as `--wait` prints it: a line per comparison it tested, then what trains next."""
    seeds = ", ".join(f"{arm} {n}" for arm, n in look["seeds_per_arm"].items())
    lines = [f"look {look['look']} (seeds: {seeds})"]
    statistic = "|z|" if two_sided else "z"
    for method, point in look["comparisons"].items():
        z = point.get("z")
        shown = "inf" if z is None else f"{abs(z) if two_sided else z:.2f}"
        futility = "" if point.get("futility") is None else f", futility <= {point['futility']:.2f}"
        efficacy = "inf" if point.get("efficacy") is None else f"{point['efficacy']:.2f}"
        lines.append(
            f"  {method}: {statistic} {shown} (efficacy >= {efficacy}{futility}, level {point['level']:.3g}) "
            f"-> {DECISION_WORDS.get(point['decision'], point['decision'])}"
        )
    lines.append(
        f"  next: {', '.join(look['open_arms'])} train more seeds" if look["open_arms"] else "  all decided"
    )
    return "\n".join(lines)


# What each decision means, in the few words a terminal line has room for.
DECISION_WORDS = {
    "open": "open",
    "efficacy": "differs: stop",
    "non_inferior": "non-inferior: stop",
    "equivalent": "equivalent: stop",
    "futility": "futility: stop",
    "not_equivalent": "not equivalent: stop",
    "max_seeds": "undecided at the maximum seeds",
    "too_few_seeds": "too few seeds",
}


def _progress_label(study: dict[str, Any]) -> str:
    p = study["progress"]
    failed = f", {p['failed']} failed" if p["failed"] else ""
    bound = ", sequential: the total is the most it can run" if study["spec"].get("sequential") else ""
    return f"{study['name']} ({study['status']}{failed}{bound})"


def print_results(
    api_url: str,
    dataset: str,
    *,
    study_id: str | None = None,
    fmt: str = "table",
    reference: str | None = None,
    pool: bool = False,
) -> None:
    """Print the results table: `table` shows the API's markdown rendering laid out for the terminal (the
    one rendering of the table, warnings and per-seed values included), or in a terminal narrower than
    WIDE_COLUMNS its decisive columns (service.cli.results_view); json / csv / md / html as is."""
    narrow = fmt == "table" and console.width < WIDE_COLUMNS
    params: dict[str, str] = {"format": "json" if narrow else "md" if fmt == "table" else fmt}
    if study_id:
        params["study"] = study_id
    if reference:
        params["reference"] = reference
    if pool:
        params["pool"] = "true"
    with ApiClient(api_url) as api:
        response = api.request("GET", f"/results/{dataset}", params=params)
    if narrow:
        # The markdown table's cells were cut to "0.8…" in 80 columns: the decisive columns, folded.
        console.print(narrow_results(response.json(), dataset=dataset))
    elif fmt == "table":
        console.print(Markdown(response.text))
    else:
        console.print(response.text, markup=False, highlight=False, soft_wrap=True)


def fetch_report(api_url: str, study_id: str, *, fmt: str = "md", claim: str | None = None) -> str:
    """A study's report (GET /studies/{id}/report) as md, html or json text; `claim` judges it against
    another claim the study serves."""
    params = {"format": fmt} | ({"claim": claim} if claim else {})
    # A report judges every trial (a 384-trial grid with its sensitivity tables and figures took about a
    # minute per format on a busy 2-core machine): the client's usual 30 s would give up first.
    with ApiClient(api_url, timeout_s=REPORT_TIMEOUT_S) as api:
        return api.request("GET", f"/studies/{study_id}/report", params=params).text


# ------------------------------------------------------------------------------------------------ plans


def plan_spec_text(
    api_url: str, api_token: str | None, spec_text: str, *, content_type: str = "application/yaml"
) -> dict[str, Any]:
    """POST a spec to /plans; returns the plan (studies.planning.StudyPlan as JSON). Nothing is stored."""
    with ApiClient(api_url, api_token, timeout_s=PLAN_TIMEOUT_S) as api:
        return api.json(
            "POST", "/plans", content=spec_text.encode("utf-8"), headers={"Content-Type": content_type}
        )


_WIDTH = 80  # a plan reads in any terminal


def _wrap(text: str, indent: str = "  ") -> str:
    return textwrap.fill(text, width=_WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def _count(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _hours(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def _per_method(counts: Mapping[str, int]) -> str:
    values = set(counts.values())
    if len(values) == 1:
        return f"{values.pop()} per method"
    return ", ".join(f"{m} {n}" for m, n in counts.items())


def _trial_lines(plan: Mapping[str, Any]) -> list[str]:
    lines = ["Trials (one per seed of a configuration; Tune trials train a seed batch)"]
    for phase in plan["phases"]:
        trials, processes = phase["trials"], phase["processes"]
        line = (
            f"{phase['phase']:<6} {_per_method(trials)}, {sum(trials.values())} in all "
            f"({sum(processes.values())} Tune trials), {_count(phase['epochs_per_trial'])} epochs each"
        )
        lines.append(_wrap("  " + line, "    "))
    basis = plan["seeds_per_trial_basis"]
    lines.append(_wrap(f"  seeds per Tune trial: {plan['seeds_per_trial']} ({basis})", "    "))
    return lines


def _cost_lines(plan: Mapping[str, Any]) -> list[str]:
    rows: list[tuple[str, Mapping[str, Any]]] = []
    sequential = plan.get("sequential")
    rows.append(("as written (maximum)" if sequential else "as written", plan["planned"]))
    if sequential:
        rows.append(("first look", sequential["first"]))
        rows.extend(
            (f"expected, {s['name'].replace('_', ' ')}", s["expected"]) for s in sequential["scenarios"]
        )
    fixed = plan["fixed"]
    if fixed.get("cost"):
        rows.append(("fixed design, same power", fixed["cost"]))
    gpu = plan["gpu"]["gpu"].removeprefix("NVIDIA ")
    head = f"  {'':<26}{'seeds/method':>12}{'trials':>8}{'GPU-h (' + gpu + ')':>15}{'wall h':>9}"
    lines = [head]
    for label, cost in rows:
        lines.append(
            f"  {label:<26}{_count(cost['seeds_per_method']):>12}{_count(cost['trials']):>8}"
            f"{_hours(cost['gpu_hours']):>15}{_hours(cost['wall_hours']):>9}"
        )
    return lines


def _sequential_lines(sequential: Mapping[str, Any]) -> list[str]:
    size = (
        f"effect {sequential['effect']:g}"
        if sequential["effect"] is not None
        else f"margin {sequential['margin']:g}"
    )
    looks = ", ".join(str(n) for n in sequential["looks"])
    lines = [
        _wrap(
            f"Sequential design: {sequential['test'].replace('_', '-')}, {size}, alpha {sequential['alpha']:g}, "
            f"power {sequential['power']:g}; looks at {looks} seeds per method"
        )
    ]
    for scenario in sequential["scenarios"]:
        lines.append(_wrap(f"  {scenario['name'].replace('_', ' ')}: {scenario['description']}", "    "))
        lines.append(
            _wrap(
                f"    decided for its goal in {scenario['rejected']:.0%} of comparisons; stopped before the "
                f"last look in {scenario['stopped_early']:.0%} of studies; "
                f"{scenario['expected']['seeds_per_method']:.1f} ± {scenario['seeds_standard_error']:.2f} "
                "seeds per method",
                "    ",
            )
        )
    lines.append(_wrap(f"  {sequential['reason']}", "    "))
    return lines


_WALL_SOURCES = {
    "history": "from its finished trials",
    "gpu_prior": "a prior, the GPU cost model",
    "cpu_prior": "a prior, the CPU rule",
    "none": "no prediction",
}


def render_plan(plan: Mapping[str, Any]) -> str:
    """A plan (POST /plans' JSON) as text that fits 80 columns."""
    reference = plan["reference"]
    others = [m for m in plan["methods"] if m != reference]
    compared = f"{', '.join(others)} vs {reference} (reference)" if others else reference
    lines = [
        _wrap(
            f"Plan for {plan['name']}: {plan['dataset']}, {plan['model']}; {compared}; "
            f"{plan['metric']}; {plan['design']} design"
        ),
        "",
        *_trial_lines(plan),
        "",
        "Costs (seeds and trials per study; expected: means over simulated studies)",
        *_cost_lines(plan),
        "",
    ]
    if plan.get("sequential"):
        lines += [*_sequential_lines(plan["sequential"]), ""]
    spread, gpu, wall = plan["spread"], plan["gpu"], plan["wall"]
    sd = f"sd {spread['sd']:.3g}" if spread["sd"] is not None else "unknown"
    measured = "" if gpu["provenance"] == "none" else f" ({gpu['provenance']})"
    lines += [
        _wrap(f"Fixed design: {plan['fixed']['reason']}"),
        _wrap(f"Spread of paired differences: {sd}; {spread['basis']}"),
        _wrap(f"GPU-hours on an {gpu['gpu']}{measured}: {'; '.join(gpu['basis'])}"),
        _wrap(f"Wall time on this cluster ({_WALL_SOURCES[wall['source']]}): {'; '.join(wall['basis'])}"),
    ]
    if wall["studies"]:
        lines.append(_wrap(f"  timed on: {', '.join(wall['studies'])}", "    "))
    if plan.get("memory"):  # a plan from a server that sizes trials
        lines.append(_wrap(_memory_line(plan["memory"])))
    return "\n".join(lines)


def _memory_line(memory: Mapping[str, Any]) -> str:
    """The largest trial's memory and what a trial may use, e.g. "Memory per trial: 7.93 MiB on CPU (the
    largest, autonorm_s: 20,081 parameters, batch 64) of 16 GiB (...)"."""
    from studies.sizing import format_bytes  # plain Python; only a plan prints it

    seeds = f" x {memory['seeds_per_trial']} seeds" if memory["seeds_per_trial"] > 1 else ""
    line = (
        f"Memory per trial: {format_bytes(memory['bytes'])} on {memory['device'].upper()} (the largest, "
        f"{memory['method']}: {memory['parameters']:,} parameters{seeds}, batch {memory['batch_size']})"
    )
    if memory["limit_bytes"] is not None:
        share = memory["bytes"] / memory["limit_bytes"]
        used = f"{share:.0%}" if share >= 0.01 else "under 1%"
        line += f" of {format_bytes(memory['limit_bytes'])} ({memory['limit']}): {used} used"
    return line
