"""Dependency readers and writer: CoNLL-U (with the ``conllu`` library) and the ptb-sample ``.dp`` format.

Every reader returns :class:`DependencySentence` objects: words, tags, 1-based heads (0 = root) and
which tokens are punctuation (not scored by UAS/UUAS, DESIGN.md §4).

Punctuation rule:

* CoNLL-U: a token is punctuation iff its UPOS is ``PUNCT``. ``SYM`` (``$``, ``%``, ``+`` ...) is
  scored, as UD treats symbols as words; this follows the usual UD evaluation of unsupervised
  dependency parsers, which removes UPOS ``PUNCT`` only.
* ``.dp`` (Penn Treebank tags): a token is punctuation iff its tag is not one of the 36 word tags
  :data:`~syntaxformer.data.preprocess.WORD_TAGS` — the same filter as the constituency
  preprocessing, so the scored tokens of ptb-sample are exactly the words of the preprocessed
  gold trees (``$`` and ``#`` are therefore not scored in ptb-sample).
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from conllu.exceptions import ParseException
from conllu.parser import parse_token_and_metadata

from syntaxformer.data.embedded import ptb_sample_part, read_ptb_sample
from syntaxformer.data.preprocess import WORD_TAGS
from syntaxformer.data.treebank import read_text_file, resolve_files
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

#: The 17 Universal Dependencies UPOS tags.
UPOS_TAGS = frozenset("ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split())

#: Penn Treebank tag -> UPOS, used only by :func:`write_conllu` to fill the UPOS column when a
#: sentence carries PTB tags (the usual coarse mapping; the PTB tag itself goes to XPOS).
PTB_TO_UPOS = {
    "CC": "CCONJ",
    "CD": "NUM",
    "DT": "DET",
    "EX": "PRON",
    "FW": "X",
    "IN": "ADP",
    "JJ": "ADJ",
    "JJR": "ADJ",
    "JJS": "ADJ",
    "LS": "X",
    "MD": "AUX",
    "NN": "NOUN",
    "NNS": "NOUN",
    "NNP": "PROPN",
    "NNPS": "PROPN",
    "PDT": "DET",
    "POS": "PART",
    "PRP": "PRON",
    "PRP$": "PRON",
    "RB": "ADV",
    "RBR": "ADV",
    "RBS": "ADV",
    "RP": "ADP",
    "SYM": "SYM",
    "TO": "PART",
    "UH": "INTJ",
    "VB": "VERB",
    "VBD": "VERB",
    "VBG": "VERB",
    "VBN": "VERB",
    "VBP": "VERB",
    "VBZ": "VERB",
    "WDT": "DET",
    "WP": "PRON",
    "WP$": "PRON",
    "WRB": "ADV",
}


@dataclass(frozen=True)
class DependencySentence:
    """One sentence's gold (or predicted) dependency tree.

    Attributes:
        words: the tokens' word forms, as in the file (not normalised).
        tags: UPOS for CoNLL-U input, the Penn Treebank tag for ``.dp`` input.
        heads: one per token, 1-based index of the head token, 0 = root.
        punct: one per token, True for punctuation (not scored; rule in the module docstring).
        relations: one dependency relation (DEPREL) per token for CoNLL-U input, as in the file
            (subtypes kept, e.g. ``nmod:poss``); None for ``.dp`` input, which has no labels.
    """

    words: tuple[str, ...]
    tags: tuple[str, ...]
    heads: tuple[int, ...]
    punct: tuple[bool, ...]
    relations: tuple[str, ...] | None = None

    def __post_init__(self):
        n = len(self.words)
        assert len(self.tags) == n and len(self.heads) == n and len(self.punct) == n, (
            "words, tags, heads and punct must have one entry per token"
        )
        assert self.relations is None or len(self.relations) == n, "one relation per token"

    def __len__(self) -> int:
        return len(self.words)


def _raw(fields: list[str], index: int) -> str:
    return fields[index]


#: conllu's parsers for the columns we use (ID, HEAD: integers, ranges, decimals); the columns we do
#: not use (LEMMA, FEATS, DEPS, MISC ...) are kept as raw strings, which makes reading ~2x faster.
_FIELD_PARSERS = {"lemma": _raw, "xpos": _raw, "feats": _raw, "deprel": _raw, "deps": _raw, "misc": _raw}


def _blocks(text: str):
    """Yield ``(lines, line_numbers)`` for each blank-line-separated block (1-based line numbers)."""
    lines: list[str] = []
    numbers: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            lines.append(line.rstrip("\r\n"))
            numbers.append(number)
        elif lines:
            yield lines, numbers
            lines, numbers = [], []
    if lines:
        yield lines, numbers


def _check_heads(heads: list[int], path: str, numbers: list[int]) -> None:
    n = len(heads)
    for head, number in zip(heads, numbers):
        if not 0 <= head <= n:
            raise InputError(f"head {head} out of range (sentence has {n} tokens)", path=path, line=number)


def parse_conllu(text: str, path: str = "<string>") -> list[DependencySentence]:
    """Parse CoNLL-U text (see :func:`read_conllu`); ``path`` names it in errors."""
    sentences = []
    for lines, numbers in _blocks(text):
        token_lines = [(line, number) for line, number in zip(lines, numbers) if not line.startswith("#")]
        if not token_lines:
            continue  # comments only (e.g. a file header): not a sentence
        for line, number in token_lines:
            fields = line.split("\t")
            if len(fields) != 10:
                raise InputError(
                    f"expected 10 tab-separated CoNLL-U fields, found {len(fields)}", path=path, line=number
                )
        try:
            tokens = parse_token_and_metadata("\n".join(line for line, _ in token_lines), field_parsers=_FIELD_PARSERS)
        except ParseException:
            for line, number in token_lines:  # find the offending line
                try:
                    parse_token_and_metadata(line, field_parsers=_FIELD_PARSERS)
                except ParseException as e:
                    raise InputError(f"malformed CoNLL-U token: {e}", path=path, line=number) from None
            raise
        words, tags, heads, relations, kept = [], [], [], [], []
        for token, (_, number) in zip(tokens, token_lines):
            if not isinstance(token["id"], int):
                continue  # a multiword-token range (1-2) or an empty node (3.1): not a token
            if token["id"] != len(words) + 1:
                raise InputError(
                    f"token id {token['id']} out of sequence (expected {len(words) + 1})", path=path, line=number
                )
            if not isinstance(token["head"], int):
                raise InputError(f"head {token['head']!r} is not an integer", path=path, line=number)
            words.append(token["form"])
            tags.append(token["upos"])
            heads.append(token["head"])
            relations.append(token["deprel"] or "_")
            kept.append(number)
        if not words:
            raise InputError("sentence has no tokens", path=path, line=numbers[0])
        _check_heads(heads, path, kept)
        sentences.append(
            DependencySentence(
                tuple(words), tuple(tags), tuple(heads), tuple(tag == "PUNCT" for tag in tags), tuple(relations)
            )
        )
    if not sentences:
        raise InputError("no sentences found", path=path)
    return sentences


def read_conllu(path: str | os.PathLike) -> list[DependencySentence]:
    """Read a CoNLL-U file (basic dependencies: columns ID, FORM, UPOS, HEAD are used).

    Multiword-token ranges (``1-2``) and empty nodes (``3.1``) are not tokens and are skipped;
    comment lines are ignored. Punctuation = UPOS ``PUNCT``.

    Raises:
        InputError: missing/unreadable file, no sentence, a line without 10 fields, a non-integer
            head, a head out of range ``0..n``, token ids out of sequence, a sentence with no
            token — naming the file and the 1-based line.
    """
    return parse_conllu(read_text_file(_existing(path)), str(path))


def parse_ptb_dependency(text: str, path: str = "<string>") -> list[DependencySentence]:
    """Parse ``word TAB tag TAB head`` text (see :func:`read_ptb_dependency`)."""
    sentences = []
    for lines, numbers in _blocks(text):
        words, tags, heads = [], [], []
        for line, number in zip(lines, numbers):
            fields = line.split("\t")
            if len(fields) != 3:
                raise InputError(
                    f"expected 'word TAB tag TAB head', found {len(fields)} tab-separated field(s)",
                    path=path,
                    line=number,
                )
            word, tag, head = fields
            try:
                heads.append(int(head))
            except ValueError:
                raise InputError(f"head {head!r} is not an integer", path=path, line=number) from None
            words.append(word)
            tags.append(tag)
        _check_heads(heads, path, numbers)
        sentences.append(
            DependencySentence(tuple(words), tuple(tags), tuple(heads), tuple(tag not in WORD_TAGS for tag in tags))
        )
    if not sentences:
        raise InputError("no sentences found", path=path)
    return sentences


def read_ptb_dependency(path: str | os.PathLike) -> list[DependencySentence]:
    """Read a ptb-sample dependency file: one ``word TAB tag TAB head`` line per token.

    Heads are 1-based, 0 = root; sentences are separated by one or more blank lines. Punctuation =
    Penn Treebank tag not in :data:`~syntaxformer.data.preprocess.WORD_TAGS`.

    Raises:
        InputError: missing/unreadable file, no sentence, a line without 3 fields, a non-integer
            head, a head out of range — naming the file and the 1-based line.
    """
    return parse_ptb_dependency(read_text_file(_existing(path)), str(path))


def _existing(path: str | os.PathLike) -> Path:
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", path=os.fspath(path))
    return p


def _sniff(lines: Iterable[str]) -> str:
    """``"conllu"`` or ``"dp"`` from the first token line (10 or 3 tab-separated fields)."""
    for line in lines:
        if line.strip() and not line.startswith("#"):
            return "conllu" if len(line.rstrip("\r\n").split("\t")) == 10 else "dp"
    return "dp"


#: The format a file's suffix names; a file with another suffix is sniffed (:func:`_sniff`).
_FORMAT_OF_SUFFIX = {".conllu": "conllu", ".conll": "conllu", ".dp": "dp"}


def is_conllu_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a CoNLL-U file: a ``.conllu`` / ``.conll`` suffix, else (an existing file
    with another suffix than ``.dp``) a first token line of 10 tab-separated fields, the guess
    :func:`read_dependencies` makes. False for a missing path, a folder or a corpus name without
    such a suffix."""
    path = Path(path)
    if path.is_dir():
        return False
    kind = _FORMAT_OF_SUFFIX.get(path.suffix.lower())
    if kind is None and path.is_file():
        with path.open(encoding="utf-8", errors="replace") as lines:
            kind = _sniff(lines)
    return kind == "conllu"


