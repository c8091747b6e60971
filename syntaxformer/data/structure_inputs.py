"""Per-sentence structure for evaluation: the dependency heads (``--trees``, :mod:`syntaxformer.data.trees`)
and / or the phrase partition (``--phrases``, :mod:`syntaxformer.data.phrases`) of each sentence, as
``perplexity`` and ``probe`` give them to a model that reads them.

A sentence's structure is a small dict of per-word lists, keyed by the ``structure_inputs`` name the
model reads:

* ``"heads"``: n heads (1-based, 0 = root), mapped onto tokens by
  :func:`~syntaxformer.data.trees.token_heads` (padding :data:`~syntaxformer.data.trees.NO_TREE`, -100);
* ``"phrase_ids"``: n phrase ids (0-based, in order), mapped onto tokens by
  :func:`~syntaxformer.data.phrases.token_phrase_ids` (padding :data:`~syntaxformer.data.phrases.NO_PHRASE`, -1).

:func:`load_structured_corpus` reads the sentences and their structures exactly as ``train --trees /
--phrases`` reads a corpus; :func:`token_structures` maps them onto tokens; :func:`pad_structures`
batches them into ``structure_inputs={"heads": (B, N), "phrase_ids": (B, N)}`` (long).

A structure a model induces from the whole sentence carries information about a masked word (its
depth, its tree distances, its phrase). So an induced structure can instead come from the input as the
masked LM reads it: :func:`masked_copy_structures` parses each one-mask copy of the perplexity protocol
(``perplexity --induced-from masked``), :class:`MaskedInputInducer` each training batch (``train
--induced-from masked``).
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)


def _mappers() -> dict:
    """``structure_inputs`` key -> (word -> token mapping, padding value)."""
    from syntaxformer.data.phrases import NO_PHRASE, token_phrase_ids
    from syntaxformer.data.trees import NO_TREE, token_heads
    return {"heads": (token_heads, NO_TREE), "phrase_ids": (token_phrase_ids, NO_PHRASE)}


def load_structured_corpus(corpus: str, trees: str | None = None, phrases: str | None = None
                           ) -> tuple[list[list[str]], list[list[int]] | None, list | None]:
    """``(sentences, per-word heads or None, constituency trees or None)`` of ``corpus``, the rule of
    ``train --trees / --phrases``: the sentences come from the dependency source (``trees="gold"``), else
    the treebank (``phrases="gold"``), else :func:`~syntaxformer.data.corpus.load_corpus`; each structure
    is then read or induced for those sentences.

    Raises:
        InputError: as :func:`~syntaxformer.data.trees.load_tree_corpus`,
            :func:`~syntaxformer.data.phrases.load_phrase_trees` (words that do not match, naming the
            sentence) or :func:`~syntaxformer.data.trees.induced_heads`.
    """
    from syntaxformer.data.phrases import load_phrase_trees
    from syntaxformer.data.trees import induced_heads, load_tree_corpus
    sentences = heads = constituency = None
    if trees == "gold" or (trees is not None and phrases is None):
        sentences, heads = load_tree_corpus(trees, corpus)
    if phrases is not None:
        sentences, constituency = load_phrase_trees(phrases, corpus, sentences)
    if trees is not None and heads is None:
        heads = induced_heads(trees[len("induced:"):], sentences)
    if sentences is None:
        from syntaxformer.data.corpus import load_corpus
        sentences = load_corpus(corpus)
    return sentences, heads, constituency


def sentence_structures(n: int, heads: Sequence[Sequence[int]] | None = None,
                        phrase_trees: Sequence | None = None, level: int = 1) -> list[dict] | None:
    """Per sentence (``n`` of them), its structure dict: ``"heads"`` from ``heads`` (per word, 1-based),
    ``"phrase_ids"`` from ``phrase_trees`` (``nltk.Tree`` per sentence, cut at ``level`` by
    :func:`~syntaxformer.data.phrases.cut_tree`); None when both are None."""
    from syntaxformer.data.phrases import cut_tree, word_phrase_ids
    if heads is None and phrase_trees is None:
        return None
    out: list[dict] = [{} for _ in range(n)]
    for s, structure in enumerate(out):
        if heads is not None:
            structure["heads"] = list(heads[s])
        if phrase_trees is not None:
            structure["phrase_ids"] = word_phrase_ids(cut_tree(phrase_trees[s], level))
    return out


def is_induced(source: str | None) -> bool:
    """Whether a ``--trees`` / ``--phrases`` value is ``induced:MODEL_DIR`` (a model parses the sentences)."""
    return source is not None and source.startswith("induced:")


def masked_copy_structures(sentences: Sequence[Sequence[str]], trees: str | None = None,
                           phrases: str | None = None, heads: Sequence[Sequence[int]] | None = None,
                           phrase_trees: Sequence | None = None, level: int = 1) -> list[list[dict]]:
    """Per sentence, per word ``w``, the structure of the masked-LM protocol's copy in which ``w`` is
    masked: an induced source (``trees`` / ``phrases`` = ``induced:MODEL_DIR``) parses that copy, so the
    source model sees ``[MASK]`` where the scored model does and no structure carries information about
    the masked word; a gold source gives every copy its sentence's structure (``heads`` per word,
    ``phrase_trees`` cut at ``level``, as :func:`sentence_structures`).

    A sentence of ``n`` words costs ``n`` parses: the source model reads every copy of every sentence.

    Returns:
        ``out[s][w]``: a structure dict (``"heads"`` and / or ``"phrase_ids"``, per word).
    Raises:
        InputError: a gold source without its ``heads`` / ``phrase_trees``, or as
            :func:`~syntaxformer.data.trees.induced_heads` / :func:`~syntaxformer.data.phrases.induced_phrase_trees`.
    """
    from syntaxformer.data.phrases import cut_tree, induced_phrase_trees, word_phrase_ids
    from syntaxformer.data.trees import induced_heads
    copies = [(s, w) for s, words in enumerate(sentences) for w in range(len(words))]
    copy_sentences, masked = [list(sentences[s]) for s, _ in copies], [w for _, w in copies]
    if (trees is not None and not is_induced(trees) and heads is None) or (
            phrases is not None and not is_induced(phrases) and phrase_trees is None):
        raise InputError("a gold structure source needs its trees")
    copy_heads = induced_heads(trees[len("induced:"):], copy_sentences, masked=masked) if is_induced(trees) else None
    copy_trees = (induced_phrase_trees(phrases[len("induced:"):], copy_sentences, masked=masked)
                  if is_induced(phrases) else None)
    out: list[list[dict]] = [[{} for _ in words] for words in sentences]
    for k, (s, w) in enumerate(copies):
        structure = out[s][w]
        if trees is not None:
            structure["heads"] = list(copy_heads[k] if copy_heads is not None else heads[s])
        if phrases is not None:
            tree = copy_trees[k] if copy_trees is not None else phrase_trees[s]
            structure["phrase_ids"] = word_phrase_ids(cut_tree(tree, level))
    logger.info("structures of %d masked copies (%s)", len(copies),
                ", ".join(f"{name} {src}" for name, src in (("trees", trees), ("phrases", phrases)) if src))
    return out


class MaskedInputInducer:
    """``train --induced-from masked``: each training batch's induced structures, parsed from the inputs
    as the masked LM reads them (BERT masking's ``[MASK]`` and random replacements included), so no
    structure carries information about a masked word (DESIGN.md §3.2). The source models are those of
    the run's ``--trees`` / ``--phrases induced:MODEL_DIR`` (a gold source stays the sentence's, from the
    training data).

    Every input token that is not a special token (padding, ``[CLS]``) is one word: the run's tokenizer
    must give one token per word. The words go to each source model's own tokenizer (``[MASK]`` is its
    ``[MASK]``; a word outside its vocabulary its ``[UNK]``) and are parsed as
    :func:`~syntaxformer.data.trees.model_heads` / :func:`~syntaxformer.data.phrases.model_phrase_trees`
    parse them (maximum-spanning-tree heads; trees decoded as ``parse`` does, cut at ``level``).

    Args:
        tokenizer: the trained model's tokenizer.
        trees, phrases: the run's ``--trees`` / ``--phrases`` values (None, ``gold`` or ``induced:DIR``).
        level: the level phrases are cut at (``mgsa_tree_level``).
        device: where the source models run.

    Raises:
        InputError: neither source induced; a tokenizer that is not word-level (WordPiece); as
            :func:`syntaxformer.parsing.load_model`.
    """

    def __init__(self, tokenizer, trees: str | None = None, phrases: str | None = None, level: int = 1,
                 device: str | torch.device = "cpu"):
        from syntaxformer.parsing import load_model, resolve_decoder_options
        if not (is_induced(trees) or is_induced(phrases)):
            raise InputError("--induced-from masked needs --trees or --phrases induced:MODEL_DIR")
        model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
        if type(model).__name__ != "WordLevel":
            raise InputError("--induced-from masked reads the inputs back as words: it needs a tokenizer with one "
                             "token per word (--tokenizer word), or use --induced-from sentence")
        self.tokenizer, self.level = tokenizer, level
        self.not_words = set(tokenizer.all_special_ids) - {tokenizer.mask_token_id, tokenizer.unk_token_id}
        self.heads_source = ((trees[len("induced:"):], *load_model(trees[len("induced:"):], device)[:2])
                             if is_induced(trees) else None)
        self.phrase_source = ((phrases[len("induced:"):], *load_model(phrases[len("induced:"):], device)[:2])
                              if is_induced(phrases) else None)
        self.phrase_decoder = resolve_decoder_options(phrases[len("induced:"):]) if is_induced(phrases) else None

    def words(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
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
        from syntaxformer.data.phrases import NO_PHRASE, cut_tree, model_phrase_trees, pad_phrases, token_phrase_ids
        from syntaxformer.data.phrases import word_phrase_ids
        from syntaxformer.data.trees import model_heads, pad_heads, token_heads
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
                trees = model_phrase_trees(model, tokenizer, sentences, batch_size=len(sentences), source=path,
                                           options=self.phrase_decoder)
                out["phrase_ids"] = pad_phrases([token_phrase_ids(word_phrase_ids(cut_tree(t, self.level)), w)
                                                 for t, w in zip(trees, word_ids)], NO_PHRASE, width)
        return out


def token_structures(structures: Sequence[dict], word_ids: Sequence[Sequence[int | None]],
                     n_words: Sequence[int]) -> list[dict]:
    """Map each sentence's per-word structure onto its tokens.

    Args:
        structures: per sentence, ``{"heads": [...], "phrase_ids": [...]}`` (either or both; per word).
        word_ids: per sentence, per token its 0-based word or None (special token).
        n_words: per sentence, its number of words.
    Returns:
        Per sentence, the same keys with per-token lists (module docstring).
    Raises:
        InputError: not one structure per sentence, an unknown key, or a list that is not one entry per
            word (naming the 1-based sentence).
    """
    if len(structures) != len(word_ids):
        raise InputError(f"{len(structures)} structures (trees / phrases) for {len(word_ids)} sentences")
    return [token_structure(structure, wids, n, s + 1)
            for s, (structure, wids, n) in enumerate(zip(structures, word_ids, n_words))]


def token_structure(structure: dict, word_ids: Sequence[int | None], n_words: int, sentence: int) -> dict:
    """One sentence's :func:`token_structures`: ``structure``'s per-word lists mapped onto the tokens
    ``word_ids`` (per token, its 0-based word or None).

    Raises:
        InputError: an unknown key, or a list that is not one entry per word (naming the 1-based ``sentence``).
    """
    mappers = _mappers()
    row = {}
    for key, values in structure.items():
        if key not in mappers:
            raise InputError(f"unknown structure input {key!r} (known: {', '.join(mappers)})")
        if len(values) != n_words:
            what = "heads" if key == "heads" else "phrase ids"
            raise InputError(f"the {'tree' if key == 'heads' else 'phrase partition'} has {len(values)} "
                             f"{what} for {n_words} words", sentence=sentence)
        row[key] = mappers[key][0](values, word_ids)
    return row


def pad_structures(rows: Sequence[dict], width: int) -> dict[str, torch.Tensor]:
    """Right-pad the token structures of a batch (one dict per row, the same keys) into
    ``{key: (B, width) long}``, each key with its padding value (module docstring)."""
    from syntaxformer.data.batching import pad_rows
    mappers = _mappers()
    return {key: pad_rows([row[key] for row in rows], mappers[key][1], width) for key in (rows[0] if rows else {})}


__all__ = ["load_structured_corpus", "sentence_structures", "is_induced", "masked_copy_structures", "MaskedInputInducer",
           "token_structures", "token_structure", "pad_structures"]
