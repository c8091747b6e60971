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
import hashlib
import json
import logging
import math
import os
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

import conllu
from nltk import Tree
from nltk.tokenize import NLTKWordTokenizer

from syntaxformer.decoding.ensemble import BASELINE_VOTERS, TIE_RULE, ensemble_spans, head_vote
from syntaxformer.decoding.spans import spans_to_tree, with_preterminals
from syntaxformer.errors import InputError
from syntaxformer.parsing import load_model, model_structures, resolve_decoder_options
from syntaxformer.pretrained import ENSEMBLES, SHIPPED, model_folder
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
    for token in tokens:
        try:
            token.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"not valid Unicode text: {token!r:.40} holds a lone surrogate", sentence=number) from None
    if all(is_punctuation(t) for t in tokens):
        raise InputError(f"nothing to parse in {sentence!r:.60}: the sentence is only punctuation", sentence=number)
    return tokens


def _allow_tree_depth(n: int) -> None:
    """Raise Python's recursion limit (never lower it) so that a tree over ``n`` tokens, as deep as ``n``
    (an ensemble with a right-branching voter gives such trees of long sentences), can be built and read:
    ``nltk.Tree`` walks a tree recursively (``leaves``, ``str``), a few frames per level."""
    needed = 4 * n + 1000
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)


class TreeParser:
    """What every parser offers, over its :meth:`word_parses` (one model: :class:`Parser`; several:
    :class:`EnsembleParser`): tokens in, ``nltk.Tree`` out, punctuation kept from the model and put
    back as leaves (module docstring)."""

    name: str = "<parser>"
    #: the longest sentence in words the parser takes (None: any length); an ensemble's member abstains
    #: on longer ones
    max_words: int | None = None

    def word_parses(self, words: Sequence[Sequence[str]]) -> tuple[list[set], list[list[int] | None], list]:
        """Per sentence of ``words`` (lists of words, no punctuation): its spans (half-open, over words),
        its 1-based word heads (None: no dependencies) and what the model induced (its structures)."""
        raise NotImplementedError

    @property
    def gives_dependencies(self) -> bool:
        """Whether the parser induces dependency heads too (a StructFormer, or an ensemble with one)."""
        return self.check() is not None

    def check(self) -> list[int] | None:
        """Parse a three-word sentence: raises InputError for a parser that induces nothing or settings
        its structures do not take; returns its heads (None: no dependencies)."""
        return self.word_parses([["the", "cat", "sat"]])[1][0]

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
    ) -> tuple[list[Tree], list[list[int]] | None, list]:
        """Trees over tokenised sentences, with the heads and structures of their words.

        Args:
            token_lists: per sentence its tokens.
            punctuation: find punctuation tokens (:func:`is_punctuation`) and keep them from the model;
                False: every token is a word (a treebank's leaves, punctuation already removed).

        Returns:
            ``(trees, heads, structures)``: a tree per sentence over all its tokens, in the field's
            form (a preterminal ``X`` over each token, module docstring); per sentence the
            1-based heads of every token (0 = root; punctuation attached to the root word), or None for
            a parser without dependencies; what the model induced over the non-punctuation words
            (:class:`~syntaxformer.structures.Structures`; an ensemble: per sentence one per member).
        """
        words, positions = _word_lists(token_lists, punctuation)
        _allow_tree_depth(max((len(t) for t in token_lists), default=0))
        spans, word_heads, structures = self.word_parses(words)
        trees, heads = [], []
        for tokens, kept, sentence_spans, sentence_heads in zip(token_lists, positions, spans, word_heads):
            # the words' whole span is the root (punctuation at the edges joins the root)
            token_spans = {(kept[i], kept[j - 1] + 1) for i, j in sentence_spans if (i, j) != (0, len(kept))}
            trees.append(with_preterminals(spans_to_tree(list(tokens), token_spans)))
            heads.append(None if sentence_heads is None else _token_heads(sentence_heads, kept, len(tokens)))
        return trees, (None if all(h is None for h in heads) else heads), structures

    def parse_dependencies(self, sentences: Iterable[str | Sequence[str]]) -> list[conllu.TokenList]:
        """Dependency trees (CoNLL-U token lists, ``conllu``) of a parser that induces heads.

        Every token is a row (``form`` as in the text, ``lemma`` ``_``); ``head`` is 1-based, 0 = root;
        punctuation tokens attach to the root word with ``deprel`` ``punct``, other rows ``dep``.

        Raises:
            InputError: the parser induces no dependency heads (only constituency), or bad sentences.
        """
        token_lists = [_tokens(s, i) for i, s in enumerate(_as_list(sentences), start=1)]
        _, heads, _ = self.parse_tokens(token_lists)
        if heads is None:
            raise InputError(f"{self.name}: this model induces no dependency heads (a StructFormer does)")
        return [_conllu_sentence(tokens, head) for tokens, head in zip(token_lists, heads)]


