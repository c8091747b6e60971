"""Reader for the artificial propositional-logic inference data of Bowman, Potts & Manning (2015).

The one reader of this format (``../shared/data/propositional-logic``, as vendored in
yikangshen/Ordered-Neurons; DESIGN.md §6). A folder holds ``train0 .. train12`` and ``test0 ..
test12``; file ``trainN`` / ``testN`` holds the pairs whose longer formula has N logical operators
(``not``, ``and``, ``or``), except that ``train12`` / ``test12`` also hold every pair with more (up
to 18 in ``test12``: "12 or more"). One pair a line::

    RELATION TAB formula TAB formula

with the relation one of the 7 of MacCartney & Manning's natural logic (:data:`RELATIONS`) and each
formula a space-separated bracketed expression over the variables ``a`` - ``f``, e.g.
``( ( not a ) ( and b ) )``.

The standard protocol (Bowman et al. 2015; the ON-LSTM paper, Shen et al. 2019, §6.4) trains on the
pairs with at most 6 operators (``train0 .. train6``) and reports accuracy on every ``testN``
separately: the length generalisation. The public ON-LSTM code holds out every 10th pair of the
training files (in file order) for validation: :func:`split_train_valid`.

A line that is not three tab-separated fields, has an unknown relation, a token outside
:data:`SYMBOLS` or unbalanced brackets is an :class:`~syntaxformer.errors.InputError` naming the file
and the 1-based line; nothing is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import accumulate, repeat
from pathlib import Path

from syntaxformer.errors import InputError

#: The 7 relations (Bowman et al. 2015, Table 1), in the public ON-LSTM code's label order:
#: ``<`` forward entailment, ``>`` reverse entailment, ``=`` equivalence, ``^`` negation (exhaustive
#: exclusion), ``|`` alternation (exclusion), ``#`` independence, ``v`` cover (exhaustion).
RELATIONS = ("<", ">", "=", "^", "|", "#", "v")
#: Their names, for reports.
RELATION_NAMES = {
    "<": "forward entailment",
    ">": "reverse entailment",
    "=": "equivalence",
    "^": "negation",
    "|": "alternation",
    "#": "independence",
    "v": "cover",
}
#: The logical operators (what "N operators" counts).
OPERATORS = ("not", "and", "or")
#: Every token a formula may hold.
SYMBOLS = ("(", ")", "a", "b", "c", "d", "e", "f") + OPERATORS
#: The operator counts of the files (``train0 .. train12``, ``test0 .. test12``).
FILE_OPERATORS = tuple(range(13))

_FILE_NAME = re.compile(r"^(train|test)(\d+)$")
_SYMBOL_SET = frozenset(SYMBOLS)
_DEPTH_STEP = {"(": 1, ")": -1}


@dataclass(frozen=True)
class LogicPair:
    """One line of a logic file.

    Attributes:
        relation: one of :data:`RELATIONS`.
        left, right: the two formulas' tokens.
        file_operators: N of the file it came from (``trainN`` / ``testN``; 12 = "12 or more").
        operators: the operators of the longer formula, counted (equals ``file_operators`` except in
            the files of 12, where it may be 12-18).
        line: 1-based line in that file.
    """

    relation: str
    left: tuple[str, ...]
    right: tuple[str, ...]
    file_operators: int
    operators: int
    line: int

    @property
    def label(self) -> int:
        """The relation's class index, 0-6 (:data:`RELATIONS` order)."""
        return RELATIONS.index(self.relation)


def count_operators(formula: tuple[str, ...] | list[str]) -> int:
    """How many of ``not``, ``and``, ``or`` a formula holds."""
    return formula.count("not") + formula.count("and") + formula.count("or")


