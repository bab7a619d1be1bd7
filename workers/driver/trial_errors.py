"""Why trials and studies failed, in words people can act on.

A failed trial's error is `<Type>: <message>` on its first line, then the last lines of its trace: read
from the text Tune writes into the trial's error file on the driver (what the trial raised, as Ray
reports it). The recorder stores it in the trial's row and tags the trial's MLflow run with it; the study
page shows the row's. A failed study's error starts with one line that says why: the driver's own error,
or, when no trial succeeded, that every trial failed and the first one's error, with the trial's key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from studies.store import TrialStatus, TrialView

__all__ = [
    "MAX_STUDY_ERROR_CHARS",
    "MAX_TRIAL_ERROR_CHARS",
    "NoTrialSucceededError",
    "describe_trial_error",
    "study_error",
    "trial_error_text",
]

# Lines of a trial's trace kept after its headline: the frames nearest the error, where the cause is.
TRACE_LINES = 12
# What a trial's row (and the study page's cell, and the MLflow tag, which holds 8000) keeps of its error.
MAX_TRIAL_ERROR_CHARS = 4000
# What a study's row keeps: its one-line summary, then as much of the detail as fits.
MAX_STUDY_ERROR_CHARS = 8000
NO_ERROR_RECORDED = "trial failed; Tune recorded no error for it (the study's Ray job log may say more)"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Ray colours the remote task's name
_FAILURE = re.compile(r"^Failure # \d+ \(occurred at [^)]*\)[ \t]*$", re.MULTILINE)
_CARETS = re.compile(r"^\s*[\^~]+\s*$")  # Python's markers under the failing expression
# An exception's own line: `RuntimeError: ...`, `torch.OutOfMemoryError: ...` (at column 0; frames and
# Ray's details are indented).
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*: \S")


class NoTrialSucceededError(RuntimeError):
    """A study whose experiments ended with no trial succeeded: nothing to compare, so the study failed."""


def trial_error_text(trial: Any) -> str | None:
    """The text Tune wrote about a Tune trial's failures: its error file on the driver, else the copy in
    the experiment's storage (Trial.get_error, which reads only that copy and finds nothing before Tune
    syncs the trial's directory: the error a trial row said was never recorded), else None."""
    path = getattr(trial, "error_file", None)
    if path:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    try:
        text = trial.get_error()
    except Exception:  # storage unreachable: the row says no error was recorded
        return None
    return str(text) if text else None


def describe_trial_error(text: str | None) -> str:
    """`<Type>: <message>`, then the last TRACE_LINES lines of the trace, of the trial's last failure in
    Tune's error text (a trial retried under max_failures appends one block per failure)."""
    if not text or not text.strip():
        return NO_ERROR_RECORDED
    blocks = [block for block in _FAILURE.split(_ANSI.sub("", text)) if block.strip()]
    lines = [
        line.rstrip()
        for line in (blocks[-1] if blocks else text).splitlines()
        if line.strip() and not _CARETS.match(line)
    ]
    if not lines:
        return NO_ERROR_RECORDED
    # The last exception line is the error itself: Ray's wrapper and chained causes come before it.
    headline = next((line for line in reversed(lines) if _EXCEPTION_LINE.match(line)), lines[0])
    trace = lines[-TRACE_LINES:]
    return _bounded(headline, "\n".join(trace), MAX_TRIAL_ERROR_CHARS)


def study_error(trials: Sequence[TrialView], *, cause: BaseException, trace: str) -> str:
    """A failed study's error: one line that says why, then the first failed trial's error (when no trial
    succeeded) and the driver's traceback, as much of both as MAX_STUDY_ERROR_CHARS holds."""
    failed = [trial for trial in trials if trial.status == TrialStatus.FAILED]
    succeeded = any(trial.status == TrialStatus.SUCCEEDED for trial in trials)
    first = failed[0] if failed else None
    first_error = f"first error: {_headline(first.error)} (trial {_short_key(first)})" if first else ""
    if first is not None and not succeeded:
        if len(failed) == len(trials):
            summary = f"every trial failed ({len(failed)}); {first_error}"
        else:
            summary = f"no trial succeeded ({len(failed)} of {len(trials)} failed); {first_error}"
    else:
        summary = _one_line(cause)
        if first is not None:
            summary += f" ({len(failed)} of {len(trials)} trials failed; {first_error})"
    details = []
    if first is not None and not succeeded:
        details.append(f"trial {_short_key(first)}:\n{first.error or NO_ERROR_RECORDED}")
    if not isinstance(cause, NoTrialSucceededError):
        details.append(trace.rstrip())
    return _bounded(summary, "\n\n".join(details), MAX_STUDY_ERROR_CHARS, separator="\n\n")


def _one_line(error: BaseException) -> str:
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


def _headline(error: str | None) -> str:
    lines = (error or "").strip().splitlines()
    return lines[0] if lines else NO_ERROR_RECORDED


def _short_key(trial: TrialView) -> str:
    """The trial's key without its study's id, which the study's own error need not repeat."""
    prefix = f"{trial.study_id}/"
    return trial.trial_key[len(prefix) :] if trial.trial_key.startswith(prefix) else trial.trial_key


def _bounded(headline: str, detail: str, limit: int, *, separator: str = "\n") -> str:
    """The headline whole (up to `limit`), then the end of `detail`, where a trace's cause is."""
    headline = headline[:limit]
    room = limit - len(headline) - len(separator)
    if not detail or room <= 3:
        return headline
    if len(detail) > room:
        detail = "..." + detail[-(room - 3) :]
    return f"{headline}{separator}{detail}"
