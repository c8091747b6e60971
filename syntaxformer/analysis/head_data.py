"""What the attention-head analysis reads (DESIGN.md §3.5): the text, its word frequencies, gold trees.

- **The text** (:func:`choose_text`): a :func:`~syntaxformer.data.corpus.load_corpus` spec if given,
  else the held-out part of the model's training text (its ``training.json``: the validation corpus,
  else the trainer's seed-0 split), else :data:`FALLBACK_TEXT`; the word frequencies of the rare-word
  role come from the training text when it is readable, else from the analysed text.
- **Gold trees** (:func:`load_dependency_data`): punctuation removed, heads re-attached to their
  nearest non-punctuation ancestor, words normalised as the models see them; relations are the UD
  label before ``:`` (:func:`read_relations`), none for sources without labels (ptb-sample).
- **Encoding** (:func:`encode_counted`): unknown words and words split into pieces are kept and
  counted; sentences longer than the model's positions, or empty, are skipped and counted.

The measures and the report are :mod:`syntaxformer.analysis.heads`'s.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from syntaxformer.data.corpus import held_out_indices, load_corpus
from syntaxformer.data.dependency import read_dependencies
from syntaxformer.data.preprocess import PRPN, Preprocessing, normalise_word
from syntaxformer.data.tokenization import encode
from syntaxformer.errors import InputError
from syntaxformer.evaluation.dependency import reattach_heads

logger = logging.getLogger(__name__)

#: Default text when the model's own held-out text cannot be identified.
FALLBACK_TEXT = "ptb-sample:dev"


# --------------------------------------------------------------------------------------------------
# words and tokens


@dataclass
class EncodedSentences:
    """Sentences encoded for a model, with what happened to their words.

    Attributes:
        words: the kept sentences' words; ids / word_ids: per kept sentence (:func:`encode`).
        kept: 0-based index in the input of each kept sentence.
        n_unknown: words with an ``[UNK]`` piece (kept). n_split_words: words of more than one piece.
        n_too_long: sentences over the model's positions (skipped). n_empty: empty ones (skipped).
    """

    words: list[list[str]] = field(default_factory=list)
    ids: list[list[int]] = field(default_factory=list)
    word_ids: list[list[int | None]] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    n_unknown: int = 0
    n_split_words: int = 0
    n_too_long: int = 0
    n_empty: int = 0

    def stats(self) -> dict:
        """Counts for the report: sentences, words, tokens, unknown and split words, skipped sentences."""
        return dict(
            n_sentences=len(self.ids),
            n_words=sum(map(len, self.words)),
            n_tokens=sum(map(len, self.ids)),
            n_unknown=self.n_unknown,
            n_split_words=self.n_split_words,
            n_skipped_too_long=self.n_too_long,
            n_skipped_empty=self.n_empty,
        )


def encode_counted(tokenizer, sentences: Sequence[Sequence[str]], max_length: int | None = None) -> EncodedSentences:
    """Encode word lists (already normalised), counting unknown and split words.

    Args:
        tokenizer: the model's tokenizer. sentences: lists of words.
        max_length: the model's positions (tokens, specials included); longer sentences are skipped
            and counted (a warning is logged), never cut.
    """
    result = EncodedSentences()
    nonempty = [i for i, s in enumerate(sentences) if len(s)]
    result.n_empty = len(sentences) - len(nonempty)
    ids, word_ids = encode(tokenizer, [list(sentences[i]) for i in nonempty])
    unk = tokenizer.unk_token_id
    for i, tokens, wids in zip(nonempty, ids, word_ids):
        if max_length is not None and len(tokens) > max_length:
            result.n_too_long += 1
            continue
        pieces = Counter(w for w in wids if w is not None)
        result.n_split_words += sum(1 for c in pieces.values() if c > 1)
        result.n_unknown += len({w for t, w in zip(tokens, wids) if w is not None and t == unk})
        result.words.append(list(sentences[i]))
        result.ids.append(list(tokens))
        result.word_ids.append(list(wids))
        result.kept.append(i)
    if result.n_too_long:
        logger.warning("skipped %d sentences longer than the model's %s positions", result.n_too_long, max_length)
    return result


# --------------------------------------------------------------------------------------------------
# texts and gold trees


@dataclass
class TextChoice:
    """The text analysed and the word frequencies of the rare-word role, each with its source."""

    sentences: list[list[str]]
    source: str
    frequencies: Counter
    frequency_source: str


def _training_text(info: dict) -> tuple[list[list[str]], list[list[str]], str] | None:
    """``(training sentences, held-out sentences, description of the held-out part)`` named by a
    ``training.json`` (the trainer's split: its ``valid`` corpus, else the seed-0 permutation's
    ``valid_fraction``), or None when it names no readable corpus."""

    args = info.get("arguments") or {}
    corpus = args.get("corpus")
    if not corpus:
        return None
    try:
        options = Preprocessing(**info["preprocessing"]) if info.get("preprocessing") else PRPN
    except TypeError:
        options = PRPN
    try:
        sentences = load_corpus(corpus, options)
        if args.get("valid"):
            return sentences, load_corpus(args["valid"], options), f"{args['valid']} (the model's validation corpus)"
    except InputError as e:
        logger.warning("the model's training corpus is not readable here (%s)", e)
        return None
    fraction = float(args.get("valid_fraction", 0.05))
    held = held_out_indices(len(sentences), fraction)
    train = [s for i, s in enumerate(sentences) if i not in held]
    return (
        train,
        [s for i, s in enumerate(sentences) if i in held],
        f"held-out {fraction} of {corpus} (the trainer's seed-0 permutation)",
    )


def choose_text(info: dict, text: str | None = None, max_sentences: int | None = None) -> TextChoice:
    """The analysed text: ``text`` (a :func:`~syntaxformer.data.corpus.load_corpus` spec) if given,
    else the held-out part of the model's training text (``training.json``), else
    :data:`FALLBACK_TEXT`; its first ``max_sentences``. Frequencies: the training text if known,
    else the analysed text.

    Raises:
        InputError: an unreadable or empty ``text``.
    """

    training = _training_text(info)
    if text is not None:
        sentences, source = load_corpus(text), text
    elif training is not None and training[1]:
        sentences, source = training[1], training[2]
    else:
        sentences, source = load_corpus(FALLBACK_TEXT), f"{FALLBACK_TEXT} (the model's held-out text is unknown)"
        logger.warning("no held-out text identifiable from training.json: analysing %s", FALLBACK_TEXT)
    sentences = [list(s) for s in sentences[:max_sentences]]
    if not sentences:
        raise InputError("no sentence to analyse", path=text or source)
    if training is not None:
        return TextChoice(
            sentences,
            source,
            Counter(w for s in training[0] for w in s),
            f"training text of {info['arguments']['corpus']} ({len(training[0])} sentences)",
        )
    return TextChoice(
        sentences, source, Counter(w for s in sentences for w in s), "the analysed text (the training text is unknown)"
    )


def read_relations(sentences) -> list[list[str]] | None:
    """The relation of every token of ``sentences`` (:func:`~syntaxformer.data.dependency.read_dependencies`
    output), the UD label before ``:``; None when any sentence has no labels (ptb-sample, ``.dp``)."""
    if any(s.relations is None for s in sentences):
        return None
    return [[r.split(":")[0] for r in s.relations] for s in sentences]


@dataclass
class DependencyData:
    """Gold trees over punctuation-free, normalised words (what the models see).

    Attributes:
        source: as given. words / heads (1-based, re-attached) / relations (or None): per sentence.
        numbers: 1-based number of each sentence in the source. n_punctuation: tokens removed.
        n_empty: sentences with no word left (skipped).
    """

    source: str
    words: list[list[str]]
    heads: list[list[int]]
    relations: list[list[str]] | None
    numbers: list[int]
    n_punctuation: int
    n_empty: int


def load_dependency_data(source: str, max_sentences: int | None = None) -> DependencyData:
    """Read gold trees (``ptb-sample:dev``, a ``.conllu`` file, ...) and remove punctuation.

    Raises:
        InputError: as :func:`~syntaxformer.data.dependency.read_dependencies`; a head chain
            cycling through punctuation (names the source and sentence).
    """

    sentences = read_dependencies(source)
    relations = read_relations(sentences)
    sentences = sentences[:max_sentences]
    data = DependencyData(str(source), [], [], [] if relations is not None else None, [], 0, 0)
    for number, sentence in enumerate(sentences, 1):
        keep = [i for i, p in enumerate(sentence.punct) if not p]
        data.n_punctuation += len(sentence) - len(keep)
        if not keep:
            data.n_empty += 1
            continue
        try:
            heads = reattach_heads(sentence.heads, sentence.punct)
        except InputError as e:
            raise InputError(str(e), path=source, sentence=number) from None
        data.words.append([normalise_word(sentence.words[i]) for i in keep])
        data.heads.append(heads)
        data.numbers.append(number)
        if relations is not None:
            data.relations.append([relations[number - 1][i] for i in keep])
    if not data.words:
        raise InputError("no sentence with a word left after punctuation removal", path=source)
    return data
