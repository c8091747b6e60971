"""Compile every Triton kernel a training step launches for a real GPU, on a machine without one.

    python -m benchmarks.speed.triton_compile --out records/benchmarks/triton-compile.json  # gpu_step's cases, sm_90
    python -m benchmarks.speed.triton_compile --smoke --arch 80 90                      # tiny presets (seconds)

The Triton kernels (``syntaxformer/kernels/triton_*.py``) are tested on the CPU in Triton's interpreter,
which checks their arithmetic but not that Triton's compiler accepts them for a GPU (the interpreter
runs the Python body with NumPy; register tiles, ``tl.dot`` shapes and dtypes, scans and layouts are the
compiler's). This closes that gap without a GPU, in two steps:

1. This process, under the interpreter (``TRITON_INTERPRET=1``, set here before Triton's import): one
   eager training step of each case of ``gpu_step.py`` whose kernel setting is a Triton one, at the
   case's sentence length and at the longest the kernels take (:data:`LONGEST`, where the sizes depend on
   the length), two sentences each; every launch is recorded (the kernel, its arguments' types, its
   compile-time arguments and ``num_warps``) and repeated launches are counted once.
2. A child process without the interpreter: each recorded launch compiled by Triton's NVIDIA backend
   for ``cuda`` at each ``--arch`` (compute capability, 90 = H100/H200), through ``ptxas`` (shipped in
   Triton's wheel) to a cubin: what the GPU's first launch would compile. No GPU or driver is needed.

The record (``--out``): ``triton`` (the version that compiled), ``recorded_with_triton`` (the
interpreter's), ``torch``, ``code``, ``arch`` and per kernel launch ``kernel``, ``signature`` (argument
types), ``constexprs``, ``num_warps``, ``cases`` (which cases launched it) and per architecture the
compiled cubin's size, its ``registers``, ``stack_bytes`` and ``local_bytes`` per thread (what does not
fit in the registers spills there: a slower kernel) and ``shared_bytes`` per program, or the compiler's
``error``. Exits 1 if any launch fails to compile. A compile check, not a run: whether the kernels are
right on a GPU is ``tests/kernels/test_cuda.py``'s to say, how fast ``gpu_step.py``'s.

The GPU machines run the Triton of their own PyTorch (PyTorch 2.11's release pins Triton 3.6, 2.12's
3.7; ``benchmarks/speed/gpu_session.sh`` logs the version), which compiles differently: ``--triton-dir`` compiles with another Triton unpacked into a folder, for instance::

    .venv/bin/pip download --no-deps --only-binary=:all: -d /tmp/w "triton==3.7.*"
    python -m zipfile -e /tmp/w/triton-3.7.*.whl /tmp/triton-3.7 && chmod +x /tmp/triton-3.7/triton/backends/nvidia/bin/*
    python -m benchmarks.speed.triton_compile --triton-dir /tmp/triton-3.7 --out records/benchmarks/triton-compile-3.7.json
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

if (
    "--compile-stdin" not in sys.argv and os.environ.get("TRITON_INTERPRET") != "0"
):  # step 1 interprets; step 2 (this module's child) compiles
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton's first import (torch's included)

import torch  # noqa: E402

from benchmarks.speed.gpu_step import CASES, code_record, eager_runner, sized, step_loop, synthetic_batch  # noqa: E402
from syntaxformer.kernels import triton_dependency, triton_prior  # noqa: E402

#: the longest sentence each model's Triton kernels take (``MAX_TOKENS`` of their modules): block sizes grow
#: with it; a model not named has kernels whose sizes do not depend on the length (one length is enough)
LONGEST = {"tree-transformer": triton_prior.MAX_TOKENS, "structformer": triton_dependency.MAX_TOKENS}
#: rows of every recorded step (launch options depend on the sizes of a row, not on the rows)
ROWS = 2

_DTYPES = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "i1",
}


def triton_cases(smoke: bool) -> list[tuple]:
    """``(label, case)`` for each case of ``gpu_step.py`` with a Triton kernel setting, at its length and at
    :data:`LONGEST` (``ROWS`` rows each; ``smoke``: tiny presets, lengths 12 and 27)."""
    out = []
    for case in CASES:
        model, preset, prior, _, length, overrides = sized(case, smoke)
        if "triton" not in map(str, overrides.values()):
            continue
        lengths = [length] if model not in LONGEST else [length, 27 if smoke else LONGEST[model]]
        for n in lengths:
            out.append((f"{model} {preset} {prior} {ROWS} x {n}", (model, preset, prior, ROWS, n, overrides)))
    return out


def _arg_type(value) -> str:
    """Triton's signature type of a runtime argument."""
    if isinstance(value, torch.Tensor):
        return "*" + _DTYPES[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"no Triton type for an argument of type {type(value).__name__}")


