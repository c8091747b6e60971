"""Structure sources that run a model: trees, heads and phrases induced by a trained model for the
sentences another model reads (``--trees induced:DIR``, ``--phrases induced:DIR``), once per sentence
or from every masked input as the reading model sees it."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from syntaxformer.data.phrases import (
    NO_PHRASE,
    check_tree_words,
    cut_tree,
    pad_phrases,
    token_phrase_ids,
    word_phrase_ids,
)
from syntaxformer.data.structure_source import StructureSource
from syntaxformer.data.trees import check_tree, pad_heads, token_heads
from syntaxformer.errors import InputError
from syntaxformer.parsing import DecoderOptions, decode, load_model, model_structures, resolve_decoder_options

logger = logging.getLogger(__name__)


def induced_heads(
    model_dir: str, sentences: Sequence[Sequence[str]], batch_size: int = 64, masked: Sequence[int | None] | None = None
) -> list[list[int]]:
    """Maximum-spanning-tree heads (1-based, 0 = root) of a trained model for ``sentences``
    (normalised words, as the training corpora), once, in evaluation mode on the CPU. ``masked``: per
    sentence, the 0-based word the model sees as ``[MASK]`` (or None), as
    :func:`syntaxformer.parsing.model_structures` takes it; the heads still cover every word.

    Raises:
        InputError: not a model folder, a model without a dependency distribution (only StructFormer-like
            models induce heads), or a tree that does not match its sentence.
    """
    model, tokenizer, _ = load_model(model_dir)
    trees = model_heads(model, tokenizer, sentences, batch_size, masked, source=model_dir)
    logger.info("induced the trees of %d sentences with %s", len(trees), model_dir)
    return trees


def model_heads(
    model,
    tokenizer,
    sentences: Sequence[Sequence[str]],
    batch_size: int = 64,
    masked: Sequence[int | None] | None = None,
    source: str | None = None,
) -> list[list[int]]:
    """:func:`induced_heads` with a loaded ``model`` (evaluation mode) and its ``tokenizer``; ``source``
    names the model in errors.

    Raises:
        InputError: as :func:`induced_heads`.
    """
    structures = model_structures(model, tokenizer, sentences, batch_size=batch_size, normalise=False, masked=masked)
    trees = []
    for number, (words, s) in enumerate(zip(sentences, structures), start=1):
        heads = s.heads()
        if heads is None:
            raise InputError(
                "--trees induced: this model induces no dependency heads (a StructFormer is needed)", path=source
            )
        check_tree(heads, len(words), source, number)
        trees.append(list(heads))
    return trees


def induced_phrase_trees(
    model_dir: str, sentences: Sequence[Sequence[str]], batch_size: int = 64, masked: Sequence[int | None] | None = None
) -> list:
    """The trees (``nltk.Tree``, leaves = the words) a trained model induces for ``sentences``
    (normalised words), decoded with the model's own decoder settings as ``parse`` does
    (:func:`syntaxformer.parsing.resolve_decoder_options`: its ``decoder.json``, else the defaults); once, in
    evaluation mode on the CPU. ``masked``: per sentence, the 0-based word the model sees as ``[MASK]``
    (or None), as :func:`syntaxformer.parsing.model_structures` takes it; the tree keeps every word.

    Raises:
        InputError: not a model folder, a model that induces no structure, or a tree whose words do
            not match its sentence (naming ``model_dir`` and the 1-based sentence).
    """
    model, tokenizer, _ = load_model(model_dir, device="cpu")
    trees = model_phrase_trees(
        model, tokenizer, sentences, batch_size, masked, source=model_dir, options=resolve_decoder_options(model_dir)
    )
    logger.info("induced the constituency trees of %d sentences with %s", len(trees), model_dir)
    return trees


def model_phrase_trees(
    model,
    tokenizer,
    sentences: Sequence[Sequence[str]],
    batch_size: int = 64,
    masked: Sequence[int | None] | None = None,
    source: str | None = None,
    options=None,
) -> list:
    """:func:`induced_phrase_trees` with a loaded ``model`` (evaluation mode) and its ``tokenizer``;
    ``source`` names the model in errors; ``options``: the
    :class:`~syntaxformer.structures.DecoderOptions` (None = the defaults).

    Raises:
        InputError: as :func:`induced_phrase_trees`.
    """
    structures = model_structures(model, tokenizer, sentences, batch_size=batch_size, normalise=False, masked=masked)
    trees, _ = decode(structures, options or DecoderOptions())
    for number, (tree, words) in enumerate(zip(trees, sentences), start=1):
        check_tree_words(tree, words, source, number)
    return trees


def masked_copy_structures(
    sentences: Sequence[Sequence[str]],
    trees: str | StructureSource | None = None,
    phrases: str | StructureSource | None = None,
    heads: Sequence[Sequence[int]] | None = None,
    phrase_trees: Sequence | None = None,
    level: int = 1,
) -> list[list[dict]]:
    """Per sentence, per word ``w``, the structure of the masked-LM protocol's copy in which ``w`` is
    masked: an induced source (``trees`` / ``phrases`` = ``induced:MODEL_DIR``) parses that copy, so the
    source model sees ``[MASK]`` where the scored model does and no structure carries information about
    the masked word; a gold source gives every copy its sentence's structure (``heads`` per word,
    ``phrase_trees`` cut at ``level``, as :func:`sentence_structures`).

    A sentence of ``n`` words costs ``n`` parses: the source model reads every copy of every sentence.

    Returns:
        ``out[s][w]``: a structure dict (``"heads"`` and / or ``"phrase_ids"``, per word).
    Raises:
        InputError: a bad ``trees`` / ``phrases`` value, a gold source without its ``heads`` /
            ``phrase_trees``, or as
            :func:`~syntaxformer.sources.induced.induced_heads` / :func:`~syntaxformer.sources.induced.induced_phrase_trees`.
    """
    trees, phrases = StructureSource.parse(trees, "--trees"), StructureSource.parse(phrases, "--phrases")
    copies = [(s, w) for s, words in enumerate(sentences) for w in range(len(words))]
    copy_sentences, masked = [list(sentences[s]) for s, _ in copies], [w for _, w in copies]
    if (trees is not None and trees.is_gold and heads is None) or (
        phrases is not None and phrases.is_gold and phrase_trees is None
    ):
        raise InputError("a gold structure source needs its trees")
    induced_trees, induced_phrases = _induced(trees), _induced(phrases)
    copy_heads = induced_heads(induced_trees, copy_sentences, masked=masked) if induced_trees else None
    copy_trees = induced_phrase_trees(induced_phrases, copy_sentences, masked=masked) if induced_phrases else None
    out: list[list[dict]] = [[{} for _ in words] for words in sentences]
    for k, (s, w) in enumerate(copies):
        structure = out[s][w]
        if trees is not None:
            structure["heads"] = list(copy_heads[k] if copy_heads is not None else heads[s])
        if phrases is not None:
            tree = copy_trees[k] if copy_trees is not None else phrase_trees[s]
            structure["phrase_ids"] = word_phrase_ids(cut_tree(tree, level))
    logger.info(
        "structures of %d masked copies (%s)",
        len(copies),
        ", ".join(f"{name} {src}" for name, src in (("trees", trees), ("phrases", phrases)) if src),
    )
    return out


def _induced(source: StructureSource | None) -> str | None:
    """The model folder of an induced ``source``; None for gold or no source."""
    return None if source is None else source.model_dir


class MaskedInputInducer:
    """``train --induced-from masked``: each training batch's induced structures, parsed from the inputs
    as the masked LM reads them (BERT masking's ``[MASK]`` and random replacements included), so no
    structure carries information about a masked word (DESIGN.md §3.2). The source models are those of
    the run's ``--trees`` / ``--phrases induced:MODEL_DIR`` (a gold source stays the sentence's, from the
    training data).

    Every input token that is not a special token (padding, ``[CLS]``) is one word: the run's tokenizer
    must give one token per word. The words go to each source model's own tokenizer (``[MASK]`` is its
    ``[MASK]``; a word outside its vocabulary its ``[UNK]``) and are parsed as
    :func:`~syntaxformer.sources.induced.model_heads` / :func:`~syntaxformer.sources.induced.model_phrase_trees`
    parse them (maximum-spanning-tree heads; trees decoded as ``parse`` does, cut at ``level``).

    Args:
        tokenizer: the trained model's tokenizer.
        trees, phrases: the run's ``--trees`` / ``--phrases`` values (None, ``gold`` or ``induced:DIR``;
            strings or :class:`~syntaxformer.data.structure_source.StructureSource`).
        level: the level phrases are cut at (the reading prior's ``tree_level``).
        device: where the source models run.

    Raises:
        InputError: a bad ``trees`` / ``phrases`` value; neither source induced; a tokenizer that is not word-level (WordPiece); as
            :func:`syntaxformer.parsing.load_model`.
    """

    def __init__(
        self,
        tokenizer,
        trees: str | StructureSource | None = None,
        phrases: str | StructureSource | None = None,
        level: int = 1,
        device: str | torch.device = "cpu",
    ):
        heads_dir = _induced(StructureSource.parse(trees, "--trees"))
        phrases_dir = _induced(StructureSource.parse(phrases, "--phrases"))
        if not (heads_dir or phrases_dir):
            raise InputError("--induced-from masked needs --trees or --phrases induced:MODEL_DIR")
        model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
        if type(model).__name__ != "WordLevel":
            raise InputError(
                "--induced-from masked reads the inputs back as words: it needs a tokenizer with one "
                "token per word (--tokenizer word), or use --induced-from sentence"
            )
        self.tokenizer, self.level = tokenizer, level
        self.not_words = set(tokenizer.all_special_ids) - {tokenizer.mask_token_id, tokenizer.unk_token_id}
        self.heads_source = (heads_dir, *load_model(heads_dir, device)[:2]) if heads_dir else None
        self.phrase_source = (phrases_dir, *load_model(phrases_dir, device)[:2]) if phrases_dir else None
        self.phrase_decoder = resolve_decoder_options(phrases_dir) if phrases_dir else None

    def words(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[list[list[str]], list[list[int | None]]]:
        """Per row of ``input_ids`` (B, N), its words (the tokens' strings, special tokens and padding
        left out) and, per position, its 0-based word or None."""
        sentences, word_ids = [], []
        for ids, keep in zip(input_ids.tolist(), attention_mask.tolist()):
            wids: list[int | None] = []
            positions = []
            for i, k in zip(ids, keep):
                is_word = bool(k) and i not in self.not_words
                wids.append(len(positions) if is_word else None)
                if is_word:
                    positions.append(i)
            sentences.append(self.tokenizer.convert_ids_to_tokens(positions))
            word_ids.append(wids)
        return sentences, word_ids

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """The induced structures of a batch: ``{"heads": (B, N)}`` (token heads, -100 padding) and / or
        ``{"phrase_ids": (B, N)}`` (token phrase ids, -1 padding), long, on the CPU, for the inputs
        ``input_ids`` (B, N) with ``attention_mask`` (B, N) as the model reads them."""
        sentences, word_ids = self.words(input_ids, attention_mask)
        width = input_ids.shape[1]
        out = {}
        with torch.inference_mode():
            if self.heads_source is not None:
                path, model, tokenizer = self.heads_source
                heads = model_heads(model, tokenizer, sentences, batch_size=len(sentences), source=path)
                out["heads"] = pad_heads([token_heads(h, w) for h, w in zip(heads, word_ids)], width)
            if self.phrase_source is not None:
                path, model, tokenizer = self.phrase_source
                trees = model_phrase_trees(
                    model, tokenizer, sentences, batch_size=len(sentences), source=path, options=self.phrase_decoder
                )
                out["phrase_ids"] = pad_phrases(
                    [token_phrase_ids(word_phrase_ids(cut_tree(t, self.level)), w) for t, w in zip(trees, word_ids)],
                    NO_PHRASE,
                    width,
                )
        return out


__all__ = [
    "induced_heads",
    "model_heads",
    "induced_phrase_trees",
    "model_phrase_trees",
    "masked_copy_structures",
    "MaskedInputInducer",
]
