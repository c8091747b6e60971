"""Perplexity, the one evaluator of both objectives: the protocol follows the model's ``objective``
(:func:`perplexity`; :data:`PROTOCOLS`), and every report names it.

**Masked LM** (:func:`masked_lm_perplexity`, :data:`PROTOCOL`; Wang, Lee & Chen, EMNLP 2019,
Table 4; DESIGN.md §4): every word of every test sentence is masked in turn, **one** ``[MASK]`` per
input, so a sentence of ``n`` words gives ``n`` inputs; the model's cross-entropy of the true word at
the masked position is averaged over all words of the test set, and the perplexity is ``exp`` of that
mean (natural log, so the cross-entropy is in nats).

**Causal LM** (:func:`next_word_perplexity`, :data:`NEXT_WORD_PROTOCOL`; ON-LSTM): standard next-word
perplexity. Each sentence is read from a fresh state as the trainer frames it, ``[CLS] w_1 .. w_n
[CLS]`` (:class:`~syntaxformer.training.objectives.CausalLM`; ``[CLS]`` is the sentence boundary, the
public ON-LSTM code's ``<eos>``), and every word and the sentence end are predicted from the tokens
before them: ``n + 1`` predictions per sentence, as Mikolov's PTB convention counts ``<eos>``. The
report gives that perplexity and, beside it, ``word_perplexity`` over the ``n`` words only (the
count the masked-LM protocol uses). Sentences are independent (no state carried across them, unlike
the public code's running text), so the numbers are not comparable with running-text perplexities.

**Trees and phrases** (masked LM only; a model that reads structure per sentence: a prior that reads a
dependency tree, e.g. ``structural-position``, DESIGN.md §3.2; the multi-granularity prior's ``tree``
heads, which read a phrase partition, §3.3): ``structures`` gives each sentence's structure, a dict of
per-word lists (:mod:`syntaxformer.data.structure_inputs`): ``"heads"`` (1-based, 0 = root;
:mod:`syntaxformer.data.trees`) and / or ``"phrase_ids"`` (0-based phrase of each word;
:mod:`syntaxformer.data.phrases`). They are mapped onto tokens, and every copy of a sentence carries its
sentence's structure, unchanged by the masking (the masked word keeps its place in the tree and its
phrase), padded per batch (heads with -100, phrase ids with -1): ``structure_inputs={"heads": (B, N),
"phrase_ids": (B, N)}`` (the keys given). A structure induced from the unmasked sentence carries
information about the masked word (its depth, its distances, its phrase), so ``structures`` may instead
give one structure per masked copy: the structure a model induces from that copy, ``[MASK]`` included
(:func:`~syntaxformer.sources.induced.masked_copy_structures`); the pair of models is then a masked
LM that reads nothing of the masked word.

Special tokens the tokenizer adds (``[CLS]``) are part of every input but are never masked or scored.
A word outside the vocabulary becomes ``[UNK]`` in the input, and, when it is the masked word, the
target is ``[UNK]``: it is scored like any other word and counted in ``n_unk``.

Speed: the ``n`` copies of a sentence are built at once (:func:`one_mask_inputs`), and copies of many
sentences are packed together into batches of at most ``batch_tokens`` tokens (rows x padded length),
after sorting the sentences by length so that a batch holds inputs of (nearly) one length and padding
is small. Evaluation runs under :func:`torch.inference_mode`; on CPU, denormal floats are flushed to
zero (the constituent prior multiplies many probabilities, and CPU arithmetic on denormals is 10-100x
slower, see DESIGN section 5).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from syntaxformer.data.batching import pad_batch, token_budget_batches
from syntaxformer.data.preprocess import normalise_word
from syntaxformer.data.structure_inputs import pad_structures, token_structure
from syntaxformer.data.tokenization import BOUNDARY_ID, encode, frame_sentence
from syntaxformer.errors import InputError
from syntaxformer.models import capabilities_of
from syntaxformer.parser import is_punctuation, tokenize
from syntaxformer.runtime import prepare_cpu_loop

logger = logging.getLogger(__name__)

#: The masked-LM protocol's name, as every report and JSON states it.
PROTOCOL = (
    "one-mask-per-input masked-LM perplexity (Tree Transformer, Wang et al. 2019, Table 4): "
    "every word masked in turn, perplexity = exp(mean cross-entropy over all words, nats)"
)
#: The causal-LM protocol's name, as every report and JSON states it.
NEXT_WORD_PROTOCOL = (
    "next-word perplexity (causal LM): each sentence read from a fresh state as [CLS] w_1 .. "
    "w_n [CLS]; every word and the sentence end predicted from the tokens before it; "
    "perplexity = exp(mean cross-entropy over the n + 1 predictions per sentence, nats); "
    "word_perplexity: over the n words only"
)


def one_mask_inputs(ids: torch.Tensor, mask_id: int, positions: torch.Tensor | None = None) -> torch.Tensor:
    """The copies of one sentence with one position masked in each (the paper's one-mask protocol).

    Args:
        ids: ``(n,)`` token ids of one sentence.
        mask_id: the ``[MASK]`` token id.
        positions: ``(k,)`` positions to mask, one per copy; all ``n`` positions (in order) if None.

    Returns:
        ``(k, n)`` (``(n, n)`` by default) token ids: row ``r`` equals ``ids`` except position
        ``positions[r]``, which is ``mask_id``. So every row has exactly one ``[MASK]`` (provided
        ``ids`` has none), and each position is masked in exactly one row.
    """
    if ids.dim() != 1:
        raise ValueError(f"ids must be one sentence of shape (n,), got {tuple(ids.shape)}")
    n = ids.shape[0]
    if positions is None:
        positions = torch.arange(n, device=ids.device)
    inputs = ids.unsqueeze(0).repeat(positions.shape[0], 1)  # (k, n)
    inputs[torch.arange(positions.shape[0], device=ids.device), positions] = mask_id
    return inputs


def encode_word_positions(tokenizer, sentences: Sequence[Sequence[str]]) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of each sentence (with the tokenizer's special tokens) and where its words are.

    Encoding is :func:`syntaxformer.data.tokenization.encode` (the trainer's), with no length limit
    (:func:`masked_lm_perplexity` handles over-long sentences itself, counting them).

    Args:
        tokenizer: a fast Hugging Face tokenizer that keeps one token per word, e.g. the one
            :func:`syntaxformer.data.tokenization.build_word_tokenizer` saves.
        sentences: words of each sentence (already normalised the way the training corpus was).

    Returns:
        ``(ids, word_positions)``: for sentence ``s``, ``ids[s]`` are its token ids (``[CLS]`` etc.
        included, out-of-vocabulary words as ``[UNK]``) and ``word_positions[s][w]`` is the position
        of word ``w`` in ``ids[s]``.

    Raises:
        InputError: a word that the tokenizer splits into several tokens (e.g. WordPiece): both
            protocols score one token per word (names the sentence, 1-based); a bad word (empty,
            white space inside).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise InputError("perplexity needs a fast (tokenizers-backed) tokenizer")
    ids, word_ids = encode(tokenizer, sentences)
    positions = []
    for s, (words, wids) in enumerate(zip(sentences, word_ids)):
        pos = [p for p, w in enumerate(wids) if w is not None]
        if [wids[p] for p in pos] != list(range(len(words))):
            raise InputError(
                "the tokenizer does not give exactly one token per word "
                f"({len(words)} words, {len(pos)} word tokens); the perplexity "
                "protocols score one token per word",
                sentence=s + 1,
            )
        positions.append(pos)
    return ids, positions


def _model_max_length(model) -> int | None:
    config = getattr(model, "config", None)
    return getattr(config, "max_position_embeddings", None) if config is not None else None


def _model_device(model) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:  # a parameter-free model (e.g. a test stub)
        return torch.device("cpu")


def _checked_options(
    model, objective: str, refusal: str, too_long: str, batch_tokens: int, device, max_length: int | None
) -> tuple[torch.device, int | None]:
    """The shared argument checks of the two perplexity protocols; returns (device, max_length).

    Raises:
        ValueError: ``too_long`` not ``"error"`` / ``"skip"``; ``batch_tokens`` < 1.
        InputError: the model's objective is not ``objective`` (the message says ``refusal``).
    """
    if too_long not in ("error", "skip"):
        raise ValueError(f"too_long must be 'error' or 'skip', not {too_long!r}")
    found = getattr(model, "objective", "masked-lm")
    if found != objective:
        raise InputError(f"a {found} model: {refusal} (perplexity() chooses the model's protocol)")
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be positive, got {batch_tokens}")
    device = torch.device(device) if device is not None else _model_device(model)
    return device, (_model_max_length(model) if max_length is None else max_length)


def masked_lm_perplexity(
    model,
    tokenizer,
    sentences: Sequence[Sequence[str]],
    batch_tokens: int = 4096,
    device: str | torch.device | None = None,
    too_long: str = "error",
    max_length: int | None = None,
    progress: bool = False,
    structures: Sequence[dict] | None = None,
) -> dict:
    """Masked-LM perplexity of ``model`` on ``sentences``, the Tree Transformer paper's protocol.

    Every word of every sentence is masked in turn (one ``[MASK]`` per input); perplexity is
    ``exp(mean cross-entropy)`` over all words scored, cross-entropy in nats (natural log), against
    the model's full output vocabulary.

    Args:
        model: a masked LM called as ``model(input_ids=(B, N), attention_mask=(B, N))`` whose output
            has ``.logits`` of shape ``(B, N, V)`` (unnormalised scores over a vocabulary of ``V``).
        tokenizer: its fast tokenizer, one token per word (see :func:`encode_word_positions`); must have
            ``mask_token_id``, ``pad_token_id`` and ``unk_token_id``.
        sentences: words of each sentence, already normalised as the training corpus was.
        batch_tokens: at most this many tokens (rows x padded length) per forward pass; a larger
            value is faster until memory runs out (logits take ``batch_tokens x V`` floats).
        device: where to run; the model's device if None. The model is moved there.
        too_long: what to do with a sentence longer than the model accepts (``max_length``, by
            default ``model.config.max_position_embeddings``, counting special tokens): ``"error"``
            raises :class:`InputError` naming the sentence; ``"skip"`` leaves it out and counts it in
            ``n_skipped`` / ``n_skipped_words`` (logged as a warning).
        max_length: the longest input (tokens, special tokens included); see ``too_long``.
        progress: show a tqdm progress bar.
        structures: per sentence, its structure ``{"heads": [...], "phrase_ids": [...]}`` (per word;
            either or both), for a model that reads trees or phrases (module docstring): every input
            of the sentence gets it as ``structure_inputs``; or, per sentence, a list of one such dict
            per word: the input masking word ``w`` gets entry ``w`` (the structure of that masked copy,
            :func:`~syntaxformer.sources.induced.masked_copy_structures`). None: no
            ``structure_inputs``.

    Returns:
        A dict: ``perplexity``; ``cross_entropy`` (mean, nats per word); ``n_tokens`` (words scored);
        ``n_unk`` (of those, words whose target is ``[UNK]``); ``n_sentences`` (sentences scored,
        i.e. with at least one word); ``n_empty`` (sentences with no words); ``n_skipped`` and
        ``n_skipped_words`` (too long, only with ``too_long="skip"``); ``vocab_size`` (V);
        ``max_length``; ``protocol`` (:data:`PROTOCOL`).

    Raises:
        InputError: no words to score; a sentence too long (with ``too_long="error"``); a tokenizer
            without one token per word or without ``[MASK]``; ``structures`` not one entry per word
            (or per masked copy) of each sentence (naming it).
    """
    device, max_length = _checked_options(
        model, "masked-lm", "masked-LM perplexity does not apply to it", too_long, batch_tokens, device, max_length
    )
    special_ids = _special_ids(tokenizer)

    ids, word_positions = encode_word_positions(tokenizer, sentences)
    token_structure = None if structures is None else _sentence_token_structures(structures, ids, word_positions)
    scored, n_empty, n_skipped, n_skipped_words = _scored_sentences(ids, word_positions, max_length, too_long)
    batches = _one_mask_batches(scored, ids, word_positions, batch_tokens)

    total, n_tokens, n_unk, vocab_size = _one_mask_cross_entropy(
        model, batches, ids, special_ids, token_structure, device, progress
    )
    return _masked_lm_report(
        total, n_tokens, n_unk, vocab_size, (len(scored), n_empty, n_skipped, n_skipped_words), max_length
    )


def _special_ids(tokenizer) -> tuple[int, int, int | None]:
    """The ``(pad, mask, unk)`` token ids of the masked-LM protocol (pad falls back to mask).

    Raises:
        InputError: a tokenizer without ``[MASK]``.
    """
    mask_id, pad_id, unk_id = tokenizer.mask_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id
    if mask_id is None:
        raise InputError("the tokenizer has no [MASK] token")
    if pad_id is None:
        pad_id = mask_id  # padded positions are masked out of attention; the id does not matter
    return pad_id, mask_id, unk_id


def _one_mask_batches(scored: list[int], ids, word_positions, batch_tokens: int) -> list[list[tuple[int, int]]]:
    """The one-mask rows ``(sentence, masked token position)`` of the ``scored`` sentences, cut into
    batches of at most ``batch_tokens`` tokens; ``scored`` is sorted by length in place first."""
    # One row per (sentence, masked word); rows sorted by length, cut into batches by token budget.
    scored.sort(key=lambda s: len(ids[s]))
    all_rows = [(s, p) for s in scored for p in word_positions[s]]
    return [
        [all_rows[j] for j in batch] for batch in token_budget_batches([len(ids[s]) for s, _ in all_rows], batch_tokens)
    ]


def _masked_lm_report(total, n_tokens: int, n_unk: int, vocab_size, counts: tuple, max_length) -> dict:
    """:func:`masked_lm_perplexity`'s dict from the summed cross-entropy ``total`` (nats, a float64
    scalar tensor) and the sentence ``counts`` ``(n_sentences, n_empty, n_skipped, n_skipped_words)``."""
    n_sentences, n_empty, n_skipped, n_skipped_words = counts
    cross_entropy = float(total) / n_tokens
    return {
        "perplexity": math.exp(cross_entropy),
        "cross_entropy": cross_entropy,
        "n_tokens": n_tokens,
        "n_unk": n_unk,
        "n_sentences": n_sentences,
        "n_empty": n_empty,
        "n_skipped": n_skipped,
        "n_skipped_words": n_skipped_words,
        "vocab_size": vocab_size,
        "max_length": max_length,
        "protocol": PROTOCOL,
    }


def _one_mask_cross_entropy(model, batches, ids, special_ids, token_structure, device, progress: bool):
    """Summed cross-entropy (nats, float64) of ``model`` over the one-mask ``batches`` of
    :func:`masked_lm_perplexity`, with the number of words scored, of ``[UNK]`` targets and the
    vocabulary size. ``special_ids``: (pad, mask, unk) ids; ``token_structure``: per sentence, its token
    structure dict, or None. The model runs in evaluation mode on
    ``device`` and is given back in its former mode."""
    pad_id, mask_id, unk_id = special_ids
    # Models of this package can compute logits at labelled positions only (row-major order, so one
    # row per input here): much cheaper than (B, N, V) logits when V is large.
    masked_only = capabilities_of(model).masked_only
    was_training = model.training
    model.eval()
    model.to(device)
    prepare_cpu_loop(device)
    total = torch.zeros((), dtype=torch.float64)
    n_tokens = n_unk = 0
    vocab_size = None
    try:
        with torch.inference_mode():
            for rows in tqdm(batches, desc="perplexity", unit="batch", disable=not progress):
                input_ids, attention_mask, masked_at, targets, batch_structure = _one_mask_batch(
                    rows, ids, pad_id, mask_id, token_structure
                )
                masked_logits = _masked_logits(
                    model, input_ids, attention_mask, masked_at, targets, device, masked_only, batch_structure
                )  # (B, V)
                vocab_size = masked_logits.shape[-1]
                total += (
                    F.cross_entropy(masked_logits, targets.to(masked_logits.device), reduction="sum").double().cpu()
                )
                n_tokens += len(rows)
                if unk_id is not None:
                    n_unk += int((targets == unk_id).sum())
    finally:
        model.train(was_training)

    return total, n_tokens, n_unk, vocab_size


def _scored_sentences(ids, word_positions, max_length: int | None, too_long: str):
    """Which sentences are scored: not empty, not too long. Returns ``(scored indices, n_empty,
    n_skipped, n_skipped_words)``.

    Raises:
        InputError: a sentence too long with ``too_long="error"`` (naming it), or nothing to score.
    """
    n_empty = n_skipped = n_skipped_words = 0
    scored = []
    for s, (sentence_ids, pos) in enumerate(zip(ids, word_positions)):
        if not pos:
            n_empty += 1
            continue
        if max_length is not None and len(sentence_ids) > max_length:
            if too_long == "error":
                raise InputError(
                    f"{len(pos)} words make {len(sentence_ids)} tokens, more than the "
                    f"model's {max_length}; pass too_long='skip' (CLI: --skip-long) to "
                    "leave such sentences out, counted",
                    sentence=s + 1,
                )
            n_skipped += 1
            n_skipped_words += len(pos)
            continue
        scored.append(s)
    if n_skipped:
        logger.warning(
            "%d sentences (%d words) longer than %d tokens were skipped", n_skipped, n_skipped_words, max_length
        )
    if not scored:
        raise InputError("no words to score")
    return scored, n_empty, n_skipped, n_skipped_words


def _sentence_token_structures(structures, ids, word_positions) -> list:
    """Per sentence, its token structure (:func:`~syntaxformer.data.structure_inputs.token_structure`:
    token heads, 0-based positions, -1 root, -100 special token; token phrase ids, -1 special token) from
    its per-word ``structures`` entry: a dict (every copy of the sentence reads it), or a list of one
    dict per word (the copy masking that word reads it), which becomes a list over token positions
    (the entry at each word's position, None elsewhere).

    Raises:
        InputError: a number of sentences, of copies or of per-word entries that does not match (naming the sentence).
    """
    if len(structures) != len(ids):
        raise InputError(f"{len(structures)} structures (trees / phrases) for {len(ids)} sentences")
    out: list = []
    for s, pos in enumerate(word_positions):
        wids: list[int | None] = [None] * len(ids[s])
        for w, p in enumerate(pos):
            wids[p] = w
        entry = structures[s]
        if isinstance(entry, dict):
            out.append(token_structure(entry, wids, len(pos), s + 1))
            continue
        if len(entry) != len(pos):
            raise InputError(f"{len(entry)} masked-copy structures for {len(pos)} words", sentence=s + 1)
        per_position: list[dict | None] = [None] * len(ids[s])
        for w, p in enumerate(pos):
            per_position[p] = token_structure(entry[w], wids, len(pos), s + 1)
        out.append(per_position)
    return out


def _one_mask_batch(rows, ids, pad_id: int, mask_id: int, token_structure=None):
    """The inputs of one batch of (sentence, masked position) rows: ``input_ids`` (B, N) with one
    ``[MASK]`` per row, ``attention_mask`` (B, N), ``masked_at`` (B,), ``targets`` (B,), and, with
    ``token_structure`` (per sentence, its token structure dict, or a list over token positions of
    each masked copy's), each row's structure ``{key: (B, N)}`` padded (heads -100, phrase ids -1; None
    without)."""
    width = max(len(ids[s]) for s, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, N)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, N)
    masked_at = torch.tensor([p for _, p in rows], dtype=torch.long)  # (B,)
    r = 0
    while r < len(rows):  # consecutive rows of one sentence: build its copies at once
        s = rows[r][0]
        k = r
        while k < len(rows) and rows[k][0] == s:
            k += 1
        input_ids[r:k, : len(ids[s])] = one_mask_inputs(torch.tensor(ids[s], dtype=torch.long), mask_id, masked_at[r:k])
        attention_mask[r:k, : len(ids[s])] = 1
        r = k
    targets = torch.tensor([ids[s][p] for s, p in rows], dtype=torch.long)  # (B,)
    if token_structure is None:
        return input_ids, attention_mask, masked_at, targets, None
    rows_structure = [
        token_structure[s] if isinstance(token_structure[s], dict) else token_structure[s][p] for s, p in rows
    ]  # the sentence's structure, or its masked copy's
    structure = pad_structures(rows_structure, width)  # (B, N) each
    return input_ids, attention_mask, masked_at, targets, structure


def _masked_logits(
    model, input_ids, attention_mask, masked_at, targets, device, masked_only: bool, structure: dict | None = None
):
    """(B, V) float32 logits at each row's masked position (the output layer only there when the
    model supports ``masked_only``); ``structure`` (``{key: (B, N)}``) goes to the model as
    ``structure_inputs``."""
    rows_idx = torch.arange(input_ids.shape[0])
    extra = {} if structure is None else {"structure_inputs": {k: v.to(device) for k, v in structure.items()}}
    if masked_only:  # the output layer only at the one masked position of each row
        labels = torch.full_like(input_ids, -100)
        labels[rows_idx, masked_at] = targets
        masked_logits = model(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            labels=labels.to(device),
            masked_only=True,
            **extra,
        ).logits  # (B, V)
    else:
        logits = model(
            input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), **extra
        ).logits  # (B, N, V)
        masked_logits = logits[rows_idx.to(logits.device), masked_at.to(logits.device)]
    return masked_logits.float()


def next_word_perplexity(
    model,
    tokenizer,
    sentences: Sequence[Sequence[str]],
    batch_tokens: int = 4096,
    device: str | torch.device | None = None,
    too_long: str = "error",
    max_length: int | None = None,
    progress: bool = False,
    structures=None,
) -> dict:
    """Next-word perplexity of a causal LM on ``sentences`` (:data:`NEXT_WORD_PROTOCOL`, module docstring).

    Args:
        model: a causal LM (``objective = "causal-lm"``) called as ``model(input_ids=(B, N),
            attention_mask=(B, N))`` whose ``.logits`` ``(B, N, V)`` at t score token t + 1.
        tokenizer: its fast tokenizer, one token per word, with ``[CLS]`` (the boundary) and
            ``pad_token_id``.
        sentences: words of each sentence, already normalised as the training corpus was.
        batch_tokens: at most this many tokens (rows x padded length) per forward pass.
        device: where to run; the model's device if None. The model is moved there.
        too_long, max_length: as :func:`masked_lm_perplexity` (the limit counts the two boundaries;
            None = the model's ``max_position_embeddings``, none for a recurrent model).
        progress: show a tqdm progress bar.
        structures: must be None: next-word perplexity reads no trees or phrases (an :class:`InputError`
            otherwise).

    Returns:
        A dict: ``perplexity`` and ``cross_entropy`` (mean nats) over words and sentence ends;
        ``word_perplexity`` and ``word_cross_entropy`` over the words only; ``n_tokens`` (predictions
        scored: words + ends); ``n_words``; ``n_unk`` (word targets that are ``[UNK]``);
        ``n_sentences``, ``n_empty``, ``n_skipped``, ``n_skipped_words``, ``vocab_size``,
        ``max_length``; ``protocol`` (:data:`NEXT_WORD_PROTOCOL`).

    Raises:
        InputError: a model that is not a causal LM; no words to score; a sentence too long (with
            ``too_long="error"``); a tokenizer without one token per word or whose ``[CLS]`` is not
            the training boundary.
    """
    device, max_length = _checked_options(
        model, "causal-lm", "next-word perplexity needs a causal LM", too_long, batch_tokens, device, max_length
    )
    if structures is not None:
        raise InputError("--trees / --phrases: next-word perplexity (a causal LM) reads no trees or phrases")
    if tokenizer.cls_token_id != BOUNDARY_ID:
        raise InputError(
            f"next-word perplexity frames sentences with [CLS] = id {BOUNDARY_ID}; "
            f"this tokenizer has {tokenizer.cls_token_id}"
        )
    ids, word_positions = encode_word_positions(tokenizer, sentences)
    framed = [frame_sentence(x) for x in ids]
    scored, n_empty, n_skipped, n_skipped_words = _scored_sentences(framed, word_positions, max_length, too_long)
    scored.sort(key=lambda s: len(framed[s]))
    batches = [
        [scored[j] for j in batch] for batch in token_budget_batches([len(framed[s]) for s in scored], batch_tokens)
    ]
    totals, n_unk, vocab_size = _next_word_cross_entropy(
        model, [[framed[s] for s in rows] for rows in batches], tokenizer, device, progress
    )
    n_words = sum(len(word_positions[s]) for s in scored)
    n_tokens = n_words + len(scored)
    cross_entropy, word_cross_entropy = float(totals.sum()) / n_tokens, float(totals[0]) / n_words
    return {
        "perplexity": math.exp(cross_entropy),
        "cross_entropy": cross_entropy,
        "word_perplexity": math.exp(word_cross_entropy),
        "word_cross_entropy": word_cross_entropy,
        "n_tokens": n_tokens,
        "n_words": n_words,
        "n_unk": n_unk,
        "n_sentences": len(scored),
        "n_empty": n_empty,
        "n_skipped": n_skipped,
        "n_skipped_words": n_skipped_words,
        "vocab_size": vocab_size,
        "max_length": max_length,
        "protocol": NEXT_WORD_PROTOCOL,
    }


def _next_word_cross_entropy(model, batches: list[list[list[int]]], tokenizer, device, progress: bool):
    """Summed next-word cross-entropy (nats) over ``batches`` of framed sentences, the model in eval
    mode (its training mode restored after). Returns ``(totals, n_unk, vocab_size)``: ``totals`` a
    float64 ``(2,)`` tensor (over words, over sentence ends), ``n_unk`` word targets that are ``[UNK]``."""
    was_training = model.training
    model.eval()
    model.to(device)
    prepare_cpu_loop(device)
    totals = torch.zeros(2, dtype=torch.float64)  # cross-entropy over words, over sentence ends
    n_unk, vocab_size = 0, None
    try:
        with torch.inference_mode():
            for sequences in tqdm(batches, desc="perplexity", unit="batch", disable=not progress):
                losses, is_end, targets, vocab_size = _next_word_losses(
                    model, sequences, tokenizer.pad_token_id, device
                )
                totals += torch.stack([losses[~is_end].sum(), losses[is_end].sum()]).double()
                if tokenizer.unk_token_id is not None:
                    n_unk += int((targets[~is_end] == tokenizer.unk_token_id).sum())
    finally:
        model.train(was_training)
    return totals, n_unk, vocab_size


def _next_word_losses(model, sequences: list[list[int]], pad_id: int, device):
    """One batch of framed sentences: per prediction (flattened, padding dropped) its cross-entropy
    (nats, float64 on the CPU), whether it predicts the closing boundary, and its target id; and V."""
    input_ids, attention_mask = pad_batch(sequences, pad_id)  # (B, N)
    logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits
    targets = input_ids[:, 1:]  # (B, N-1)
    scored = attention_mask[:, 1:].bool()  # (B, N-1)
    lengths = attention_mask.sum(-1)  # (B,)
    is_end = torch.arange(targets.shape[1])[None, :] == (lengths - 2)[:, None]  # (B, N-1)
    losses = (
        F.cross_entropy(logits[:, :-1].float().transpose(1, 2), targets.to(logits.device), reduction="none")
        .double()
        .cpu()
    )  # (B, N-1)
    return losses[scored], is_end[scored], targets[scored], logits.shape[-1]


#: objective name -> the perplexity protocol of models trained for it
PROTOCOLS = {"masked-lm": masked_lm_perplexity, "causal-lm": next_word_perplexity}


def perplexity(model, tokenizer, sentences: Sequence[str | Sequence[str]], **options) -> dict:
    """The perplexity of ``model`` with its objective's protocol (:data:`PROTOCOLS`): masked-LM
    models :func:`masked_lm_perplexity`, causal LMs :func:`next_word_perplexity`; the result's
    ``protocol`` says which.

    Args:
        model: a masked or causal LM of the registry (its ``objective`` picks the protocol).
        tokenizer: its tokenizer (one token per word).
        sentences: per sentence a raw string, tokenised as the parser does (:func:`sentence_words`), or
            a list of words, taken as they are (already normalised as the training corpus was).
        options: the protocol's (``batch_tokens``, ``device``, ``too_long``, ``max_length``,
            ``progress``, ``structures``: per word of the sentences as :func:`sentence_words` gives them).

    Returns:
        The protocol's dict (``perplexity``, ``cross_entropy``, counts, ``protocol``).

    Raises:
        InputError: an objective without a protocol here, a sentence that is neither a string nor a list
            of strings (naming it), and the protocol's own errors.
    """
    objective = getattr(model, "objective", "masked-lm")
    if objective not in PROTOCOLS:
        raise InputError(f"no perplexity protocol for a {objective} model (known: {', '.join(sorted(PROTOCOLS))})")
    return PROTOCOLS[objective](model, tokenizer, sentence_words(sentences), **options)


def sentence_words(sentences: Sequence[str | Sequence[str]]) -> list[list[str]]:
    """The words each sentence gives the perplexity protocols.

    A string is read as the parser reads raw text (:mod:`syntaxformer.parser`): tokenised Penn-Treebank
    style (:func:`~syntaxformer.parser.tokenize`), punctuation tokens dropped
    (:func:`~syntaxformer.parser.is_punctuation`: the training text has none), the other tokens
    normalised (:func:`~syntaxformer.data.preprocess.normalise_word`: lower-cased, a token with a digit
    becomes ``N``); a string with no word (empty, only punctuation) is an empty sentence, counted in
    ``n_empty``. A list of strings is taken as it is.

    Args:
        sentences: per sentence a string or a list of word strings.
    Returns:
        Per sentence its words.
    Raises:
        InputError: a sentence that is neither a string nor a sequence of strings (naming it, 1-based).
    """
    words = []
    for number, sentence in enumerate(sentences, start=1):
        if isinstance(sentence, str):
            words.append([normalise_word(t) for t in tokenize(sentence) if not is_punctuation(t)])
        elif isinstance(sentence, Sequence) and all(isinstance(w, str) for w in sentence):
            words.append(list(sentence))
        else:
            raise InputError(
                f"expected a string or a list of word strings, got {type(sentence).__name__}: {sentence!r:.60}",
                sentence=number,
            )
    return words
