"""Parallel text for translation: aligned files, the Moses pre-processing, the joint subword vocabulary.

* :func:`read_aligned`: two files (plain or ``.gz``), line ``i`` of one translating line ``i`` of the
  other; a different number of lines, an empty line or bytes that are not UTF-8 are an
  :class:`~syntaxformer.errors.InputError` naming the files and the 1-based line.
* :class:`MosesText`: the pipeline the Multi30k ``tok/`` files were made with (``scripts/task1-tokenize.sh``:
  ``lowercase.perl``, ``normalize-punctuation.perl -l LANG``, ``tokenizer.perl -l LANG``) and back
  (``detokenizer.perl``), as ``sacremoses`` reimplements them.
* :func:`build_subwords`: one byte-pair-encoding vocabulary over both languages (Sennrich, Haddow &
  Birch 2016; ``tokenizers``' BPE with the ``</w>`` end-of-word suffix, so pieces join back to
  words), special tokens ``<pad> <s> </s> <unk>`` first (:data:`SPECIALS`); :func:`encode_words`
  gives a sentence's pieces and, per piece, its 0-based word (what maps a word's tree onto its pieces).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from syntaxformer.errors import InputError

#: the joint vocabulary's special tokens in id order (padding, start, end, unknown)
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
#: the end-of-word suffix of the BPE pieces
END_OF_WORD = "</w>"


def _open_text(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_lines(path: str | Path, allow_empty: bool = False) -> list[str]:
    """The lines of a UTF-8 text file (plain or ``.gz``), without their line ends.

    Raises:
        InputError: no such file, bytes that are not UTF-8 or (unless ``allow_empty``) an empty line,
            naming the file and the 1-based line.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file", path)
    lines = []
    with _open_text(path) as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start})", path, number) from None
            if not line.strip() and not allow_empty:
                raise InputError("empty line (one sentence a line expected)", path, number)
            lines.append(line)
    return lines


def read_aligned(source: str | Path, target: str | Path) -> list[tuple[str, str]]:
    """Sentence pairs from two aligned files (line ``i`` of ``source`` translates line ``i`` of ``target``).

    Raises:
        InputError: a file :func:`read_lines` refuses, or files with different numbers of lines (naming
            both and the first line one of them lacks).
    """
    src, tgt = read_lines(source), read_lines(target)
    if len(src) != len(tgt):
        shorter = source if len(src) < len(tgt) else target
        raise InputError(
            f"{len(src)} lines against {len(tgt)} in {target}: aligned files need one line each",
            source,
            min(len(src), len(tgt)) + 1 if shorter == source else None,
        )
    return list(zip(src, tgt))


class MosesText:
    """The Moses pre-processing of one language and its inverse (module docstring).

    Args:
        language: an ISO code (``en``, ``de``, ``fr``, ...), as the Moses scripts take it.
        lowercase: lower-case after tokenising (the Multi30k ``tok/`` files are lower-cased).
    """

    def __init__(self, language: str, lowercase: bool = True):
        from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer

        self.language, self.lowercase = language, lowercase
        self._normalizer = MosesPunctNormalizer(lang=language)
        self._tokenizer = MosesTokenizer(lang=language)
        self._detokenizer = MosesDetokenizer(lang=language)

    def tokenize(self, text: str) -> list[str]:
        """Raw text → its tokens: punctuation normalised, Moses tokens (no XML escaping), lower-cased
        when the model was trained so."""
        text = text.lower() if self.lowercase else text
        return self._tokenizer.tokenize(self._normalizer.normalize(text), escape=False)

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Tokens → text as Moses' ``detokenizer.perl`` writes it."""
        return self._detokenizer.detokenize(list(tokens))


def build_subwords(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """A joint BPE vocabulary of ``vocab_size`` pieces learnt on tokenised ``texts`` (both languages;
    words are split on whitespace only), specials :data:`SPECIALS` first (ids 0-3)."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix=END_OF_WORD))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIALS), end_of_word_suffix=END_OF_WORD, show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def load_subwords(path: str | Path) -> Tokenizer:
    """The vocabulary :meth:`tokenizers.Tokenizer.save` wrote to ``path``.

    Raises:
        InputError: no such file, or not a tokenizer.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file (a translation model folder holds subwords.json)", path)
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises its own exception type for a damaged file
        raise InputError(f"not a subword vocabulary ({e})", path) from None


def encode_words(tokenizer: Tokenizer, words: Sequence[str]) -> tuple[list[int], list[int]]:
    """The piece ids of a tokenised sentence and, per piece, its 0-based word."""
    encoding = tokenizer.encode(list(words), is_pretokenized=True, add_special_tokens=False)
    return encoding.ids, list(encoding.word_ids)


def decode_pieces(tokenizer: Tokenizer, ids: Sequence[int]) -> list[str]:
    """Piece ids (specials dropped) → the words they spell (pieces joined at ``</w>``)."""
    text = tokenizer.decode([i for i in ids if i >= len(SPECIALS)], skip_special_tokens=True)
    return text.split()


__all__ = [
    "SPECIALS",
    "END_OF_WORD",
    "read_lines",
    "read_aligned",
    "MosesText",
    "build_subwords",
    "load_subwords",
    "encode_words",
    "decode_pieces",
]