def _read_any(path: Path) -> list[DependencySentence]:
    text = read_text_file(path)
    kind = _FORMAT_OF_SUFFIX.get(path.suffix.lower()) or _sniff(text.splitlines())
    return parse_conllu(text, str(path)) if kind == "conllu" else parse_ptb_dependency(text, str(path))


def read_dependencies(source: str | os.PathLike) -> list[DependencySentence]:
    """Read dependency trees from any accepted source.

    Args:
        source: ``"ptb-sample"`` (the embedded ``.dp`` files, 3,914 sentences; ``"ptb-sample:dev"`` /
            ``"ptb-sample:test"`` for its halves); a ``.conllu`` /
            ``.conll`` file (CoNLL-U); a ``.dp`` file; a file with another extension (format
            guessed from its first token line: 10 tab-separated fields = CoNLL-U, else ``.dp``);
            a folder (its ``*.conllu`` files, else its ``*.dp`` files, else all its regular files,
            sorted by name); or a glob pattern.

    Raises:
        InputError: as :func:`read_conllu` / :func:`read_ptb_dependency`, or a missing path / a glob
            matching nothing.
    """
    part = ptb_sample_part(os.fspath(source))
    if part is not None:
        return read_ptb_sample("dependency", part, parse_ptb_dependency)
    path = Path(source)
    if path.is_dir() and not any(path.glob("*.conllu")):
        files = resolve_files(source, "*.dp", "dependency")
    else:
        files = resolve_files(source, "*.conllu", "dependency")
    sentences = []
    for file in files:
        sentences.extend(_read_any(file))
    return sentences


