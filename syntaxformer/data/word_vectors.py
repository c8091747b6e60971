"""Pre-trained word vectors: trained by the project with gensim's word2vec on its own text, read back
for the inference models (DESIGN.md §3.1: the Gaussian Transformer's fixed word vectors; there are no
downloads here, so the project trains its own).

* :func:`train_word2vec` -- skip-gram word2vec (Mikolov et al. 2013, gensim) on text files, one
  sentence per line, lower-cased, ``<unk>`` removed; deterministic for a ``seed`` (one worker thread
  and a stable hash for the initial vectors); writes a gensim ``KeyedVectors`` file.
* :func:`read_word_vectors` -- a gensim ``KeyedVectors`` file (``.kv``, from ``KeyedVectors.save``)
  or word2vec text format (first line ``count dim``, then ``word v1 ... vdim``).

The default text (:data:`DEFAULT_TEXT`) is ``../shared/data``'s ptb-lm and WikiText-2 training files.
"""

from __future__ import annotations

import logging
import time
import zlib
from pathlib import Path

import numpy as np

from syntaxformer.data.text import read_text
from syntaxformer.data.treebank import read_text_file
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

#: ``nli vectors`` default text, relative to the project root
DEFAULT_TEXT = ("../shared/data/ptb-lm/ptb.train.txt", "../shared/data/wikitext-2/wiki.train.tokens")
#: tokens dropped from the text (unknown-word markers of ptb-lm and WikiText-2)
DROPPED = frozenset({"<unk>"})


def stable_hash(text: str) -> int:
    """CRC-32 of ``text``: gensim seeds each word's initial vector with ``hash(word + str(seed))``,
    and Python's ``hash`` of a string changes between processes."""
    return zlib.crc32(text.encode("utf-8"))


def word2vec_sentences(files) -> list[list[str]]:
    """The sentences of the text files: lower-cased words, :data:`DROPPED` removed, empty lines skipped.

    Raises:
        InputError: a missing or empty file.
    """
    sentences = []
    for path in files:
        for words in read_text(path):
            kept = [w.lower() for w in words if w not in DROPPED]
            if kept:
                sentences.append(kept)
    return sentences


def train_word2vec(
    files, out: str | Path, dim: int = 100, window: int = 5, min_count: int = 3, epochs: int = 5, seed: int = 0
) -> dict:
    """Train skip-gram word2vec on ``files`` and save the vectors to ``out`` (``KeyedVectors.save``).

    Args:
        files: text files, one sentence per line (whitespace-separated words).
        out: the vectors' file (read back by :func:`read_word_vectors`).
        dim, window, min_count, epochs: word2vec's vector size, context window, minimum word count
            and passes over the text (skip-gram, 5 negative samples).
        seed: the random seed (one worker thread: the same vectors for the same seed and text).
    Returns:
        A report: files, sentences, tokens, vocabulary, options, seconds.
    Raises:
        InputError: a missing or empty text file.
    """
    from gensim.models import Word2Vec  # optional heavy dependency, imported on use (start-up time)

    t0 = time.perf_counter()
    sentences = word2vec_sentences(files)
    model = Word2Vec(
        sentences,
        vector_size=dim,
        window=window,
        min_count=min_count,
        sg=1,
        negative=5,
        epochs=epochs,
        seed=seed,
        workers=1,
        hashfxn=stable_hash,
    )
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    model.wv.save(str(out))
    report = dict(
        files=[str(f) for f in files],
        sentences=len(sentences),
        tokens=sum(map(len, sentences)),
        vocabulary=len(model.wv),
        dim=dim,
        window=window,
        min_count=min_count,
        epochs=epochs,
        algorithm="word2vec skip-gram, 5 negative samples (gensim)",
        seed=seed,
        out=str(out),
        seconds=round(time.perf_counter() - t0, 1),
    )
    logger.info("word2vec: %d words of %d tokens -> %s", len(model.wv), report["tokens"], out)
    return report


def read_word_vectors(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Words and their vectors from a gensim ``KeyedVectors`` file or a word2vec text file.

    Returns:
        ``(words, matrix)``: ``matrix[i]`` (float32, (V, dim)) is the vector of ``words[i]``.
    Raises:
        InputError: a missing file, or one that is neither format (naming the line for text).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such word-vector file", path=path)
    with path.open("rb") as f:
        head = f.read(64)
    if head.startswith(b"\x80"):  # a pickle: KeyedVectors.save
        from gensim.models import KeyedVectors  # optional heavy dependency, imported on use (start-up time)

        try:
            kv = KeyedVectors.load(str(path))
        except Exception as e:  # noqa: BLE001 - any unpickling failure is bad input
            raise InputError(f"not a gensim KeyedVectors file ({type(e).__name__})", path=path) from None
        return list(kv.index_to_key), np.asarray(kv.vectors, dtype=np.float32)
    return _read_text_vectors(path)


def _read_text_vectors(path: Path) -> tuple[list[str], np.ndarray]:
    lines = read_text_file(path).splitlines()
    try:
        count, dim = (int(x) for x in lines[0].split())
    except (ValueError, IndexError):
        raise InputError("expected a word2vec text header 'count dim'", path=path, line=1) from None
    words, rows = [], []
    for number, line in enumerate(lines[1 : count + 1], 2):
        parts = line.rstrip().split(" ")
        if len(parts) != dim + 1:
            raise InputError(f"{len(parts) - 1} numbers, the header says {dim}", path=path, line=number)
        try:
            rows.append([float(x) for x in parts[1:]])
        except ValueError:
            raise InputError("not a number", path=path, line=number) from None
        words.append(parts[0])
    if len(words) != count:
        raise InputError(f"{len(words)} vectors, the header says {count}", path=path)
    return words, np.asarray(rows, dtype=np.float32).reshape(len(words), dim)


__all__ = ["DEFAULT_TEXT", "train_word2vec", "read_word_vectors", "word2vec_sentences", "stable_hash"]
