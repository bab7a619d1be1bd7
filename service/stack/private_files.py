"""What `normlab serve` writes is readable by its user only: the data dir (databases, tokens, logs, MLflow's
store, Tune results and checkpoints) is 0700, the files it and its children create 0600 (umask 0o077), and
the local Ray head's temp dir, which Ray makes 0777, lies in a parent only this user can enter.

A data dir left looser by an earlier version is tightened on start, and one WARNING line says what was.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "PRIVATE_UMASK",
    "PrivateDirError",
    "Tightened",
    "prepare_data_dir",
    "private_tmp_dir",
    "private_umask",
    "tighten",
]

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077  # new files 0600, new directories 0700
_OTHERS = 0o077  # the group's and everyone else's permission bits
_SHOWN = 5  # entries the warning names before "and N more"


class PrivateDirError(OSError):
    """A directory that must be private cannot be (another user owns it, or it is no directory)."""


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files created meanwhile, by this process and every child it starts, are private. The umask is the
    process's, so it is set by the process that starts the stack (`normlab serve`) and restored after."""
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


@dataclass
class Tightened:
    """What tighten() changed: (path relative to the root, old mode, new mode); what it could not."""

    root: Path
    changed: list[tuple[str, int, int]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed or self.failed)

    def summary(self) -> str:
        """One line: what was made private, and what could not be."""
        shown = [f"{name} {old:04o} -> {new:04o}" for name, old, new in self.changed[:_SHOWN]]
        more = len(self.changed) - _SHOWN
        line = f"made {self.root} private (other users could read it): " + ", ".join(shown)
        if more > 0:
            line += f" and {more} more"
        if self.failed:
            line += f"; could not tighten {', '.join(self.failed[:_SHOWN])} (not this user's?)"
        return line


def tighten(root: Path) -> Tightened:
    """Take the group's and others' permissions away from `root` and, where `root` was open to them,
    from everything under it (no symlink is followed). A root already closed to them hides what it holds,
    so then only its own entries are looked at: a start does not walk every checkpoint ever written."""
    result = Tightened(root)
    was_open = _make_private(root, root, result)
    for path in sorted(_everything_under(root) if was_open else root.iterdir()):
        _make_private(path, root, result)
    return result


def _everything_under(root: Path) -> Iterator[Path]:
    for directory, dirs, files in os.walk(root):  # does not descend into symlinked directories
        yield from (Path(directory, name) for name in (*dirs, *files))


def _make_private(path: Path, root: Path, result: Tightened) -> bool:
    """Clear the group's and others' bits of `path` (a symlink is left alone: it may point anywhere);
    returns whether any were set."""
    try:
        info = path.stat() if path == root else path.lstat()
    except FileNotFoundError:
        return False  # removed meanwhile (a running stack writes here)
    if stat.S_ISLNK(info.st_mode) or not info.st_mode & _OTHERS:
        return False
    old = stat.S_IMODE(info.st_mode)
    name = "the data dir" if path == root else str(path.relative_to(root))
    try:
        path.chmod(old & ~_OTHERS)
    except OSError:
        result.failed.append(name)
    else:
        result.changed.append((name, old, old & ~_OTHERS))
    return True


def prepare_data_dir(data_dir: Path) -> Tightened:
    """Create `data_dir` 0700, or tighten an existing one (one WARNING line when anything was loose)."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    tightened = tighten(data_dir)
    if tightened:
        log.warning("%s", tightened.summary())
    return tightened


def private_tmp_dir(base: Path = Path("/tmp")) -> Path:
    """`/tmp/normlab-<uid>`, 0700 and this user's, for what must live at a short path (Ray's session dirs
    hold unix sockets, whose paths are limited to ~107 bytes) yet be private. Not $TMPDIR: it may be long
    (macOS). A directory another user made there first is refused, not used."""
    uid = os.getuid()
    path = base / f"normlab-{uid}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
        raise PrivateDirError(
            f"{path} is not a directory of this user (uid {uid}): remove it, or set NORMLAB_RAY_TEMP_DIR "
            "to a short path in a directory only you can enter"
        )
    if info.st_mode & _OTHERS:
        path.chmod(0o700)
    return path