class Parser(TreeParser):
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
        self.max_words = getattr(model, "max_parse_words", None)  # a PCFG's: its chart's time is cubic

    def __repr__(self) -> str:
        return f"Parser({self.name!r}, {self.options})"

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

    def word_parses(self, words: Sequence[Sequence[str]]) -> tuple[list[set], list[list[int] | None], list[Structures]]:
        """Per sentence its spans and word heads by the decoder settings, and its structures
        (:meth:`TreeParser.word_parses`).

        Raises:
            InputError: a sentence longer than :attr:`max_words` (named, 1-based).
        """
        for i, sentence in enumerate(words, start=1):
            if self.max_words is not None and len(sentence) > self.max_words:
                raise InputError(
                    f"{self.name}: a sentence of {len(sentence)} words; this parser takes at most {self.max_words}",
                    sentence=i,
                )
        structures = self.structures(words)
        return [s.spans(self.options) for s in structures], [s.heads(self.options) for s in structures], structures


class BaselineVoter(TreeParser):
    """A structure-free tree as an ensemble member (``"right-branching"``, ``"left-branching"``:
    :data:`~syntaxformer.decoding.ensemble.BASELINE_VOTERS`): per sentence that tree over its words, no
    heads, no structures. It reads no model; as a member it votes with its weight like a parser.

    Args:
        name: a key of :data:`~syntaxformer.decoding.ensemble.BASELINE_VOTERS`.
    Raises:
        InputError: an unknown name (one line naming the voters there are).
    """

    def __init__(self, name: str):
        if name not in BASELINE_VOTERS:
            raise InputError(f"no baseline voter named {name!r}; voters: {', '.join(BASELINE_VOTERS)}")
        self.name, self.tree = name, BASELINE_VOTERS[name]
        self.options = {"baseline": name}

    def __repr__(self) -> str:
        return f"BaselineVoter({self.name!r})"

    def word_parses(self, words: Sequence[Sequence[str]]) -> tuple[list[set], list[None], list[None]]:
        """Per sentence the baseline tree's spans over its words (the whole sentence included), no heads
        and no structures."""
        return [self.tree(len(w)) for w in words], [None] * len(words), [None] * len(words)


