"""benchmarks/speed/op_count.py counts a step's operators: Triton launches exactly as the kernels' design
says (four per Tree Transformer layer, two per ON-LSTM step and layer, two per StructFormer step and two
per StructFormer layer), the interpreter's own work not."""

import pytest

from syntaxformer.kernels import triton_runs_on

pytestmark = pytest.mark.skipif(
    not triton_runs_on("cpu"), reason="needs Triton's interpreter (pip install triton; TRITON_INTERPRET=1)"
)


def _case(model, prior):
    from benchmarks.speed.gpu_step import CASES

    return next(c for c in CASES if c[0] == model and c[2] == prior)


def test_triton_launches_are_the_kernels_design():
    from benchmarks.speed.op_count import count_case

    tree = count_case(_case("tree-transformer", "constituent-triton"), smoke=True)
    literal = count_case(_case("tree-transformer", "constituent"), smoke=True)
    lstm = count_case(_case("on-lstm", "cell-triton"), smoke=True)
    layers = 3  # the tiny presets
    # per layer: the prior chain forward and backward, the prior attention forward and backward
    assert tree["triton_kernels"] == 4 * layers and literal["triton_kernels"] == 0
    assert tree["ops_per_step"] < literal["ops_per_step"]
    rows, length = map(int, lstm["batch"].split(" x "))
    assert lstm["triton_kernels"] == 2 * length * layers  # each step of each layer, forward and backward
    assert tree["ops_per_step"] == tree["aten_ops"] + tree["triton_kernels"]


def test_the_structformer_parse_stage_is_two_launches_and_each_attention_two():
    from benchmarks.speed.op_count import count_case

    fused = count_case(_case("structformer", "dependency-triton"), smoke=True)
    written = count_case(_case("structformer", None), smoke=True)
    layers = 2  # the tiny preset
    # the stage forward and backward, each layer's attention forward and backward
    assert fused["triton_kernels"] == 2 + 2 * layers and written["triton_kernels"] == 0
    # the written stage is about 250 operators, each layer's attention about 40 (tests/kernels/test_kernel_table.py
    # checks they are the same function)
    assert written["ops_per_step"] - fused["ops_per_step"] > 200 + 20 * layers
