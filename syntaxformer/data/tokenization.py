"""Tokenisation: one token per word (the default), or WordPiece; word-piece links → word links.

Both tokenizers are built with the ``tokenizers`` library and returned as a
:class:`transformers.PreTrainedTokenizerFast`, so ``tok.save_pretrained(folder)`` writes them beside a
model and ``AutoTokenizer.from_pretrained(folder)`` loads them back (:func:`save_tokenizer` writes
a folder that ``transformers`` 4 and 5 both read).

Special tokens, the same ids in every tokenizer built here::

    [PAD] = 0   [UNK] = 1   [MASK] = 2   [CLS] = 3

Mikolov's ``<unk>`` (in ``ptb-lm``) is mapped to ``[UNK]`` by the tokenizer's normaliser, so it never
becomes a word of the vocabulary.

Words are taken as given: normalise them first (lower-case, digits → ``N``:
:func:`syntaxformer.data.preprocess.normalise_word`, which ``load_corpus`` already applies), and give
the same normalisation at parse time.

``[CLS]``: the authors' public code prepends a ``[CLS]`` to every sentence; the paper does not say.
Here no ``[CLS]`` is added unless the tokenizer is built with ``add_cls=True`` (a post-processor
that prepends it, saved with the tokenizer). Either way :func:`encode` returns ``word_ids`` with
``None`` at special tokens, so parsing code can drop them before :func:`word_links`.

Sentences longer than ``max_length`` tokens are never truncated silently: :func:`encode` raises
:class:`~syntaxformer.errors.InputError` by default (what parsing wants: the caller decides), and
training asks for ``overflow="split"`` (cut into consecutive pieces at word boundaries) or
``overflow="skip"`` (dropped); both log how many sentences they touched.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

PAD, UNK, MASK, CLS = "[PAD]", "[UNK]", "[MASK]", "[CLS]"
#: The special tokens in id order (ids 0-3 in every tokenizer built here).
SPECIAL_TOKENS = [PAD, UNK, MASK, CLS]

#: The sentence-boundary token of causal-LM framing (``[CLS] w_1 .. w_n [CLS]``): ``[CLS]``'s id in every
#: tokenizer of this module.
BOUNDARY_ID = SPECIAL_TOKENS.index(CLS)


def frame_sentence(ids: list[int]) -> list[int]:
    """``[CLS] ids [CLS]``, the causal-LM framing of one sentence's token ids (ON-LSTM: the first
    ``[CLS]`` is the context of the first word, the last the sentence end to predict). A sequence that
    already starts with ``[CLS]`` (a tokenizer with ``add_cls``) is not given a second one."""
    start = [] if ids[:1] == [BOUNDARY_ID] else [BOUNDARY_ID]
    return start + list(ids) + [BOUNDARY_ID]


#: Mikolov's unknown-word token in ``ptb-lm``; mapped to ``[UNK]``.
MIKOLOV_UNK = "<unk>"


def _wrap(tok: Tokenizer, add_cls: bool) -> PreTrainedTokenizerFast:
    """Shared finishing: normaliser (``<unk>`` → ``[UNK]``), whitespace pre-tokenizer, optional
    ``[CLS]`` post-processor, and the ``transformers`` wrapper."""
    tok.normalizer = normalizers.Replace(MIKOLOV_UNK, UNK)
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if add_cls:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{CLS} $A", special_tokens=[(CLS, tok.token_to_id(CLS))]
        )
    for i, s in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        unk_token=UNK,
        mask_token=MASK,
        cls_token=CLS,
        model_input_names=["input_ids", "attention_mask"],
        clean_up_tokenization_spaces=False,
    )


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, folder: str | Path) -> None:
    """``tokenizer.save_pretrained(folder)``, readable by ``transformers`` 4 and 5 alike.

    ``transformers`` 5 records the class as ``"TokenizersBackend"``, a name 4.x cannot load; the
    class is recorded as ``"PreTrainedTokenizerFast"`` instead, which both read (v5 maps it to
    ``TokenizersBackend``).
    """
    tokenizer.save_pretrained(folder)
    path = Path(folder) / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("tokenizer_class") == "TokenizersBackend":
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
        path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _check_sentences(sentences: Sequence[Sequence[str]]) -> None:
    for s, words in enumerate(sentences, 1):
        if isinstance(words, str):
            raise InputError("a sentence must be a list of words, not a string", sentence=s)
        for w in words:
            if not w or any(c.isspace() for c in w):
                raise InputError(f"word {w!r} is empty or contains white space", sentence=s)


def build_word_tokenizer(
    sentences: Iterable[Sequence[str]], min_freq: int = 1, max_vocab: int | None = None, add_cls: bool = False
) -> PreTrainedTokenizerFast:
    """One token per word (``tokenizers`` WordLevel model, WhitespaceSplit pre-tokenizer).

    The vocabulary is the 4 special tokens (ids 0-3, see the module docstring) followed by every word
    seen at least ``min_freq`` times, most frequent first, ties in alphabetical order (so the same
    corpus always gives the same ids). ``<unk>`` and the special tokens themselves are not words.
    Words outside the vocabulary encode as ``[UNK]``.

    Args:
        sentences: the training corpus, lists of (already normalised) words.
        min_freq: keep words seen at least this many times (the public code keeps > 1, i.e. 2).
        max_vocab: at most this many entries in all (special tokens included), or None.
        add_cls: prepend ``[CLS]`` to every encoded sentence (the public code does).

    Raises:
        InputError: an empty word, a word with white space, or a sentence given as a string.
    """
    sentences = list(sentences)
    _check_sentences(sentences)
    counts = Counter(w for words in sentences for w in words)
    for s in SPECIAL_TOKENS + [MIKOLOV_UNK]:
        counts.pop(s, None)
    words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
    if max_vocab is not None:
        if max_vocab <= len(SPECIAL_TOKENS):
            raise InputError(f"max_vocab must exceed the {len(SPECIAL_TOKENS)} special tokens, got {max_vocab}")
        words = words[: max_vocab - len(SPECIAL_TOKENS)]
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.add_special_tokens(SPECIAL_TOKENS)
    logger.info("word vocabulary: %d entries (%d word types seen, min_freq %d)", len(vocab), len(counts), min_freq)
    return _wrap(tok, add_cls)


def build_wordpiece_tokenizer(
    sentences: Iterable[Sequence[str]], vocab_size: int = 16000, min_freq: int = 1, add_cls: bool = False
) -> PreTrainedTokenizerFast:
    """WordPiece (``tokenizers`` WordPieceTrainer, ``##`` continuation prefix), the paper's option.

    Not reproducible between processes: the trainer assigns ids to continuation pieces in hash-map
    order and breaks equal merge counts by id, so two processes given the same sentences can learn
    different vocabularies (huggingface/tokenizers#1794). A run saves its tokenizer; ``syntaxformer
    train --tokenizer RUN_DIR`` reuses it.

    Pieces never cross a word (WhitespaceSplit pre-tokenizer on the given words), so every token
    belongs to exactly one word and :func:`word_links` can turn token links into word links.

    Args:
        sentences: the training corpus, lists of (already normalised) words.
        vocab_size: the size of the vocabulary, special tokens included (the paper: 16k).
        min_freq: minimum frequency of a merged piece.
        add_cls: prepend ``[CLS]`` to every encoded sentence.
    """
    sentences = list(sentences)
    _check_sentences(sentences)
    tok = Tokenizer(models.WordPiece(unk_token=UNK))
    tok.normalizer = normalizers.Replace(MIKOLOV_UNK, UNK)
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_freq, special_tokens=SPECIAL_TOKENS, show_progress=False
    )
    # <unk> and the special tokens are not text to learn pieces from
    skip = set(SPECIAL_TOKENS) | {MIKOLOV_UNK}
    tok.train_from_iterator((" ".join(w for w in words if w not in skip) for words in sentences), trainer=trainer)
    tok.decoder = decoders.WordPiece()
    logger.info(
        "WordPiece vocabulary: %d entries (not reproducible by retraining: the tokenizers trainer breaks "
        "count ties in hash-map order, huggingface/tokenizers#1794; reuse the saved tokenizer instead)",
        tok.get_vocab_size(),
    )
    return _wrap(tok, add_cls)


def word_links(token_links, word_ids: Sequence[int | None]):
    """Turn link probabilities (or any gap-indexed quantity) over tokens into one per word gap.

    The rule: the link between word ``k`` and word ``k+1`` is the token link across the gap between
    the **last piece of word k** and the **first piece of word k+1** (adjacent tokens, since pieces
    never cross words); links between two pieces of the same word are ignored. Special tokens
    (``word_ids`` entry None, e.g. a leading ``[CLS]``) are skipped: a gap touching one is not a word
    gap. With one token per word and no special tokens this is the identity.

    Args:
        token_links: ``[..., T-1]`` tensor (or a sequence of T-1 numbers), entry ``t`` for the gap
            between tokens ``t`` and ``t+1``; leading dimensions (layers, batch) are kept.
        word_ids: ``[T]``, the word index of each token (0-based, non-decreasing, each word's pieces
            contiguous) or None for special tokens, as :func:`encode` returns them.

    Returns:
        ``[..., n-1]`` for the ``n`` words: a tensor if ``token_links`` is one, else a list.

    Example: pieces ``[CLS] the cat ##s sat`` have word_ids ``[None, 0, 1, 1, 2]``; the word gaps
    are (the|cat) = token gap 1 and (cats|sat) = token gap 3; token gaps 0 ([CLS]|the) and 2
    (cat|##s) are ignored.
    """
    positions = [t for t, w in enumerate(word_ids) if w is not None]
    gaps = []
    for a, b in zip(positions, positions[1:]):
        wa, wb = word_ids[a], word_ids[b]
        if wb == wa:
            continue
        assert wb == wa + 1 and b == a + 1, f"word pieces not contiguous: {list(word_ids)}"
        gaps.append(a)
    if isinstance(token_links, torch.Tensor):
        assert token_links.shape[-1] == len(word_ids) - 1, (token_links.shape, len(word_ids))
        return token_links[..., torch.tensor(gaps, dtype=torch.long, device=token_links.device)]
    assert len(token_links) == len(word_ids) - 1, (len(token_links), len(word_ids))
    return [token_links[g] for g in gaps]


def encode(
    tokenizer: PreTrainedTokenizerFast,
    sentences: Sequence[Sequence[str]],
    max_length: int | None = None,
    overflow: str = "error",
) -> tuple[list[list[int]], list[list[int | None]]]:
    """Encode word lists to token ids, with each token's word index.

    Special tokens the tokenizer adds (e.g. ``[CLS]``) are included, with word index None.

    Args:
        tokenizer: a fast tokenizer (one built here, or loaded with ``AutoTokenizer``).
        sentences: lists of words.
        max_length: the most tokens (special tokens included) one encoded sentence may have, or None.
        overflow: what to do with a sentence over ``max_length``: ``"error"`` (default; raise),
            ``"skip"`` (drop it) or ``"split"`` (cut into consecutive pieces of at most
            ``max_length`` tokens, at word boundaries where possible, each with the tokenizer's
            special tokens; word indices stay those of the original sentence). Both log a count.

    Returns:
        ``(ids, word_ids)``: two lists with one entry per encoded sentence (or piece). Without
        skipping or splitting, entry ``i`` is sentence ``i``.

    Raises:
        InputError: a sentence over ``max_length`` with ``overflow="error"`` (naming it), a bad word
            (empty, or containing white space), or an unknown ``overflow``.
    """
    if overflow not in ("error", "skip", "split"):
        raise InputError(f"overflow must be error, skip or split, got {overflow!r}")
    sentences = list(sentences)
    _check_sentences(sentences)
    if not sentences:
        return [], []
    enc = tokenizer([list(s) for s in sentences], is_split_into_words=True, add_special_tokens=True)
    all_ids: list[list[int]] = []
    all_words: list[list[int | None]] = []
    n_skipped = n_split = 0
    for i, ids in enumerate(enc["input_ids"]):
        wids = enc.word_ids(i)
        if max_length is None or len(ids) <= max_length:
            all_ids.append(list(ids))
            all_words.append(list(wids))
            continue
        if overflow == "error":
            raise InputError(
                f"{len(sentences[i])} words give {len(ids)} tokens, more than max_length {max_length}", sentence=i + 1
            )
        if overflow == "skip":
            n_skipped += 1
            continue
        n_split += 1
        for piece_ids, piece_words in _split(ids, wids, max_length):
            all_ids.append(piece_ids)
            all_words.append(piece_words)
    if n_skipped:
        logger.warning("skipped %d of %d sentences longer than %d tokens", n_skipped, len(sentences), max_length)
    if n_split:
        logger.warning(
            "split %d of %d sentences longer than %d tokens into pieces", n_split, len(sentences), max_length
        )
    return all_ids, all_words


def _split(ids: list[int], wids: list[int | None], max_length: int):
    """Cut one over-long encoded sentence into pieces of at most ``max_length`` tokens, each wrapped
    in the sentence's leading and trailing special tokens; cuts fall at word boundaries unless one
    word alone is too long."""
    first = next(t for t, w in enumerate(wids) if w is not None)
    last = max(t for t, w in enumerate(wids) if w is not None)
    prefix, suffix = ids[:first], ids[last + 1 :]
    budget = max_length - len(prefix) - len(suffix)
    if budget < 1:
        raise InputError(f"max_length {max_length} leaves no room for words beside special tokens")
    body, body_w = ids[first : last + 1], wids[first : last + 1]
    start = 0
    while start < len(body):
        end = min(start + budget, len(body))
        if end < len(body):
            # move the cut back to a word boundary, unless the piece would then be empty
            cut = end
            while cut > start and body_w[cut] == body_w[cut - 1]:
                cut -= 1
            end = cut if cut > start else end
        yield (prefix + body[start:end] + suffix, [None] * len(prefix) + body_w[start:end] + [None] * len(suffix))
        start = end