class EnsembleParser(TreeParser):
    """Several parsers (the *members*) as one: per sentence the minimum-Bayes-risk tree of their trees,
    and the vote of their dependency heads (:mod:`syntaxformer.decoding.ensemble`; Shayegh et al.,
    ICLR 2024, §2.2).

    Every member parses the same words (punctuation kept from all of them alike), one member after the
    other, each with its own decoder settings, model and batch size. A member may be a
    :class:`BaselineVoter` (a right- or left-branching tree; its structures are None).

    Args:
        members: the member parsers and baseline voters (at least one).
        weights: per member its vote's weight (None: 1 each).
        name: a name for messages and reports (default: the members' names joined by ``,``).
    Raises:
        InputError: no member, or not one finite non-negative weight per member.
    """

    def __init__(self, members: Sequence[TreeParser], weights: Sequence[float] | None = None, name: str | None = None):
        if not members:
            raise InputError("an ensemble needs at least one member parser")
        weights = [1.0] * len(members) if weights is None else [float(w) for w in weights]
        if len(weights) != len(members) or not all(math.isfinite(w) and w >= 0 for w in weights):
            raise InputError(f"an ensemble of {len(members)} members needs one finite weight >= 0 each, got {weights}")
        self.members, self.weights = list(members), weights
        self.name = name or ",".join(m.name for m in members)
        self.options = EnsembleSettings(tuple(m.name for m in members), tuple(weights))

    def __repr__(self) -> str:
        return f"EnsembleParser({self.name!r}, members={[m.name for m in self.members]}, weights={self.weights})"

    def word_parses(self, words: Sequence[Sequence[str]]) -> tuple[list[set], list[list[int] | None], list]:
        """Per sentence the ensemble's spans and heads, and the members' structures (one per member; None
        where the member abstained). A member abstains on the sentences longer than its
        :attr:`~TreeParser.max_words`: the vote is the other members'.

        Raises:
            InputError: a sentence no member takes (named); a member's parses that do not fit the words.
        """
        parses = [_member_parses(member, words) for member in self.members]
        spans, heads = [], []
        for i, sentence in enumerate(words):
            voters = [(w, p[0][i], p[1][i]) for w, p in zip(self.weights, parses) if p[0][i] is not None]
            if not voters:
                longest = max(m.max_words or 0 for m in self.members)
                raise InputError(
                    f"{self.name}: a sentence of {len(sentence)} words; its members take at most {longest}",
                    sentence=i + 1,
                )
            spans.append(ensemble_spans([s for _, s, _ in voters], len(sentence), [w for w, _, _ in voters]))
            voted = [(w, h) for w, _, h in voters if h is not None]
            heads.append(head_vote([h for _, h in voted], [w for w, _ in voted]) if voted else None)
        return spans, heads, [list(member_structures) for member_structures in zip(*(p[2] for p in parses))]

    @property
    def max_words(self) -> int | None:
        """The longest sentence some member takes (None: any length)."""
        limits = [m.max_words for m in self.members]
        return None if None in limits else max(limits)


def _member_parses(member: TreeParser, words: Sequence[Sequence[str]]) -> tuple[list, list, list]:
    """``member``'s :meth:`~TreeParser.word_parses` of the sentences it takes (:attr:`~TreeParser.max_words`),
    None for the spans, heads and structures of the others (it abstains), checked against the words."""
    taken = [i for i, s in enumerate(words) if member.max_words is None or len(s) <= member.max_words]
    parse = member.word_parses([words[i] for i in taken]) if taken else ([], [], [])
    if len(parse[0]) != len(taken):
        raise InputError(f"ensemble member {member.name}: {len(parse[0])} parses for {len(taken)} sentences")
    spans, heads, structures = [None] * len(words), [None] * len(words), [None] * len(words)
    for k, i in enumerate(taken):
        spans[i], heads[i], structures[i] = parse[0][k], parse[1][k], parse[2][k]
    _check_member(member, (spans, heads, structures), words)
    return spans, heads, structures


def _check_member(member: TreeParser, parse: tuple, words: Sequence[Sequence[str]]) -> None:
    """Raises InputError naming ``member`` when its parses are not one tree (and heads) per sentence over
    that sentence's words (a member that reads other words than it is given); None: it abstained."""
    spans, heads, _ = parse
    for i, (sentence, sentence_spans, sentence_heads) in enumerate(zip(words, spans, heads), start=1):
        if sentence_spans is None:
            continue
        n = len(sentence)
        if any(not 0 <= a < b <= n for a, b in sentence_spans) or (
            sentence_heads is not None and len(sentence_heads) != n
        ):
            raise InputError(f"ensemble member {member.name}: its tree does not cover the sentence's words", sentence=i)


