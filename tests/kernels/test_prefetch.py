"""The next batch prepared in a background thread (``prefetch``): the batches a run trains on are those
made inline, step by step, across epoch boundaries and across a resume, and the trained parameters are
bit-identical to a run without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from syntaxformer.tasks.language_model import Trainer
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.batch import TokenBatch
from syntaxformer.training.prefetch import BatchPrefetcher

torch.set_num_threads(1)

#: 60 sentences (62 sequences: long ones are split), 8 a batch: 8 batches an epoch (the last short), so 18
#: steps cross two epoch boundaries
OPTIONS = dict(preset="tiny", batch_size=8, valid_fraction=0.0, save_every=0, eval_every=0, log_every=4, threads=1)
STEPS = 18


def test_the_prefetcher_returns_what_was_asked_for():
    calls = []

    def make(indices, step):
        calls.append((tuple(indices), step))
        return TokenBatch(torch.tensor([indices]), torch.ones(1, len(indices)), torch.tensor([[step]]))

    prefetcher = BatchPrefetcher(make)
    prefetcher.ahead([1, 2], 5)
    assert prefetcher.get([1, 2], 5).labels.item() == 5 and len(calls) == 1  # prepared ahead
    prefetcher.ahead([3], 6)
    assert prefetcher.get([4], 6).input_ids.tolist() == [[4]]  # a wrong guess: made inline
    assert calls[-2:] == [((3,), 6), ((4,), 6)]
    prefetcher.ahead([9], 7)
    assert prefetcher.get([9], 7).labels.item() == 7

    def fail(indices, step):
        raise RuntimeError("in the worker")

    prefetcher._make = fail
    prefetcher.ahead([1], 8)
    with pytest.raises(RuntimeError, match="in the worker"):
        prefetcher.get([1], 8)
    prefetcher.close()


class Recording(Trainer):
    """A trainer that keeps every batch it steps on, with its step and examples."""

    def device_step(self, batch):
        self.seen.append((self.state.step, batch))
        return super().device_step(batch)

    def build(self):
        super().build()
        self.seen = []


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from syntaxformer.data.corpus import load_corpus

    path = tmp_path_factory.mktemp("corpus") / "sixty.txt"
    path.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample")[:60]) + "\n")
    return path


def _run(out: Path, corpus: Path, max_steps: int, **options) -> Recording:
    trainer = Recording(TrainArguments(out=str(out), corpus=str(corpus), max_steps=max_steps, **{**OPTIONS, **options}))
    trainer.train()
    return trainer


def _same_batch(a: TokenBatch, b: TokenBatch) -> bool:
    return all(torch.equal(getattr(a, k), getattr(b, k)) for k in ("input_ids", "attention_mask", "labels")) and (
        torch.equal(a.masked_positions, b.masked_positions)
    )


def test_prefetched_batches_are_the_inline_ones_across_epochs_and_a_resume(tmp_path, corpus):
    inline = _run(tmp_path / "inline", corpus, STEPS)
    prefetched = _run(tmp_path / "prefetched", corpus, STEPS, prefetch=True)
    assert len(inline.sampler.batches(0)) == 8 and prefetched._prefetcher is not None
    assert [s for s, _ in prefetched.seen] == list(range(STEPS))
    for (_, a), (_, b) in zip(inline.seen, prefetched.seen):
        assert _same_batch(a, b)
    # a run stopped at step 9 (in the second epoch) and resumed with prefetching
    _run(tmp_path / "resumed", corpus, 9, prefetch=True, save_every=9)
    resumed = _run(tmp_path / "resumed", corpus, STEPS, prefetch=True, resume=True)
    assert [s for s, _ in resumed.seen] == list(range(9, STEPS))
    for (_, a), (_, b) in zip(inline.seen[9:], resumed.seen):
        assert _same_batch(a, b)
    reference = load_file(tmp_path / "inline" / "model.safetensors")
    for name in ("prefetched", "resumed"):
        got = load_file(tmp_path / name / "model.safetensors")
        assert all(torch.equal(got[k], reference[k]) for k in reference), name
