"""Shuffled, length-bucketed batches, sharded across data-parallel ranks; and padding.

One epoch's batches, given ``seed`` and ``epoch`` only (so a resumed run rebuilds them exactly):

1. shuffle the sentence indices;
2. cut the shuffled list into chunks of ``bucket_batches`` batches' worth of sentences and sort each
   chunk by length (stable) — sentences of similar length end up together, cutting padding;
3. cut each sorted chunk into batches: ``batch_size`` sentences each, or, with ``max_tokens``, as
   many sentences as fit ``count × longest length ≤ max_tokens`` (the padded size);
4. shuffle the batches (so lengths do not come in waves);
5. with ``num_replicas > 1``, rank ``r`` takes batches ``r, r + R, r + 2R, …``; when the number of
   batches is not a multiple of ``R``, the first few batches are repeated to fill the last round
   (as ``torch.utils.data.DistributedSampler`` pads), so every rank takes the same number of steps.

With one replica every sentence is in exactly one batch per epoch.

With ``min_tokens`` instead (the public StructFormer code's ``batchify``): the whole corpus sorted by
length (stable), cut into consecutive batches each filled until it holds at least ``min_tokens`` real
tokens (the last may hold fewer), the same batches every epoch in an order shuffled by ``(seed, epoch)``
(:func:`filled_batches`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch


class LengthBucketSampler:
    """Batches of sentence indices (a batch sampler: each item is a list of indices).

    Args:
        lengths: the length (tokens) of every sentence.
        batch_size: sentences per batch; or None with ``max_tokens`` or ``min_tokens``.
        max_tokens: a budget of padded tokens per batch (a sentence longer than the budget gets a
            batch of its own); or None.
        min_tokens: batches of the length-sorted corpus filled to at least this many real tokens
            (module docstring); or None.
        seed: the shuffling seed; epoch ``e`` uses a generator seeded from ``(seed, e)``.
        bucket_batches: how many batches' worth of sentences are sorted together (step 2).
        shuffle: False keeps corpus order and no bucketing (plain consecutive batches).
        num_replicas, rank: data-parallel sharding (step 5).

    Call :meth:`set_epoch` before iterating (or use :meth:`batches` directly).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int | None = None,
        max_tokens: int | None = None,
        seed: int = 0,
        bucket_batches: int = 50,
        shuffle: bool = True,
        num_replicas: int = 1,
        rank: int = 0,
        min_tokens: int | None = None,
    ):
        sizes = (batch_size, max_tokens, min_tokens)
        if sum(x is not None for x in sizes) != 1:
            raise ValueError("give exactly one of batch_size, max_tokens and min_tokens")
        if any(x is not None and x < 1 for x in sizes):
            raise ValueError("batch_size / max_tokens / min_tokens must be positive")
        self.min_tokens = min_tokens
        assert 0 <= rank < num_replicas, (rank, num_replicas)
        self.lengths = torch.as_tensor(list(lengths), dtype=torch.long)
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.seed, self.bucket_batches, self.shuffle = seed, bucket_batches, shuffle
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for ``epoch`` (the order is a function of the seed and the epoch alone)."""
        self.epoch = epoch

    def _generator(self, epoch: int) -> torch.Generator:
        return torch.Generator().manual_seed((self.seed * 1_000_003 + epoch) % (2**63))

    def _cut(self, order: list[int]) -> list[list[int]]:
        """Cut indices (already in batch order) into batches by count or token budget."""
        if self.batch_size is not None:
            return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        cuts = token_budget_batches([int(self.lengths[i]) for i in order], self.max_tokens)
        return [[order[j] for j in batch] for batch in cuts]

    def all_batches(self, epoch: int) -> list[list[int]]:
        """Every batch of ``epoch`` before sharding (steps 1-4)."""
        n = len(self.lengths)
        if self.min_tokens is not None:
            order = torch.argsort(self.lengths, stable=True).tolist()
            cuts = filled_batches([int(self.lengths[i]) for i in order], self.min_tokens)
            batches = [[order[j] for j in batch] for batch in cuts]
            if not self.shuffle:
                return batches
            return [batches[i] for i in torch.randperm(len(batches), generator=self._generator(epoch)).tolist()]
        if not self.shuffle:
            return self._cut(list(range(n)))
        g = self._generator(epoch)
        perm = torch.randperm(n, generator=g)
        if self.batch_size is not None:
            chunk = self.bucket_batches * self.batch_size
        else:
            mean = max(1, int(self.lengths.float().mean().item())) if n else 1
            chunk = self.bucket_batches * max(1, self.max_tokens // mean)
        batches: list[list[int]] = []
        for start in range(0, n, chunk):
            idx = perm[start : start + chunk]
            idx = idx[torch.argsort(self.lengths[idx], stable=True)]
            batches.extend(self._cut(idx.tolist()))
        order = torch.randperm(len(batches), generator=g).tolist()
        return [batches[i] for i in order]

    def batches(self, epoch: int | None = None) -> list[list[int]]:
        """This rank's batches of ``epoch`` (default: the one set by :meth:`set_epoch`)."""
        everything = self.all_batches(self.epoch if epoch is None else epoch)
        if self.num_replicas == 1 or not everything:
            return everything
        rounds = -(-len(everything) // self.num_replicas)
        total = rounds * self.num_replicas
        padded = everything + [everything[i % len(everything)] for i in range(total - len(everything))]
        return padded[self.rank :: self.num_replicas]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.batches())


