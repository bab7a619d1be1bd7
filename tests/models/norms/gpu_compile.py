"""Compile the Triton norm kernels for a GPU without one: Triton's real compiler down to a cubin (its own
ptxas), for an sm_90 (H100/H200) target. Run with TRITON_INTERPRET unset, in a process of its own
(test_triton_kernels_compile.py does): under the interpreter the kernels are not compilable objects.

    python tests/models/norms/gpu_compile.py     # one JSON line per kernel variant

The interpreter runs kernels as NumPy, so it accepts code the GPU compiler rejects (a global that is not a
constexpr, for one); this catches those errors on a machine without a GPU. Each line: the variant, and
either the registers per thread and spill bytes ptxas reports, or the compiler's error.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
FLOAT_ARGS = {"tau", "eps", "inv_tau"}


def signature(
    fn: Any, pointer_types: dict[str, str], constexprs: dict[str, Any], float_type: str = "fp32"
) -> dict[str, str]:
    """Triton types of a kernel's arguments: pointers float32 unless named in pointer_types, the FLOAT_ARGS
    float_type (float32 from a direct launch, float64 as Inductor may pass Python floats), the other
    scalars int32, constexprs as given."""
    types = {}
    for name in fn.arg_names:
        if name in constexprs:
            types[name] = "constexpr"
        elif name.endswith("_ptr"):
            types[name] = pointer_types.get(name, "*fp32")
        else:
            types[name] = float_type if name in FLOAT_ARGS else "i32"
    return types


def resources(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers per thread, spill stores in bytes) of a cubin, from the cuobjdump Triton ships."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        out = subprocess.run([str(tool), "--dump-resource-usage", file.name], capture_output=True, text=True)
    registers = re.search(r"REG:(\d+)", out.stdout)
    spills = re.search(r"STACK:(\d+)", out.stdout)
    return (int(registers.group(1)) if registers else None, int(spills.group(1)) if spills else None)


def compile_variant(
    fn: Any,
    pointer_types: dict[str, str],
    constexprs: dict[str, Any],
    num_warps: int,
    float_type: str = "fp32",
) -> dict:
    types = signature(fn, pointer_types, constexprs, float_type)
    # Pointers 16-byte aligned, as torch allocates them: the specialisation a real launch gets.
    attrs = {
        (fn.arg_names.index(n),): [["tt.divisibility", 16]] for n, t in types.items() if t.startswith("*")
    }
    source = triton.compiler.ASTSource(fn=fn, signature=types, constexprs=constexprs, attrs=attrs)
    backend = triton.compiler.make_backend(TARGET)
    options = backend.parse_options({"num_warps": num_warps})
    try:
        kernel = triton.compile(source, target=TARGET, options=options.__dict__)
    except Exception as error:  # the compiler's error is the result
        return {"ok": False, "error": f"{type(error).__name__}: {str(error)[:2000]}"}
    registers, stack = resources(kernel.asm["cubin"])
    return {"ok": True, "registers": registers, "stack_bytes": stack}


def variants() -> list[tuple[str, Any, dict[str, str], dict[str, Any], int, str]]:
    """The flag combinations of both AutoNorm kernels at the ViT-Lite layer (bf16, the training dtype) and
    one ViT-B-sized layer (float32), and the mixed-norm pair; then the kernels that take float scalars
    again with those typed float64, as torch.compile's Inductor launched them on an H200 (the AutoNorm
    backward failed to compile there until its kernels cast them to float32)."""
    from models.norms import autonorm_triton, mixed_triton

    found = []
    for x_type, (tokens, dim, width), combos in (
        ("*bf16", (65, 128, 32), ((False, False, False), (True, True, True))),
        ("*fp32", (197, 768, 192), ((True, False, False),)),
    ):
        bt, bd, bh, warps = autonorm_triton._blocks(tokens, dim, width, autonorm_triton.FORWARD_TILE_ELEMENTS)
        for noise, weights, hard in combos:
            flags = {"HAS_NOISE": noise, "HAS_TOKEN_WEIGHTS": weights, "HARD": hard}
            found.append((
                f"autonorm forward {x_type} T={tokens} D={dim} {flags}",
                autonorm_triton._autonorm_forward_kernel, {"x_ptr": x_type},
                {**flags, "BLOCK_T": bt, "BLOCK_D": bd, "BLOCK_H": bh}, warps, "fp32",
            ))  # fmt: skip
        bt, bd, bh, warps = autonorm_triton._blocks(
            tokens, dim, width, autonorm_triton.BACKWARD_TILE_ELEMENTS
        )
        for weights in sorted({combo[1] for combo in combos}):
            found.append((
                f"autonorm backward {x_type} T={tokens} D={dim} token_weights={weights}",
                autonorm_triton._autonorm_backward_kernel, {"x_ptr": x_type, "dx_ptr": x_type},
                {"HAS_TOKEN_WEIGHTS": weights, "BLOCK_T": bt, "BLOCK_D": bd, "BLOCK_H": bh}, warps, "fp32",
            ))  # fmt: skip
    # The mixed-norm kernels, known to compile on an H200: a check that this harness compiles at all.
    for tile, fn in (
        (mixed_triton.FORWARD_TILE_ELEMENTS, mixed_triton._mixed_norm_forward_kernel),
        (mixed_triton.BACKWARD_TILE_ELEMENTS, mixed_triton._mixed_norm_backward_kernel),
    ):
        bt, bd, _, _, warps = mixed_triton._launch_config(128, 65, 128, tile)
        pointers = {"x_ptr": "*bf16", "y_ptr": "*fp32", "dx_ptr": "*bf16"}
        found.append((
            f"mixed norm {fn.fn.__name__} *bf16", fn, pointers, {"USE_LN": True, "BLOCK_T": bt, "BLOCK_D": bd},
            warps, "fp32",
        ))  # fmt: skip
    as_inductor_passes = [
        (f"{name} float64 scalars", fn, pointers, constexprs, warps, "fp64")
        for name, fn, pointers, constexprs, warps, _ in found
        if "*bf16" in name and set(fn.arg_names) & FLOAT_ARGS
    ]
    return found + as_inductor_passes


def main() -> int:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("run with TRITON_INTERPRET unset: interpreted kernels cannot be compiled", file=sys.stderr)
        return 2
    for name, fn, pointer_types, constexprs, warps, float_type in variants():
        result = compile_variant(fn, pointer_types, constexprs, warps, float_type)
        print(json.dumps({"variant": name, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
