"""A training step waits for no value from the device: no host synchronisation inside
``TrainingLoop.device_step`` (forward, backward, clipping, optimizer, schedule) for every language model
of the registry, checked on the CPU by a dispatch mode that refuses the operations that read a tensor's
value on the host (``aten._local_scalar_dense``: ``.item()``, ``bool()``, ``int()``; ``aten.nonzero``;
``aten.is_nonzero``). The batch is built and counted on the host before the step."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from syntaxformer.tasks.language_model import Trainer
from syntaxformer.tasks.running_text import RunningTextTrainer
from syntaxformer.training.arguments import TrainArguments

torch.set_num_threads(1)

#: the operations that read a value on the host (a synchronisation on an accelerator)
HOST_READS = {torch.ops.aten._local_scalar_dense, torch.ops.aten.nonzero, torch.ops.aten.is_nonzero}


class HostSyncError(RuntimeError):
    """An operation inside the guarded block read a tensor's value on the host."""


class NoHostSync(TorchDispatchMode):
    """Raise :class:`HostSyncError` on any operation of :data:`HOST_READS` inside the block."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in HOST_READS:
            raise HostSyncError(f"host synchronisation: {func}")
        return func(*args, **(kwargs or {}))


def test_the_guard_catches_value_reads():
    x = torch.ones(3)
    for read in (lambda: x.sum().item(), lambda: bool(x.all()), lambda: x.nonzero(), lambda: int(x[0])):
        with pytest.raises(HostSyncError), NoHostSync():
            read()
    with NoHostSync():
        (x * 2).sum()  # arithmetic alone is allowed


CASES = {
    "tree-transformer (the induce default's variant)": dict(
        model="tree-transformer", overrides={"constituent_variant": "official"}
    ),
    "tree-transformer (paper variant)": dict(model="tree-transformer"),
    "structformer": dict(model="structformer"),
    "on-lstm": dict(model="on-lstm"),
    "on-lstm-san": dict(model="on-lstm-san"),
    "tree-transformer, bf16 autocast": dict(model="tree-transformer", bf16=True),
}


@pytest.mark.parametrize("case", CASES)
def test_a_training_step_reads_no_value_on_the_host(tmp_path, case):
    args = TrainArguments(
        out=str(tmp_path),
        preset="tiny",
        corpus="ptb-sample",
        max_steps=3,
        batch_size=8,
        threads=1,
        quiet=True,
        **CASES[case],
    )
    trainer = Trainer(args)
    trainer.build()
    batches = trainer.sampler.batches(0)
    trainer.device_step(trainer.make_batch(batches[0]))  # first step: lazy initialisation may read values
    batch = trainer.make_batch(batches[1])
    before = [p.detach().clone() for p in trainer.model.parameters()]
    with NoHostSync():
        loss, _ = trainer.device_step(batch)
    assert torch.isfinite(loss) and any(not torch.equal(a, p) for a, p in zip(before, trainer.model.parameters()))


def test_a_head_gate_fine_tuning_step_reads_no_value_on_the_host(tmp_path, tiny_model):
    """The gated model's step (the MLM loss plus the gates' penalty; the MLM loss kept for the next log
    as a tensor, not read)."""
    from syntaxformer.tasks.finetune import FineTuneTrainer

    args = TrainArguments(
        out=str(tmp_path),
        init_from=str(tiny_model()),
        corpus="ptb-sample",
        head_gates=True,
        gate_l0=0.1,
        max_steps=3,
        batch_size=8,
        threads=1,
        quiet=True,
    )
    trainer = FineTuneTrainer(args)
    trainer.build()
    batches = trainer.sampler.batches(0)
    trainer.device_step(trainer.make_batch(batches[0]))  # first step: lazy initialisation may read values
    batch = trainer.make_batch(batches[1])
    with NoHostSync():
        loss, _ = trainer.device_step(batch)
    assert torch.isfinite(loss) and trainer.last_mlm_loss is not None and float(trainer.last_mlm_loss) < float(loss)


def _running_text_trainer(tmp_path, **options) -> RunningTextTrainer:
    """A built AWD-LSTM-procedure trainer of the tiny ON-LSTM on ptb-sample (windows of 10, batch 4, SGD)."""
    args = TrainArguments(
        out=str(tmp_path),
        model="on-lstm",
        preset="tiny",
        corpus="ptb-sample",
        bptt=10,
        batch_size=4,
        optimizer="sgd",
        lr=1.0,
        threads=1,
        quiet=True,
        **options,
    )
    trainer = RunningTextTrainer(args)
    trainer.build()
    return trainer


def test_a_running_text_step_reads_no_value_on_the_host(tmp_path):
    trainer = _running_text_trainer(tmp_path, ar_alpha=2.0, tar_beta=1.0, max_steps=3)
    windows = trainer.sampler.batches(0)
    trainer.device_step(trainer.make_batch(windows[0]))
    trainer.state.batch_in_epoch = 1  # the second window: the state is carried
    batch = trainer.make_batch(windows[1])
    with NoHostSync():
        loss, _ = trainer.device_step(batch)
    assert torch.isfinite(loss)


class CountHostReads(TorchDispatchMode):
    """Count the operations of :data:`HOST_READS` inside the block (``reads``)."""

    reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.reads += func.overloadpacket in HOST_READS
        return func(*args, **(kwargs or {}))


def test_validation_reads_one_value_on_the_host_whatever_the_number_of_batches(tmp_path):
    """The validation loss is summed over the batches on the device and read once; the batches were
    built once (their numbers of targets counted on the host then)."""
    args = TrainArguments(
        out=str(tmp_path), preset="tiny", corpus="ptb-sample", max_steps=1, batch_size=16, threads=1, quiet=True
    )
    trainer = Trainer(args)
    trainer.build()
    assert len(trainer.valid_batches) > 5 and trainer.valid_targets == [
        int((b.labels != -100).sum()) for b in trainer.valid_batches
    ]
    with CountHostReads() as counter:
        loss = trainer.validation_loss()
    assert counter.reads == 1 and loss > 0


def test_running_text_validation_reads_one_value_on_the_host(tmp_path):
    """The AWD-LSTM procedure's validation: the stream is on the device once, the windows' losses summed
    there and read once."""
    trainer = _running_text_trainer(tmp_path, valid_fraction=0.2, eval_batch_size=2, max_steps=1)
    assert trainer.valid_stream.shape[1] > 5 * trainer.args.bptt  # many windows
    with CountHostReads() as counter:
        loss = trainer.validation_loss()
    assert counter.reads == 1 and loss > 0


def test_nli_validation_reads_on_the_host_once(sick_file, tmp_path):
    """The sentence-pair trainer's validation: batches on the device once, loss and correct pairs summed
    there, read together at the end (by ``tolist``, which the dispatch mode does not see: no read counted
    per batch, where reading each batch's loss and count made two)."""
    from syntaxformer.tasks.nli import NliTrainArguments, NliTrainer

    args = NliTrainArguments(
        out=str(tmp_path), data=str(sick_file), preset="tiny", batch_size=2, max_steps=1, quiet=True
    )
    trainer = NliTrainer(args)
    trainer.build()
    trainer.valid_batches = trainer.valid_batches * 3  # several batches
    with CountHostReads() as counter:
        loss, accuracy = trainer.validation_scores()
    assert counter.reads <= 1 and loss > 0 and 0 <= accuracy <= 100
