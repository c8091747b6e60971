"""Every Triton kernel a training step launches compiles for a GPU (sm_90), checked without one.

``benchmarks/speed/triton_compile.py --smoke``: one step of each Triton kernel setting of ``gpu_step.py``
(tiny presets) under Triton's interpreter records each launch; a child process without the interpreter
compiles each through Triton's NVIDIA backend and ``ptxas`` (both in Triton's wheel) to a cubin. The
interpreter alone runs kernels the compiler refuses (a module constant read inside a kernel, for one).
"""

import json
import platform

import pytest

from syntaxformer.kernels import triton_runs_on

pytestmark = pytest.mark.skipif(
    not triton_runs_on("cpu") or platform.machine() != "x86_64",
    reason="needs Triton's interpreter and its x86-64 wheel's ptxas (pip install triton; TRITON_INTERPRET=1)",
)

#: every kernel the package launches, by module
KERNELS = {
    "syntaxformer.kernels.triton_prior": {
        "_prior_chain_forward",
        "_prior_chain_backward",
        "_laplace_attention_forward",
        "_laplace_attention_backward",
    },
    "syntaxformer.kernels.triton_on_lstm": {"_on_lstm_cell_forward", "_on_lstm_cell_backward"},
    "syntaxformer.kernels.triton_dependency": {"_dependency_forward", "_dependency_backward"},
    "syntaxformer.kernels.triton_dependency_attention": {"_attention_forward", "_attention_backward"},
}


def test_every_kernel_compiles_for_sm_90(tmp_path, capsys):
    from benchmarks.speed.triton_compile import main

    out = tmp_path / "compile.json"
    assert main(["--smoke", "--out", str(out)]) == 0, capsys.readouterr().err
    record = json.loads(out.read_text())
    launched = {}
    for launch in record["launches"]:
        module, name = launch["kernel"].rsplit(".", 1)
        launched.setdefault(module, set()).add(name)
        compiled = launch["compiled"]["90"]
        assert "error" not in compiled, (launch["kernel"], compiled)
        assert compiled["registers"] > 0 and compiled["cubin_bytes"] > 0
    assert launched == KERNELS
    # the attention kernels were compiled with exact float32 products and with TF32 ones
    precisions = {
        launch["constexprs"]["PRECISION"] for launch in record["launches"] if "PRECISION" in launch["constexprs"]
    }
    assert precisions == {"ieee", "tf32"}


def test_the_longest_sentences_are_the_kernels_own():
    from benchmarks.speed.triton_compile import LONGEST
    from syntaxformer.kernels import triton_dependency, triton_dependency_attention, triton_prior

    assert LONGEST == {"tree-transformer": triton_prior.MAX_TOKENS, "structformer": triton_dependency.MAX_TOKENS}
    assert triton_dependency_attention.MAX_TOKENS == triton_dependency.MAX_TOKENS  # one batch takes both