def write_conllu(
    sentences: Iterable[DependencySentence],
    path_or_file: str | os.PathLike | TextIO,
    sent_ids: Iterable[int | str] | None = None,
) -> None:
    """Write sentences as valid CoNLL-U, readable by ``conllu`` and by :func:`read_conllu`.

    Columns: ID, FORM, LEMMA ``_``, UPOS, XPOS, FEATS ``_``, HEAD, DEPREL (the sentence's relations
    when it has them, else ``root`` for head 0 and ``dep`` otherwise), DEPS ``_``, MISC ``_``; each
    sentence starts with ``# sent_id = k`` and ``# text = ...``. UPOS is ``PUNCT`` for punctuation
    tokens, the tag itself when it is a UPOS tag, else the tag's :data:`PTB_TO_UPOS` mapping (``X`` if
    unknown); XPOS holds a non-UPOS tag. Reading the file back gives the same words, heads and
    punctuation flags (and the tags when they are UPOS).

    Args:
        sentences: the sentences to write.
        path_or_file: a path (written as UTF-8) or an open text file.
        sent_ids: per sentence its ``sent_id`` (e.g. the input line it was parsed from); None = 1, 2, ...
    """
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "w", encoding="utf-8") as handle:
            write_conllu(sentences, handle, sent_ids)
        return
    out = path_or_file
    sentences = list(sentences)
    ids = range(1, len(sentences) + 1) if sent_ids is None else list(sent_ids)
    for number, sentence in zip(ids, sentences, strict=True):
        out.write(f"# sent_id = {number}\n# text = {' '.join(sentence.words)}\n")
        relations = sentence.relations or tuple("root" if h == 0 else "dep" for h in sentence.heads)
        for i, (word, tag, head, punct, relation) in enumerate(
            zip(sentence.words, sentence.tags, sentence.heads, sentence.punct, relations), start=1
        ):
            if punct:
                upos = "PUNCT"
            elif tag in UPOS_TAGS and tag != "PUNCT":
                upos = tag
            else:
                upos = PTB_TO_UPOS.get(tag, "X")
            xpos = "_" if tag in UPOS_TAGS or not tag else tag
            form = word.replace("\t", " ") or "_"
            out.write(f"{i}\t{form}\t_\t{upos}\t{xpos}\t_\t{head}\t{relation}\t_\t_\n")
        out.write("\n")


def conllu_string(sentences: Iterable[DependencySentence], sent_ids: Iterable[int | str] | None = None) -> str:
    """:func:`write_conllu` to a string."""
    buffer = io.StringIO()
    write_conllu(sentences, buffer, sent_ids)
    return buffer.getvalue()