@dataclass(frozen=True)
class EnsembleSettings:
    """How an :class:`EnsembleParser` decides (its ``options``, as a report records them).

    Attributes:
        members: the members' names (their folders; a baseline voter's name, ``right-branching``).
        weights: per member its vote's weight.
        tie_rule: :data:`~syntaxformer.decoding.ensemble.TIE_RULE`.
    """

    members: tuple[str, ...]
    weights: tuple[float, ...]
    tie_rule: str = TIE_RULE

    def to_dict(self) -> dict:
        return {"members": list(self.members), "weights": list(self.weights), "tie_rule": self.tie_rule}


def _word_lists(token_lists: Sequence[Sequence[str]], punctuation: bool) -> tuple[list[list[str]], list[list[int]]]:
    """Per sentence its words (the tokens shown to the model) and their positions among the tokens.

    Raises:
        InputError: an empty sentence or one of only punctuation, naming its 1-based number.
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
    return words, positions


def _conllu_sentence(tokens: Sequence[str], heads: Sequence[int]) -> conllu.TokenList:
    """One sentence's CoNLL-U rows (:meth:`TreeParser.parse_dependencies`)."""
    return conllu.TokenList(
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
            for i, (t, h) in enumerate(zip(tokens, heads), start=1)
        ]
    )


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
    model: str | Path | Sequence[str | Path] | None = None,
    options: DecoderOptions | Mapping | None = None,
    device: str | None = "cpu",
    batch_size: int = 64,
    verbose: bool = False,
    weights: Sequence[float] | None = None,
) -> TreeParser:
    """A :class:`Parser` from a model folder, or the parser shipped in the package; an
    :class:`EnsembleParser` from several.

    Args:
        model: a folder written by ``syntaxformer train`` / ``induce`` (``OUT/model``), a shipped
            parser's name (:data:`syntaxformer.pretrained.SHIPPED`), or None = the default shipped parser.
            Several (an ensemble, each member with its saved decoder settings): a list of them, one
            string of them joined by ``,`` (``"structformer-ptb-lm,on-lstm-ptb-lm"``), a shipped
            ensemble's name (:data:`syntaxformer.pretrained.ENSEMBLES`) or a folder with an
            ``ensemble.json`` (:func:`save_ensemble`). An ensemble's member may be a baseline voter
            (``right-branching``, ``left-branching``: :class:`BaselineVoter`).
        options: decoder settings: None = the model's saved ones (``decoder.json``, written by
            ``induce``; the shipped parser's report), a dict = choices over them, a full
            :class:`~syntaxformer.structures.DecoderOptions` = exactly these. An ensemble takes none
            (each member its own).
        device: "cpu", "cuda", ...; None = CUDA if available.
        batch_size: sentences per forward pass.
        verbose: show the libraries' progress bars and messages while the model loads (default: none;
            :func:`syntaxformer.parsing.library_output`).
        weights: an ensemble's member weights (None: those of its ``ensemble.json``, else 1 each).
    Raises:
        InputError: in one line naming the file: not a model folder, a damaged or foreign model file
            (``config.json``, ``model.safetensors``, the tokenizer; :func:`~syntaxformer.parsing.load_model`),
            a model that induces no structure, no shipped parser, bad decoder settings; for an
            ensemble also a damaged ``ensemble.json``, decoder settings given, bad weights, a member
            that is no folder, shipped parser or baseline voter, and any of these for a member (named).
    """
    members, saved_weights = _ensemble_members(model)
    if members is None:
        if weights is not None:
            raise InputError("member weights are for an ensemble: give several models")
        return _load_one(model_folder(model), options, device, batch_size, verbose)
    if options:
        raise InputError("decoder settings apply to one model: an ensemble's members use their own saved ones")
    parsers = []
    for member in members:
        if _names_a_voter(member):
            parsers.append(BaselineVoter(member))
            continue
        _check_member_name(member)
        folder = model_folder(member)
        try:
            parsers.append(_load_one(folder, None, device, batch_size, verbose))
        except InputError as e:
            where = "" if e.path in (None, str(folder)) else f" ({e.path}{'' if e.line is None else f':{e.line}'})"
            raise InputError(f"ensemble member {member}: {e.message}{where}") from None
    name = str(model) if isinstance(model, (str, Path)) else None
    return EnsembleParser(parsers, weights if weights is not None else saved_weights, name=name)