def token_budget_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Cut items, in the order given, into consecutive batches whose padded size stays in budget.

    Args:
        lengths: ``[M]`` token count of each item, in batch order (sort them first for little padding).
        max_tokens: budget of one batch in padded tokens, ``len(batch) * max(lengths in batch)``; an
            item longer than the budget still gets a batch of its own.

    Returns:
        Lists of positions ``0 .. M-1`` into ``lengths``, consecutive, covering each position once.
    """
    batches, current, longest = [], [], 0
    for j, n in enumerate(lengths):
        if current and (len(current) + 1) * max(longest, n) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(j)
        longest = max(longest, n)
    if current:
        batches.append(current)
    return batches


def filled_batches(lengths: Sequence[int], min_tokens: int) -> list[list[int]]:
    """Cut items, in the order given, into consecutive batches, each taking items until it holds at
    least ``min_tokens`` tokens (the public StructFormer ``batchify``'s ``total_length < batch_size``
    rule: a batch may exceed the budget by its last item; the last batch may hold fewer).

    Args:
        lengths: ``[M]`` token count of each item, in batch order.
        min_tokens: tokens (unpadded) a batch is filled to.
    Returns:
        Lists of positions ``0 .. M-1`` into ``lengths``, consecutive, covering each position once.
    """
    batches, current, total = [], [], 0
    for j, n in enumerate(lengths):
        current.append(j)
        total += n
        if total >= min_tokens:
            batches.append(current)
            current, total = [], 0
    if current:
        batches.append(current)
    return batches


def pad_rows(rows: Sequence[Sequence[int]], value: int, length: int | None = None) -> torch.Tensor:
    """Right-pad integer lists with ``value`` into a (B, N) long tensor, N = ``length`` or the longest
    row (0 for no rows): token ids, token heads, phrase ids, labels."""
    n = length if length is not None else max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), n), value, dtype=torch.long)
    for b, r in enumerate(rows):
        out[b, : len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    return out


def padded_length(longest: int, multiple: int | None) -> int:
    """``longest`` rounded up to a multiple of ``multiple`` (None or 1: itself): the padded length of a
    batch, so that batches take a few shapes only (an accelerator then reuses one compiled or captured
    graph per shape)."""
    if not multiple or multiple == 1:
        return longest
    return -(-longest // multiple) * multiple


def pad_columns(x: torch.Tensor, length: int, value: int) -> torch.Tensor:
    """``x`` ``(B, N)`` right-padded with ``value`` to ``(B, length)`` (itself when ``length`` is N).

    Raises:
        ValueError: ``length`` below N.
    """
    extra = length - x.shape[1]
    if extra < 0:
        raise ValueError(f"cannot pad {x.shape[1]} columns to {length}")
    return x if extra == 0 else torch.nn.functional.pad(x, (0, extra), value=value)


def pad_batch(
    sequences: Sequence[Sequence[int]], pad_id: int, multiple: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token-id lists into ``(input_ids [B, N], attention_mask [B, N])`` (long tensors;
    mask 1 at real tokens), N = the longest sequence rounded up to a multiple of ``multiple``
    (:func:`padded_length`; None: the longest itself)."""
    longest = max((len(s) for s in sequences), default=0)
    ids = pad_rows(sequences, pad_id, padded_length(longest, multiple))
    mask = pad_rows([[1] * len(s) for s in sequences], 0, ids.shape[1])
    return ids, mask