def _check_formula(tokens: list[str], which: str, path: Path, line: int) -> None:
    """Raise InputError for an empty formula, a token outside SYMBOLS or unbalanced brackets."""
    if not tokens:
        raise InputError(f"the {which} formula is empty", path, line)
    unknown = sorted(set(tokens) - _SYMBOL_SET)
    if unknown:
        raise InputError(
            f"the {which} formula has unknown token(s) {' '.join(map(repr, unknown))}; expected {' '.join(SYMBOLS)}",
            path,
            line,
        )
    depths = list(accumulate(map(_DEPTH_STEP.get, tokens, repeat(0))))  # bracket depth after each token
    if depths[-1] != 0 or min(depths) < 0:
        raise InputError(f"the {which} formula has unbalanced brackets", path, line)


def parse_line(text: str, path: Path, line: int, file_operators: int) -> LogicPair:
    """One line ``RELATION TAB formula TAB formula`` -> :class:`LogicPair`.

    Raises:
        InputError: naming ``path:line``: not three tab-separated fields, an unknown relation, or a
            formula that :func:`_check_formula` refuses.
    """
    fields = text.rstrip("\r\n").split("\t")
    if len(fields) != 3:
        raise InputError(f"expected 3 tab-separated fields (relation, formula, formula), got {len(fields)}", path, line)
    relation, left, right = fields[0].strip(), fields[1].split(), fields[2].split()
    if relation not in RELATIONS:
        raise InputError(f"unknown relation {relation!r}; expected one of {' '.join(RELATIONS)}", path, line)
    _check_formula(left, "first", path, line)
    _check_formula(right, "second", path, line)
    operators = max(count_operators(left), count_operators(right))
    return LogicPair(relation, tuple(left), tuple(right), file_operators, operators, line)


def read_logic_file(path: str | Path) -> list[LogicPair]:
    """Every pair of one file ``trainN`` / ``testN``, in file order.

    Raises:
        InputError: a missing file, a name not of the form ``trainN`` / ``testN``, or a malformed
            line (:func:`parse_line`; a blank line is malformed too).
    """
    path = Path(path)
    match = _FILE_NAME.match(path.name)
    if match is None:
        raise InputError("a logic file is named trainN or testN (N = operators)", path)
    if not path.is_file():
        raise InputError("no such file", path)
    n = int(match.group(2))
    with open(path, encoding="utf-8") as f:
        return [parse_line(text, path, i, n) for i, text in enumerate(f, 1)]


def read_logic_split(folder: str | Path, split: str, operators=FILE_OPERATORS) -> dict[int, list[LogicPair]]:
    """``{N: pairs of folder/splitN}`` for each N of ``operators`` (files read in that order).

    Args:
        folder: the data folder (``../shared/data/propositional-logic``).
        split: ``"train"`` or ``"test"``.
        operators: the Ns to read.
    Raises:
        InputError: a missing folder or file, or a malformed line (naming file and line).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(
            "no such folder (expected the propositional-logic data: train0 .. train12, test0 .. test12)", folder
        )
    if split not in ("train", "test"):
        raise ValueError(f"split must be train or test, got {split!r}")
    return {n: read_logic_file(folder / f"{split}{n}") for n in operators}


def split_train_valid(files: dict[int, list[LogicPair]], every: int = 10) -> tuple[list[LogicPair], list[LogicPair]]:
    """The public ON-LSTM code's validation split: the pairs of ``files`` in order (files by
    increasing N, lines in file order), numbered from 1; every ``every``-th pair is validation.

    Returns:
        ``(train, valid)``. ``every`` = 0 gives no validation pairs.
    """
    pairs = [pair for n in sorted(files) for pair in files[n]]
    if every <= 0:
        return pairs, []
    train = [p for i, p in enumerate(pairs, 1) if i % every]
    valid = [p for i, p in enumerate(pairs, 1) if i % every == 0]
    return train, valid


__all__ = [
    "RELATIONS",
    "RELATION_NAMES",
    "OPERATORS",
    "SYMBOLS",
    "FILE_OPERATORS",
    "LogicPair",
    "count_operators",
    "parse_line",
    "read_logic_file",
    "read_logic_split",
    "split_train_valid",
]