def _names_a_voter(model: str | Path) -> bool:
    """Whether ``model`` is a baseline voter's name (not a folder of that name)."""
    return str(model) in BASELINE_VOTERS and not Path(model).exists()


def _check_member_name(member: str) -> None:
    """Raises InputError for a member given as a bare name (no folder separator) that is no existing
    folder, shipped parser or baseline voter: a misspelt name, said in one line."""
    if Path(member).exists() or member in SHIPPED or member in ENSEMBLES or "/" in member or "\\" in member:
        return
    raise InputError(
        f"ensemble member {member}: not a model folder, shipped parser ({', '.join(SHIPPED)}) or baseline voter "
        f"({', '.join(BASELINE_VOTERS)})"
    )


def _load_one(folder: Path, options, device, batch_size: int, verbose: bool) -> Parser:
    loaded, tokenizer, _ = load_model(folder, device=device, verbose=verbose)  # a damaged folder: fail first
    decoder = resolve_decoder_options(folder, options)
    parser = Parser(loaded, tokenizer, decoder, name=str(folder), batch_size=batch_size)
    parser.check()  # a model that induces nothing, or settings it does not take: fail now
    return parser


#: The file that makes a folder an ensemble (:func:`save_ensemble`).
ENSEMBLE_FILE = "ensemble.json"


def _ensemble_members(model) -> tuple[list[str] | None, list[float] | None]:
    """The members (and saved weights) ``model`` names, or ``(None, None)`` for one model."""
    if model is None:
        return None, None
    if not isinstance(model, (str, Path)):
        members = [str(m) for m in model]
        return (members, None) if members else _no_members()
    if isinstance(model, str) and "," in model and not Path(model).exists():
        members = [m.strip() for m in model.split(",") if m.strip()]
        return (members, None) if members else _no_members()
    folder = model_folder(model)
    if (folder / ENSEMBLE_FILE).is_file():
        return read_ensemble(folder)
    return None, None


def names_an_ensemble(model: str | Path | Sequence[str | Path] | None) -> bool:
    """Whether ``model``, as :func:`load_parser` takes it, names several parsers (a list, names joined by
    ``,``, a shipped ensemble or a folder with an ``ensemble.json``).

    Raises:
        InputError: a name that is neither a folder nor a shipped parser, or a damaged ``ensemble.json``.
    """
    return _ensemble_members(model)[0] is not None


def parser_fingerprint(model: str | Path) -> str:
    """A short hash (16 hex digits) of what ``model``, as :func:`load_parser` takes it, stands for: a
    model folder's weights, config and decoder settings; an ensemble's members (each's fingerprint) and
    weights; a baseline voter's name. Results cached under a parser's name are keyed by it, so that a
    shipped parser retrained or an ensemble re-weighted under the same name is not read from a cache.

    Raises:
        InputError: as :func:`names_an_ensemble`.
    """
    members, weights = _ensemble_members(model)
    if members is not None:
        text = json.dumps([weights, [parser_fingerprint(m) for m in members]])
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
    if _names_a_voter(model):
        return hashlib.sha1(str(model).encode("utf-8")).hexdigest()[:16]
    folder = Path(model_folder(model)).resolve()
    stamps = tuple((name, stat.st_size, stat.st_mtime_ns) for name, stat in _file_stats(folder, FINGERPRINTED_FILES))
    return _folder_fingerprint(str(folder), stamps)


def _file_stats(folder: Path, names: Sequence[str]) -> list[tuple[str, os.stat_result]]:
    """``(name, stat)`` of each of ``names`` that is a file in ``folder`` (one ``stat`` call each)."""
    found = []
    for name in names:
        try:
            stat = (folder / name).stat()
        except FileNotFoundError:
            continue
        if S_ISREG(stat.st_mode):
            found.append((name, stat))
    return found


