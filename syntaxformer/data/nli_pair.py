"""One labelled sentence pair of natural-language inference and what every NLI reader shares: the
labels, the sentence tokeniser, the TSV row reader (:mod:`syntaxformer.data.nli` loads whole datasets;
:mod:`~syntaxformer.data.sick`, :mod:`~syntaxformer.data.pairs` read one format each)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from syntaxformer.errors import InputError

#: class names in class-id order (SICK's ``entailment_label`` and SNLI's ``gold_label``, lower-cased)
LABELS = ("entailment", "neutral", "contradiction")


#: the label of pairs that have none (SNLI: no majority among the annotators): skipped and counted
NO_LABEL = "-"


_TOKEN = re.compile(r"\w+(?=n't\b)|n't\b|'\w+|\w+|[^\w\s]")


def tokenize_sentence(text: str) -> tuple[str, ...]:
    """Lower-cased words of a sentence: word characters, ``n't`` and ``'s``-style clitics split off,
    every other non-space character a word of its own (``"A man's dog isn't black."`` ->
    ``a man 's dog is n't black .``)."""
    return tuple(_TOKEN.findall(text.lower()))


def label_id(text: str) -> int | None:
    """The class id of a label (case-insensitive, surrounding space ignored); None for unknown ones."""
    text = text.strip().lower()
    return LABELS.index(text) if text in LABELS else None


@dataclass(frozen=True)
class NliPair:
    """One labelled sentence pair.

    Attributes:
        premise, hypothesis: tokenised words (:func:`tokenize_sentence`), never empty.
        label: class id into :data:`LABELS`.
        pair_id: the dataset's id when it has one (SICK's ``pair_ID``), else the 1-based line.
    """

    premise: tuple[str, ...]
    hypothesis: tuple[str, ...]
    label: int
    pair_id: str = ""


def tsv_rows(lines: list[str], path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and the rows of tab-separated text (``lines`` without their newlines; ``\r`` and
    blank lines ignored): ``(header fields, [(1-based line number, fields)])``.

    Raises:
        InputError: a row with another number of fields than the header (naming ``path`` and line).
    """
    header = lines[0].rstrip("\r").split("\t")
    rows = []
    for number, raw in enumerate(lines[1:], 2):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise InputError(
                f"{len(fields)} tab-separated fields, the header has {len(header)}", path=path, line=number
            )
        rows.append((number, fields))
    return header, rows


def make_pair(premise: str, hypothesis: str, label: str, pair_id: str, path, line: int) -> NliPair | None:
    """An :class:`NliPair` from raw fields; None when the label is :data:`NO_LABEL` (to be counted).

    Raises:
        InputError: an unknown label or an empty sentence, naming ``path`` and ``line``.
    """
    if label.strip() == NO_LABEL:
        return None
    cls = label_id(label)
    if cls is None:
        raise InputError(
            f"unknown label {label.strip()!r}; expected one of {', '.join(LABELS)} (or - to skip)", path=path, line=line
        )
    words = []
    for name, text in (("premise", premise), ("hypothesis", hypothesis)):
        tokens = tokenize_sentence(text)
        if not tokens:
            raise InputError(f"empty {name}", path=path, line=line)
        words.append(tokens)
    return NliPair(words[0], words[1], cls, pair_id)
