"""TrainArguments split by concern: its fields are the concern classes' fields, in the order every
saved ``training.json`` records them (so saved runs, resume and reports are unchanged)."""

import json
from dataclasses import asdict, fields

from syntaxformer.training import (
    DataArguments,
    FineTuneArguments,
    ModelArguments,
    OptimisationArguments,
    OutputArguments,
    RunArguments,
    RunningTextArguments,
    TrainArguments,
)

#: the order of ``arguments`` in training.json before the split (one flat dataclass)
RECORDED = (
    "out model preset prior overrides corpus valid trees phrases induced_from valid_fraction tokenizer min_freq "
    "max_vocab wordpiece_vocab_size add_cls max_length overflow batch_size max_tokens bucket_batches mask_rate "
    "mask_replace lr betas eps weight_decay warmup_steps schedule final_lr_fraction schedule_steps clip max_steps "
    "epochs max_minutes save_every eval_every eval_treebank keep_best early_stopping log_every seed device bf16 "
    "threads resume quiet init_from head_gates gate_l0 gate_temperature gate_lr gate_init"
).split()
#: fields added since, each in its concern (an older record lacks them; resuming it takes their defaults)
ADDED = set(
    "max_sentence_length shuffle mask_cls bptt optimizer nonmono asgd_restart_epoch ar_alpha tar_beta "
    "eval_batch_size plateau_factor plateau_patience min_batch_tokens mask_unknown eval_each_epoch final_model "
    "pad_to_multiple fixed_shapes prefetch tf32 step_graph exclude_treebank".split()
)
CONCERNS = (
    OutputArguments,
    ModelArguments,
    DataArguments,
    OptimisationArguments,
    RunArguments,
    FineTuneArguments,
    RunningTextArguments,
)


def test_the_concerns_partition_the_fields_in_the_recorded_order():
    by_concern = [f.name for concern in CONCERNS for f in fields(concern)]
    assert by_concern == [f.name for f in fields(TrainArguments)]
    assert [name for name in by_concern if name not in ADDED] == RECORDED
    assert set(by_concern) - set(RECORDED) == ADDED
    assert all(isinstance(TrainArguments(out="x"), concern) for concern in CONCERNS)


def test_saved_arguments_are_the_flat_json_they_were():
    args = TrainArguments(out="run", lr=3e-4, max_steps=10, overrides={"hidden_size": 64})
    assert [name for name in json.loads(json.dumps(asdict(args))) if name not in ADDED] == RECORDED
    assert asdict(args)["lr"] == 3e-4 and asdict(args)["overrides"] == {"hidden_size": 64}
