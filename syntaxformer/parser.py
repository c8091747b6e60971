"""A parser in one call, in the spirit of benepar: raw text in, ``nltk.Tree`` out.

    >>> import syntaxformer
    >>> parser = syntaxformer.load_parser()                   # the shipped parser
    >>> parser = syntaxformer.load_parser("induce-out/model")  # a model you trained
    >>> tree = parser.parse("The old man sat on the bench.")
    >>> trees = parser.parse_sents(["One sentence.", "Another one."])
    >>> syntaxformer.parse("The old man sat on the bench.")   # the shipped parser, one line

What happens to a sentence, as in training (DESIGN.md §4, the PRPN preprocessing):

1. **Tokenisation** of a string by NLTK's Treebank-style word tokenizer (``NLTKWordTokenizer``, the
   Penn Treebank's conventions: ``can't`` -> ``ca n't``, punctuation split off); a list of tokens is
   taken as it is. The leaves of the tree are the tokens **as they appear in the text** (case, digits,
   quotes kept).
2. **Punctuation** is not shown to the model: the treebank the models were trained and scored on has
   none (its punctuation tags, ``$`` and ``#`` are removed). A token made only of punctuation or
   symbol characters (Unicode categories P* and S*) counts as punctuation, except ``%``, ``&``, ``'``
   and ``@``, which the treebank tags as words (:data:`WORD_SYMBOLS`).
3. The other tokens are normalised (lower-cased; a token with a digit becomes ``N``) and parsed with
   the model's decoder settings (:func:`syntaxformer.parsing.resolve_decoder_options`: the ones saved
   with the model by ``induce``, or the ones given).
4. Punctuation is put back as leaves: a punctuation token between two words joins the smallest
   constituent containing both; one before the first or after the last word joins the root.
5. The tree is in the field's form (:func:`syntaxformer.decoding.spans.with_preterminals`): root
   ``S``, constituents ``X``, and a preterminal ``X`` over each token (punctuation included; the
   models induce no part-of-speech tags), ``(S (X (X The) (X old) (X man)) (X sat) ...)``, so
   ``tree.pretty_print()``, ``tree.pos()`` and ``tree.leaves()`` give the tokens in order. A
   one-token sentence is ``(S token)``: the root is the token's preterminal.

``syntaxformer parse`` uses the same object.
"""

from __future__ import annotations

import functools
import logging
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import conllu
from nltk import Tree
from nltk.tokenize import NLTKWordTokenizer

from syntaxformer.decoding.spans import spans_to_tree, with_preterminals
from syntaxformer.errors import InputError
from syntaxformer.parsing import load_model, model_structures, resolve_decoder_options
from syntaxformer.pretrained import model_folder
from syntaxformer.structures import DecoderOptions, Structures

logger = logging.getLogger(__name__)

#: Tokens of only punctuation/symbol characters that the Penn Treebank tags as words: ``%`` (NN),
#: ``&`` (CC), ``'`` (POS, the plural possessive: ``investors '``), ``@`` (IN).
WORD_SYMBOLS = frozenset({"%", "&", "'", "@"})


def is_punctuation(token: str) -> bool:
    """Whether ``token`` is punctuation the models never see: only Unicode punctuation (P*) or symbol
    (S*) characters, and not one of :data:`WORD_SYMBOLS`."""
    return token not in WORD_SYMBOLS and all(unicodedata.category(c)[0] in "PS" for c in token)


@functools.lru_cache(maxsize=1)
def _word_tokenizer() -> NLTKWordTokenizer:
    return NLTKWordTokenizer()


def tokenize(text: str) -> list[str]:
    """The tokens of one sentence, as they appear in ``text`` (Penn Treebank conventions, by NLTK's
    ``NLTKWordTokenizer``; its spans are used, so quotes are not rewritten as ````` / ``''``)."""
    return [text[start:end] for start, end in _word_tokenizer().span_tokenize(text)]


def _tokens(sentence, number: int) -> list[str]:
    """The tokens of one input sentence (a string, or a sequence of token strings)."""
    if isinstance(sentence, str):
        tokens = tokenize(sentence)
    elif isinstance(sentence, Sequence) and all(isinstance(t, str) for t in sentence):
        tokens = [t for t in sentence if t.strip()]
    else:
        raise InputError(
            f"expected a string or a list of token strings, got {type(sentence).__name__}: {sentence!r:.60}",
            sentence=number,
        )
    if not tokens:
        raise InputError(f"nothing to parse in {sentence!r:.60}: the sentence is empty", sentence=number)
    if all(is_punctuation(t) for t in tokens):
        raise InputError(f"nothing to parse in {sentence!r:.60}: the sentence is only punctuation", sentence=number)
    return tokens