#: the files of a model folder whose bytes make its fingerprint
FINGERPRINTED_FILES = ("model.safetensors", "config.json", "decoder.json")


@functools.lru_cache(maxsize=64)
def _folder_fingerprint(folder: str, stamps: tuple[tuple[str, int, int], ...]) -> str:
    """The hash of a model folder's fingerprinted files (their names and bytes), read once per state of
    the files: ``stamps`` (name, size, modification time) is part of the cache key, so a rewritten file
    is read again."""
    digest = hashlib.sha1()
    for name, _, _ in stamps:
        digest.update(name.encode("utf-8") + (Path(folder) / name).read_bytes())
    return digest.hexdigest()[:16]


def _no_members():
    raise InputError("an ensemble needs at least one member: give model folders or shipped names")


def read_ensemble(folder: str | Path) -> tuple[list[str], list[float]]:
    """An ensemble folder's members and weights (its ``ensemble.json``: ``{"members": [...],
    "weights": [...]}``; a member is a shipped name, a baseline voter's name (``right-branching``,
    ``left-branching``: :class:`BaselineVoter`) or a folder relative to the ensemble folder).

    Raises:
        InputError: naming the file: not JSON, no member list of strings, not one number per member, a
            member that is none of those (a bare name that is no folder there).
    """
    path = Path(folder) / ENSEMBLE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"unreadable ensemble file: {e}", path=path) from None
    members = data.get("members") if isinstance(data, dict) else None
    if not isinstance(members, list) or not members or not all(isinstance(m, str) and m for m in members):
        raise InputError('"members" must be a non-empty list of model folders or shipped names', path=path)
    weights = data.get("weights", [1.0] * len(members))
    if (
        not isinstance(weights, list)
        or len(weights) != len(members)
        or not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights)
    ):
        raise InputError(f'"weights" must be one number per member ({len(members)})', path=path)
    for m in members:
        bare = "/" not in m and "\\" not in m
        if bare and m not in SHIPPED and m not in BASELINE_VOTERS and not (Path(folder) / m).exists():
            raise InputError(
                f"member {m!r} is no folder there, shipped parser ({', '.join(SHIPPED)}) or baseline voter "
                f"({', '.join(BASELINE_VOTERS)})",
                path=path,
            )
    named = (*SHIPPED, *BASELINE_VOTERS)
    resolved = [m if m in named or Path(m).is_absolute() else str(Path(folder) / m) for m in members]
    return resolved, [float(w) for w in weights]


def save_ensemble(
    folder: str | Path, members: Sequence[str | Path], weights: Sequence[float] | None = None, note: str = ""
) -> Path:
    """Write an ensemble folder: ``ensemble.json`` naming its members (shipped names, baseline voters'
    names or model folders, as given: a relative folder is read relative to the ensemble folder) and
    their weights; no weights of the models are copied. ``load_parser(folder)`` then loads the ensemble.

    Returns:
        The file written.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights = [1.0] * len(members) if weights is None else [float(w) for w in weights]
    record = {"members": [str(m) for m in members], "weights": weights, "tie_rule": TIE_RULE, "note": note}
    (folder / ENSEMBLE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return folder / ENSEMBLE_FILE


@functools.lru_cache(maxsize=1)
def _shipped_parser() -> Parser:
    return load_parser()


def parse(text: str | Sequence[str]) -> Tree:
    """Parse one sentence with the shipped parser (loaded once per process): ``syntaxformer.parse(text)``.

    Raises:
        InputError: as :meth:`Parser.parse`; no shipped parser in this installation.
    """
    return _shipped_parser().parse(text)


__all__ = [
    "TreeParser",
    "EnsembleParser",
    "EnsembleSettings",
    "BaselineVoter",
    "read_ensemble",
    "save_ensemble",
    "ENSEMBLE_FILE",
    "Parser",
    "load_parser",
    "names_an_ensemble",
    "parser_fingerprint",
    "parse",
    "tokenize",
    "is_punctuation",
    "WORD_SYMBOLS",
]
