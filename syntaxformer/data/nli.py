"""Natural-language inference data: sentence pairs with a 3-way label, and the one entry point
:func:`load_nli` that picks the reader by the file's first line (DESIGN.md §6).

Readers, one per format:

* :mod:`~syntaxformer.data.sick` -- SICK (Marelli et al., LREC 2014), tab-separated with its header
  (``pair_ID sentence_A sentence_B entailment_label ... SemEval_set``); its official split
  TRAIN / TRIAL / TEST is the ``SemEval_set`` column.
* :mod:`~syntaxformer.data.pairs` -- generic JSON lines or TSV with a header, fields
  ``premise`` / ``hypothesis`` / ``label`` or SNLI's ``sentence1`` / ``sentence2`` / ``gold_label``.

Labels are class ids into :data:`LABELS`. Sentences are tokenised by :func:`tokenize_sentence`
(lower-cased; punctuation and clitics split off, Penn Treebank style). Pairs whose label is ``-``
(SNLI: no annotator majority) are skipped and counted (:attr:`NliData.skipped`), never dropped
silently; any other malformed line is an :class:`~syntaxformer.errors.InputError` naming the file and
line.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import torch

from syntaxformer.data.corpus import held_out_indices
from syntaxformer.data.nli_pair import LABELS, NO_LABEL, NliPair, label_id, make_pair, tokenize_sentence, tsv_rows  # noqa: F401  (re-exported: the NLI labels and the pair type)
from syntaxformer.data.pairs import read_pairs
from syntaxformer.data.sick import is_sick_header, read_sick
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)


#: ``--corpus sick``: where SICK is looked for, relative to the working directory, then to the
#: repository that holds this package (``../shared/data`` beside the project root)
SICK_RELATIVE = Path("..", "shared", "data", "sick", "SICK.txt")


@dataclass
class NliData:
    """The splits of an inference data set.

    Attributes:
        source: what was read (``"sick"`` or paths), in words.
        format: ``"sick"``, ``"jsonl"`` or ``"tsv"``.
        train, valid, test: the pairs of each split (``test`` may be empty: nothing to report on).
        valid_desc, test_desc: where the selection and report pairs come from, in words.
        skipped: pairs skipped per split because their label is ``-``.
    """

    source: str
    format: str
    train: list[NliPair]
    valid: list[NliPair]
    test: list[NliPair]
    valid_desc: str = ""
    test_desc: str = ""
    skipped: dict[str, int] = field(default_factory=dict)

    def record(self) -> dict:
        """What a report says about the data: source, format, pairs and label counts per split."""
        splits = {
            name: dict(
                pairs=len(pairs), labels={LABELS[c]: sum(p.label == c for p in pairs) for c in range(len(LABELS))}
            )
            for name, pairs in (("train", self.train), ("valid", self.valid), ("test", self.test))
        }
        return dict(
            source=self.source,
            format=self.format,
            valid=self.valid_desc,
            test=self.test_desc,
            splits=splits,
            skipped_no_label=dict(self.skipped),
        )


def sick_path() -> Path:
    """The SICK file ``--corpus sick`` names: ``../shared/data/sick/SICK.txt`` from the working
    directory, else beside the repository holding this package.

    Raises:
        InputError: neither exists.
    """
    candidates = [SICK_RELATIVE, Path(__file__).resolve().parents[2] / SICK_RELATIVE]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise InputError(f"SICK not found at {candidates[0]} (nor {candidates[1]}); pass --corpus PATH to SICK.txt")


def detect_format(path: Path) -> str:
    """``"sick"`` (SICK's header), ``"jsonl"`` (first non-blank character ``{``) or ``"tsv"``.

    Raises:
        InputError: a missing or unreadable file, or an empty one.
    """
    if not path.is_file():
        raise InputError("no such file", path=path)
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=path) from None
    if not first.strip():
        raise InputError("empty first line: expected a header (TSV, SICK) or a JSON object", path=path, line=1)
    if is_sick_header(first):
        return "sick"
    return "jsonl" if first.lstrip().startswith("{") else "tsv"


def read_nli_file(path: str | Path) -> tuple[str, list[tuple[NliPair, str | None]], int]:
    """Every pair of a file by its format (:func:`detect_format`).

    Returns:
        ``(format, [(pair, split or None)], pairs skipped for the label "-")``; the split is SICK's
        ``SemEval_set`` (``"train"``, ``"valid"`` for TRIAL, ``"test"``), None for the generic formats.
    Raises:
        InputError: as the readers.
    """
    path = Path(path)
    fmt = detect_format(path)
    if fmt == "sick":
        pairs = read_sick(path)
        return fmt, pairs, 0
    pairs, skipped = read_pairs(path, fmt)
    return fmt, [(p, None) for p in pairs], skipped


def load_nli(data: str, valid: str | None = None, test: str | None = None, valid_fraction: float = 0.05) -> NliData:
    """The training, selection and report pairs ``data`` names.

    Args:
        data: ``"sick"`` (:func:`sick_path`), or a file: in SICK's format (recognised by its header:
            its official split, TRAIN / TRIAL / TEST), JSON lines or TSV (:mod:`syntaxformer.data.pairs`;
            all its pairs are training pairs).
        valid: generic formats: the selection pairs' file; None holds out ``valid_fraction`` of the
            training pairs (the first of a seed-0 permutation, the same for every ``--seed``).
        test: generic formats: the report pairs' file (None: no report split).
        valid_fraction: see ``valid``.
    Raises:
        InputError: a malformed file (naming file and line), ``valid``/``test`` given with SICK (its
            split is fixed), or an empty split to train or select on.
    """
    path = sick_path() if data == "sick" else Path(data)
    fmt, pairs, skipped = read_nli_file(path)
    if fmt == "sick":
        if valid is not None or test is not None:
            raise InputError("--valid / --test: SICK has its official split (TRAIN / TRIAL / TEST)", path=path)
        by_split = {s: [p for p, split in pairs if split == s] for s in ("train", "valid", "test")}
        result = NliData(
            str(path),
            fmt,
            by_split["train"],
            by_split["valid"],
            by_split["test"],
            "SICK TRIAL (official split)",
            "SICK TEST (official split)",
            dict(train=0, valid=0, test=0),
        )
    else:
        result = _generic_splits(path, fmt, [p for p, _ in pairs], skipped, valid, test, valid_fraction)
    if not result.train or not result.valid:
        raise InputError(f"no {'training' if not result.train else 'selection'} pair left", path=path)
    logger.info(
        "%s (%s): %d training, %d selection, %d report pairs; skipped (label -): %s",
        path,
        fmt,
        len(result.train),
        len(result.valid),
        len(result.test),
        result.skipped,
    )
    return result


def _generic_splits(
    path: Path, fmt: str, pairs: list[NliPair], skipped: int, valid: str | None, test: str | None, valid_fraction: float
) -> NliData:
    counts = dict(train=skipped)
    if valid is not None:
        _, valid_pairs, counts["valid"] = read_nli_file(valid)
        valid_pairs = [p for p, _ in valid_pairs]
        train_pairs, valid_desc = pairs, str(valid)
    else:
        held = held_out_indices(len(pairs), valid_fraction)
        train_pairs = [p for i, p in enumerate(pairs) if i not in held]
        valid_pairs = [p for i, p in enumerate(pairs) if i in held]
        valid_desc = f"{valid_fraction} of {path} (seed-0 permutation)"
    test_pairs: list[NliPair] = []
    if test is not None:
        _, test_pairs, counts["test"] = read_nli_file(test)
        test_pairs = [p for p, _ in test_pairs]
    return NliData(
        str(path),
        fmt,
        train_pairs,
        valid_pairs,
        test_pairs,
        valid_desc,
        str(test) if test is not None else "none",
        counts,
    )


def load_nli_split(data: str, split: str) -> tuple[list[NliPair], dict]:
    """The pairs of one split for evaluation: SICK's ``train`` / ``trial`` / ``test``, or every pair of
    a generic file (``split="all"``).

    Returns:
        ``(pairs, description)`` where the description names the file, format, split and skipped pairs.
    Raises:
        InputError: a malformed file, or a split the file does not have.
    """
    path = sick_path() if data == "sick" else Path(data)
    fmt, pairs, skipped = read_nli_file(path)
    if fmt == "sick":
        names = {"train": "train", "trial": "valid", "test": "test"}
        if split not in names:
            raise InputError(f"--split {split}: SICK's splits are train, trial, test", path=path)
        chosen = [p for p, s in pairs if s == names[split]]
        name = f"SICK {split.upper()} (official split)"
    else:
        if split != "all":
            raise InputError(f"--split {split}: a {fmt} file has no split; use --split all", path=path)
        chosen, name = [p for p, _ in pairs], "all pairs"
    return chosen, dict(source=str(path), format=fmt, split=name, pairs=len(chosen), skipped_no_label=skipped)


# ----------------------------------------------------------------------------------------------
# model inputs


def char_ngrams(word: str, sizes) -> list[str]:
    """The character n-grams of ``<word>`` for every n in ``sizes`` (a marked word shorter than n
    gives itself once for that n): ``char_ngrams("dog", [3]) == ["<do", "dog", "og>"]``."""
    marked = f"<{word}>"
    grams = []
    for n in sizes:
        grams += [marked[i : i + n] for i in range(max(1, len(marked) - n + 1))]
    return grams


def char_ngram_ids(word: str, sizes, buckets: int) -> list[int]:
    """Bucket ids (1 .. buckets; 0 is padding) of :func:`char_ngrams`: CRC-32 of the UTF-8 n-gram
    modulo ``buckets``, plus 1 (stable across processes and machines, unlike Python's ``hash``)."""
    return [zlib.crc32(g.encode("utf-8")) % buckets + 1 for g in char_ngrams(word, sizes)]


class PairEncoder:
    """Turns pairs of words into the inputs of a sentence-pair classifier
    (:mod:`syntaxformer.models.gaussian_transformer`): word ids by the tokenizer's vocabulary (unknown
    words -> ``[UNK]``) and character n-gram bucket ids (:func:`char_ngram_ids`, cached per word).

    Args:
        tokenizer: a word-level tokenizer (``get_vocab()``, ``unk_token_id``, ``pad_token_id``).
        config: the model's config (``char_ngram_sizes``, ``char_ngram_buckets``).
    """

    def __init__(self, tokenizer, config):
        self.vocab = tokenizer.get_vocab()
        self.unk_id, self.pad_id = tokenizer.unk_token_id, tokenizer.pad_token_id
        self.sizes, self.buckets = list(config.char_ngram_sizes), config.char_ngram_buckets
        self._ngrams: dict[str, list[int]] = {}

    def ngram_ids(self, word: str) -> list[int]:
        """:func:`char_ngram_ids` of ``word`` (cached)."""
        ids = self._ngrams.get(word)
        if ids is None:
            ids = self._ngrams[word] = char_ngram_ids(word, self.sizes, self.buckets)
        return ids

    def unknown(self, words) -> int:
        """How many of ``words`` are outside the vocabulary."""
        return sum(w not in self.vocab for w in words)

    def _sentences(self, sentences, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, N) ids, (B, N) mask and (B, N, K) n-gram ids of word lists, padded to ``n`` and ``k``."""
        pad_word = [0] * k
        ids, mask, chars = [], [], []
        for words in sentences:
            gap = n - len(words)
            ids.append([self.vocab.get(w, self.unk_id) for w in words] + [self.pad_id] * gap)
            mask.append([1] * len(words) + [0] * gap)
            chars.append([(g := self.ngram_ids(w)) + [0] * (k - len(g)) for w in words] + [pad_word] * gap)
        return torch.tensor(ids), torch.tensor(mask), torch.tensor(chars)

    def batch(self, pairs) -> dict[str, torch.Tensor]:
        """Model inputs of :class:`NliPair` s: ``premise_ids`` / ``hypothesis_ids`` (B, N),
        ``premise_mask`` / ``hypothesis_mask`` (B, N) (1 = real), ``premise_char_ids`` /
        ``hypothesis_char_ids`` (B, N, K) and ``labels`` (B,); N is the longest sentence of the
        batch (both sides padded to it), K the most n-grams of a word."""
        n = max(max(len(p.premise), len(p.hypothesis)) for p in pairs)
        k = max(len(self.ngram_ids(w)) for p in pairs for w in p.premise + p.hypothesis)
        inputs = {}
        for side in ("premise", "hypothesis"):
            ids, mask, chars = self._sentences([getattr(p, side) for p in pairs], n, k)
            inputs.update({f"{side}_ids": ids, f"{side}_mask": mask, f"{side}_char_ids": chars})
        inputs["labels"] = torch.tensor([p.label for p in pairs], dtype=torch.long)
        return inputs


__all__ = [
    "LABELS",
    "NO_LABEL",
    "NliPair",
    "NliData",
    "tokenize_sentence",
    "label_id",
    "make_pair",
    "tsv_rows",
    "sick_path",
    "detect_format",
    "read_nli_file",
    "load_nli",
    "load_nli_split",
    "char_ngrams",
    "char_ngram_ids",
    "PairEncoder",
]