class Parser:
    """A trained model that parses sentences (raw text or tokens) into ``nltk.Tree``.

    Args:
        model: a model that induces structure (evaluation mode).
        tokenizer: its tokenizer.
        options: the decoder settings (:class:`~syntaxformer.structures.DecoderOptions`).
        name: where the model came from (its folder), for messages.
        batch_size: sentences per forward pass.

    Use :func:`load_parser` to make one from a folder.
    """

    def __init__(self, model, tokenizer, options: DecoderOptions, name: str = "<model>", batch_size: int = 64):
        self.model, self.tokenizer, self.options = model, tokenizer, options
        self.name, self.batch_size = name, batch_size

    def __repr__(self) -> str:
        return f"Parser({self.name!r}, {self.options})"

    @property
    def gives_dependencies(self) -> bool:
        """Whether the model induces dependency heads too (StructFormer)."""
        return self.check() is not None

    def check(self) -> list[int] | None:
        """Parse a three-word sentence with the decoder settings: raises InputError for a model that
        induces nothing or settings its structures do not take; returns its heads (None: no
        dependencies)."""
        sentence = self.structures([["the", "cat", "sat"]])[0]
        sentence.spans(self.options)
        return sentence.heads(self.options)

    def structures(self, words: Sequence[Sequence[str]]) -> list[Structures]:
        """The model's structures over lists of **words** (no punctuation handling; normalised as in
        training), one :class:`~syntaxformer.structures.Structures` per sentence."""
        return model_structures(self.model, self.tokenizer, words, batch_size=self.batch_size)

    def parse(self, sentence: str | Sequence[str]) -> Tree:
        """The tree of one sentence: a string (tokenised here) or a list of tokens.

        Returns:
            ``nltk.Tree`` in the field's form (module docstring, step 5): root ``S``, constituents
            ``X``, a preterminal ``X`` over each of the sentence's tokens.
        Raises:
            InputError (a ValueError): an empty sentence, one of only punctuation, or not a string /
                list of strings.
        """
        return self.parse_sents([sentence])[0]

    def parse_sents(self, sentences: Iterable[str | Sequence[str]]) -> list[Tree]:
        """The trees of many sentences (batched), in order; see :meth:`parse`.

        Raises:
            InputError: as :meth:`parse`, naming the 1-based sentence.
        """
        return self.parse_tokens([_tokens(s, i) for i, s in enumerate(_as_list(sentences), start=1)])[0]

    def parse_tokens(
        self, token_lists: Sequence[Sequence[str]], punctuation: bool = True
    ) -> tuple[list[Tree], list[list[int]] | None, list[Structures]]:
        """Trees over tokenised sentences, with the heads and structures of their words.

        Args:
            token_lists: per sentence its tokens.
            punctuation: find punctuation tokens (:func:`is_punctuation`) and keep them from the model;
                False: every token is a word (a treebank's leaves, punctuation already removed).

        Returns:
            ``(trees, heads, structures)``: a tree per sentence over all its tokens, in the field's
            form (a preterminal ``X`` over each token, module docstring); per sentence the
            1-based heads of every token (0 = root; punctuation attached to the root word), or None for
            a model without dependencies; the model's structures over the non-punctuation words.
        """
        words, positions = [], []
        for number, tokens in enumerate(token_lists, start=1):
            kept = [i for i, t in enumerate(tokens) if not (punctuation and is_punctuation(t))]
            if not tokens:
                raise InputError("empty sentence: nothing to parse", sentence=number)
            if not kept:
                raise InputError("nothing to parse: the sentence is only punctuation", sentence=number)
            positions.append(kept)
            words.append([tokens[i] for i in kept])
        structures = self.structures(words)
        trees, heads = [], []
        for tokens, kept, s in zip(token_lists, positions, structures):
            # the words' whole span is the root (punctuation at the edges joins the root)
            spans = {(kept[i], kept[j - 1] + 1) for i, j in s.spans(self.options) if (i, j) != (0, len(kept))}
            trees.append(with_preterminals(spans_to_tree(list(tokens), spans)))
            word_heads = s.heads(self.options)
            heads.append(None if word_heads is None else _token_heads(word_heads, kept, len(tokens)))
        return trees, (None if all(h is None for h in heads) else heads), structures

    def parse_dependencies(self, sentences: Iterable[str | Sequence[str]]) -> list[conllu.TokenList]:
        """Dependency trees (CoNLL-U token lists, ``conllu``) of a model that induces heads.

        Every token is a row (``form`` as in the text, ``lemma`` ``_``); ``head`` is 1-based, 0 = root;
        punctuation tokens attach to the root word with ``deprel`` ``punct``, other rows ``dep``.

        Raises:
            InputError: the model induces no dependency heads (only constituency), or bad sentences.
        """
        token_lists = [_tokens(s, i) for i, s in enumerate(_as_list(sentences), start=1)]
        _, heads, _ = self.parse_tokens(token_lists)
        if heads is None:
            raise InputError(f"{self.name}: this model induces no dependency heads (a StructFormer does)")
        return [
            conllu.TokenList(
                [
                    {
                        "id": i,
                        "form": t,
                        "lemma": "_",
                        "upos": "_",
                        "xpos": "_",
                        "feats": None,
                        "head": h,
                        "deprel": "punct" if is_punctuation(t) else ("root" if h == 0 else "dep"),
                        "deps": None,
                        "misc": None,
                    }
                    for i, (t, h) in enumerate(zip(tokens, head), start=1)
                ]
            )
            for tokens, head in zip(token_lists, heads)
        ]


