"""Build (once, with the system C compiler) and load the fused CPU kernels of the mixed norms.

The kernels are plain C with no torch headers, so a build takes about a second; the shared object is
cached under ``$NORMLAB_KERNEL_CACHE`` (default ``~/.cache/normlab/kernels``) keyed by a hash of the
source, the flags and the CPU, and loaded with ctypes. Anything that goes wrong (no compiler, a read-only
home, an exotic CPU) disables the fast path with one warning: callers then use the eager torch path,
which computes the same function. ``NORMLAB_FUSED_NORMS=0`` turns the fast path off on purpose.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

__all__ = ["fused_kernels_enabled", "load_mixed_norm_library"]

_SOURCE = Path(__file__).with_name("kernels") / "mixed_norm_cpu.c"
# No -ffinite-math-only: a NaN in the input must still come out as NaN so divergence stays visible.
_FLAGS = (
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-freciprocal-math",
    "-fopenmp",
    "-shared",
    "-fPIC",
)
_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_load_failed = False


def fused_kernels_enabled() -> bool:
    """True unless the user switched the fused CPU kernels off with NORMLAB_FUSED_NORMS=0."""
    return os.environ.get("NORMLAB_FUSED_NORMS", "1").strip().lower() not in {"0", "false", "no", "off"}


def _cpu_fingerprint() -> str:
    # -march=native bakes the instruction set into the binary: a cache shared between different
    # machines must not hand one CPU's build to another.
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            lines = [ln for ln in handle if ln.startswith(("model name", "flags"))][:2]
    except OSError:
        lines = []
    return platform.machine() + "".join(lines)


def _cache_dir() -> Path:
    root = os.environ.get("NORMLAB_KERNEL_CACHE") or Path.home() / ".cache" / "normlab" / "kernels"
    return Path(root)


def _build(target: Path) -> None:
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise RuntimeError("no C compiler found (install gcc)")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build into a temporary name and rename: concurrent Ray workers never load a half-written file.
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".so", delete=False) as tmp:
        tmp_path = Path(tmp.name)
    try:
        subprocess.run(
            [compiler, *_FLAGS, "-o", str(tmp_path), str(_SOURCE), "-lm"],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        os.replace(tmp_path, target)
    except subprocess.CalledProcessError as error:
        tmp_path.unlink(missing_ok=True)
        raise RuntimeError(f"compiling {_SOURCE.name} failed: {error.stderr.strip()[:500]}") from error
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def _declare(library: ctypes.CDLL) -> None:
    ptr, f32, i32, i64 = ctypes.c_void_p, ctypes.c_float, ctypes.c_int, ctypes.c_long
    library.mixed_norm_forward.restype = None
    library.mixed_norm_forward.argtypes = [
        ptr,
        ptr,
        ptr,
        ptr,
        f32,
        f32,
        i32,
        i64,
        i64,
        i64,
        i32,
        ptr,
        ptr,
        ptr,
    ]
    library.mixed_norm_backward.restype = None
    library.mixed_norm_backward.argtypes = [
        *(ptr, ptr, ptr, ptr, ptr, ptr),
        *(f32, i32, i64, i64, i64, i32),
        *(ptr, ptr, ptr, ptr, ptr),
    ]
    library.autonorm_state_width.restype = i64
    library.autonorm_state_width.argtypes = [i64, i64, i64]
    library.autonorm_work_width.restype = i64
    library.autonorm_work_width.argtypes = [i64, i64, i64]
    library.autonorm_forward.restype = None
    library.autonorm_forward.argtypes = [
        *(ptr, f32, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr),
        *(f32, i32, f32, i64, i64, i64, i64, i32),
        *(ptr, ptr, ptr),
    ]
    library.autonorm_backward.restype = None
    library.autonorm_backward.argtypes = [
        *(ptr, ptr, f32, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr),
        *(f32, i32, i64, i64, i64, i64, i32),
        *(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr),
    ]


def load_mixed_norm_library() -> ctypes.CDLL | None:
    """The loaded kernel library, or None when the fused path is disabled or cannot be built here."""
    global _library, _load_failed
    if _library is not None or _load_failed or not fused_kernels_enabled():
        return _library
    with _lock:
        if _library is not None or _load_failed:
            return _library
        try:
            digest = hashlib.sha256(
                _SOURCE.read_bytes() + " ".join(_FLAGS).encode() + _cpu_fingerprint().encode()
            ).hexdigest()[:20]
            target = _cache_dir() / f"mixed_norm_cpu_{digest}.so"
            if not target.exists():
                _build(target)
            library = ctypes.CDLL(str(target))
            _declare(library)
            _library = library
        except Exception as error:  # any failure means: use the eager path
            _load_failed = True
            warnings.warn(
                f"NormLab fused CPU norm kernels unavailable ({error}); using the slower eager path.",
                RuntimeWarning,
                stacklevel=2,
            )
    return _library