def launch_record(kernel, args: tuple, kwargs: dict) -> dict:
    """What compiling one launch needs: the kernel's module and name, the type of each runtime argument,
    the compile-time arguments (``tl.constexpr`` parameters and ``None``), ``num_warps``."""
    fn = kernel.fn
    parameters = inspect.signature(fn).parameters
    bound = inspect.signature(fn).bind(*args, **{k: v for k, v in kwargs.items() if k in parameters}).arguments
    signature, constexprs = {}, {}
    for name, value in bound.items():
        if "constexpr" in str(parameters[name].annotation) or value is None:
            signature[name], constexprs[name] = "constexpr", value
        else:
            signature[name] = _arg_type(value)
    return dict(
        kernel=f"{fn.__module__}.{fn.__name__}",
        signature=signature,
        constexprs=constexprs,
        num_warps=kwargs.get("num_warps", 4),
    )


def record_launches(smoke: bool) -> list[dict]:
    """The distinct Triton launches of one eager step of each case of :func:`triton_cases` (interpreter)."""
    from triton.runtime.interpreter import InterpretedFunction

    launches: dict[str, dict] = {}
    run = InterpretedFunction.run
    current = []

    def recording(self, *args, grid, warmup, **kwargs):
        record = launch_record(self, args, kwargs)
        key = json.dumps(record, sort_keys=True, default=str)
        launches.setdefault(key, dict(record, cases=[]))
        if current[0] not in launches[key]["cases"]:
            launches[key]["cases"].append(current[0])
        return run(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = recording
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        for label, (model, preset, _, rows, length, overrides) in triton_cases(smoke):
            for tf32 in (False, True):  # the eager step's float32 products and the fast step's TF32 ones
                torch.backends.cuda.matmul.allow_tf32 = tf32
                current[:] = [label + (", TF32" if tf32 else "")]
                loop = step_loop(model, preset, overrides, torch.device("cpu"))
                eager_runner(loop)(synthetic_batch(model, rows, length, torch.device("cpu"), fixed=True))
    finally:
        InterpretedFunction.run = run
        torch.backends.cuda.matmul.allow_tf32 = before
    return list(launches.values())


def compile_launch(launch: dict, arch: int) -> dict:
    """Compile one recorded launch for ``cuda`` at compute capability ``arch`` (a process without the
    interpreter): the cubin's size, registers and spills per thread, or the compiler's error."""
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module, name = launch["kernel"].rsplit(".", 1)
    kernel = getattr(importlib.import_module(module), name)
    source = ASTSource(kernel, signature=launch["signature"], constexprs=launch["constexprs"])
    try:
        compiled = triton.compile(
            source, target=GPUTarget("cuda", arch, 32), options={"num_warps": launch["num_warps"]}
        )
    except Exception as error:  # the record: the innermost cause (the compiler's own message) and where
        cause = error
        while cause.__cause__ is not None:
            cause = cause.__cause__
        where = str(error).strip().splitlines()[:1]
        return dict(error=f"{type(cause).__name__}: {str(cause).strip()[:400]} ({' '.join(where)})")
    return dict(cubin_bytes=len(compiled.asm["cubin"]), **resource_usage(compiled.asm["cubin"]))


def resource_usage(cubin: bytes) -> dict:
    """Registers, stack and local memory (bytes per thread: what does not fit in the registers spills there,
    a slower kernel) and shared memory (bytes per program) of a cubin's kernel, read by
    ``cuobjdump -res-usage`` (shipped in Triton's wheel)."""
    import tempfile

    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        text = subprocess.run([str(tool), "-res-usage", file.name], capture_output=True, text=True, check=True).stdout
    fields = dict(item.split(":", 1) for item in text.split() if item.count(":") == 1 and item.split(":")[1].isdigit())
    return dict(
        registers=int(fields["REG"]),
        stack_bytes=int(fields["STACK"]),
        local_bytes=int(fields["LOCAL"]),
        shared_bytes=int(fields["SHARED"]),
    )


def compile_all(launches: list[dict], arches: list[int], triton_dir: str | None = None) -> tuple[str, list[dict]]:
    """:func:`compile_launch` for every launch and architecture, in a child process without the
    interpreter (``TRITON_INTERPRET`` unset before its Triton import), with the Triton installed in
    ``triton_dir`` (a folder holding a ``triton`` package, e.g. an unpacked wheel) or this one. Returns the
    compiling Triton's version and the results."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton's default, said aloud (no warning)
    if triton_dir:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(triton_dir).resolve()), env.get("PYTHONPATH")]))
    payload = json.dumps(dict(launches=launches, arches=arches))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed.triton_compile", "--compile-stdin"],
        input=payload, capture_output=True, text=True, env=env, cwd=root, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the compiling process failed: {done.stderr.strip().splitlines()[-1:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return answer["triton"], answer["results"]


def _compile_stdin() -> int:
    import triton

    payload = json.loads(sys.stdin.read())
    results = []
    for launch in payload["launches"]:
        results.append({str(arch): compile_launch(launch, arch) for arch in payload["arches"]})
    print(json.dumps(dict(triton=triton.__version__, results=results)))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny presets and short sentences (seconds)")
    p.add_argument("--arch", type=int, nargs="+", default=[90], help="compute capabilities (90: H100/H200)")
    p.add_argument(
        "--triton-dir",
        default=None,
        help="compile with the Triton package in this folder (an unpacked wheel of another version) instead of this one",
    )
    p.add_argument("--out", default=None)
    p.add_argument("--compile-stdin", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.compile_stdin:
        return _compile_stdin()
    import triton

    launches = record_launches(args.smoke)
    compiler, results = compile_all(launches, args.arch, args.triton_dir)
    for launch, compiled in zip(launches, results):
        launch["compiled"] = compiled
        short = launch["kernel"].rsplit(".", 1)[1]
        for arch, result in compiled.items():
            status = result.get("error") or (
                f"{result['registers']} registers, {result['stack_bytes'] + result['local_bytes']} stack and local "
                f"(spilled) bytes per thread, {result['shared_bytes']} shared bytes"
            )
            print(f"sm_{arch} {short} num_warps={launch['num_warps']} ({', '.join(launch['cases'])}): {status}")
    record = dict(
        what="every Triton launch of one eager training step of gpu_step.py's Triton cases, compiled for CUDA "
        "without a GPU (Triton's NVIDIA backend and ptxas)",
        triton=compiler,
        recorded_with_triton=triton.__version__,
        torch=torch.__version__,
        code=code_record(None),
        arch=args.arch,
        smoke=args.smoke,
        launches=launches,
    )
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1, default=str) + "\n")
    failed = [launch["kernel"] for launch in launches if any("error" in r for r in launch["compiled"].values())]
    if failed:
        print(f"error: {len(failed)} launches did not compile: {', '.join(sorted(set(failed)))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