def _as_list(sentences) -> list:
    if isinstance(sentences, str):
        raise InputError("parse_sents takes a list of sentences; for one string use parse()")
    return list(sentences)


def _token_heads(word_heads: Sequence[int], kept: Sequence[int], n_tokens: int) -> list[int]:
    """Heads over words (1-based, 0 = root) -> heads over tokens; punctuation -> the root word."""
    heads = [0] * n_tokens
    root = None
    for w, h in enumerate(word_heads):
        heads[kept[w]] = 0 if h == 0 else kept[h - 1] + 1
        if h == 0:
            root = kept[w] + 1
    kept_set = set(kept)
    for i in range(n_tokens):
        if i not in kept_set:
            heads[i] = root if root is not None else 0
    return heads


def load_parser(
    model: str | Path | None = None,
    options: DecoderOptions | Mapping | None = None,
    device: str | None = "cpu",
    batch_size: int = 64,
    verbose: bool = False,
) -> Parser:
    """A :class:`Parser` from a model folder, or the parser shipped in the package.

    Args:
        model: a folder written by ``syntaxformer train`` / ``induce`` (``OUT/model``), a shipped
            parser's name (:data:`syntaxformer.pretrained.SHIPPED`), or None = the default shipped parser.
        options: decoder settings: None = the model's saved ones (``decoder.json``, written by
            ``induce``; the shipped parser's report), a dict = choices over them, a full
            :class:`~syntaxformer.structures.DecoderOptions` = exactly these.
        device: "cpu", "cuda", ...; None = CUDA if available.
        batch_size: sentences per forward pass.
        verbose: show the libraries' progress bars and messages while the model loads (default: none;
            :func:`syntaxformer.parsing.library_output`).
    Raises:
        InputError: in one line naming the file: not a model folder, a damaged or foreign model file
            (``config.json``, ``model.safetensors``, the tokenizer; :func:`~syntaxformer.parsing.load_model`),
            a model that induces no structure, no shipped parser, bad decoder settings.
    """
    folder = model_folder(model)
    loaded, tokenizer, _ = load_model(folder, device=device, verbose=verbose)  # a damaged folder: fail first
    decoder = resolve_decoder_options(folder, options)
    parser = Parser(loaded, tokenizer, decoder, name=str(folder), batch_size=batch_size)
    parser.check()  # a model that induces nothing, or settings it does not take: fail now
    return parser


@functools.lru_cache(maxsize=1)
def _shipped_parser() -> Parser:
    return load_parser()


def parse(text: str | Sequence[str]) -> Tree:
    """Parse one sentence with the shipped parser (loaded once per process): ``syntaxformer.parse(text)``.

    Raises:
        InputError: as :meth:`Parser.parse`; no shipped parser in this installation.
    """
    return _shipped_parser().parse(text)


__all__ = ["Parser", "load_parser", "parse", "tokenize", "is_punctuation", "WORD_SYMBOLS"]
