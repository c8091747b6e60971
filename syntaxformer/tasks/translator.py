"""Translating with a trained model: raw text in, raw text out (``syntaxformer translate``,
``syntaxformer.load_translator``).

The path of a sentence: Moses normalisation and tokenisation of the source language, lower-cased when
the model was trained so (:class:`~syntaxformer.data.parallel.MosesText`); the source tree from the
model's parser when its encoder reads one (:func:`~syntaxformer.tasks.translation_data.source_structures`);
the joint subword pieces; ``transformers``' beam search (``generate``: ``num_beams``, length penalty 1,
at most ``1.5 N + 10`` new pieces, N the source pieces); pieces joined into words; Moses
detokenisation of the target language.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import torch
from transformers import AutoTokenizer

from syntaxformer.data.parallel import MosesText, decode_pieces
from syntaxformer.errors import InputError
from syntaxformer.models.translation import VARIANTS, TranslationModel
from syntaxformer.parser import parser_fingerprint
from syntaxformer.pretrained import TRANSLATORS
from syntaxformer.runtime import resolve_device
from syntaxformer.tasks.translation_data import EncodedPairs, encode_pairs, make_batch, source_structures

logger = logging.getLogger(__name__)

#: the folder of the shipped models (inside the package)
PRETRAINED = Path(str(resources.files("syntaxformer.pretrained")))


class Translator:
    """A translation model with its vocabulary, pre-processing and search (module docstring).

    Args:
        model: a :class:`~syntaxformer.models.translation.TranslationModel` (put in evaluation mode).
        tokenizer: its joint subword vocabulary (``transformers`` tokenizer).
        beam: beam size (1: greedy search).
        batch_size: sentences per ``generate`` call.
        parser: the parser of the source trees (default: the one the model was trained with).
        name: where the model came from, for messages.
    """

    def __init__(
        self, model, tokenizer, beam: int = 5, batch_size: int = 64, parser: str | None = None, name: str = "<model>"
    ):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.beam, self.batch_size, self.name = beam, batch_size, name
        config = model.config
        self.kind = VARIANTS[config.variant].structure if config.variant in VARIANTS else None
        self.parser = parser or getattr(config, "source_parser", None)
        trained_with = getattr(config, "source_parser_fingerprint", None)
        if (
            self.kind is not None
            and parser is None
            and trained_with
            and parser_fingerprint(self.parser) != trained_with
        ):
            logger.warning(
                "%s: its source parser %s has changed since it was trained (another fingerprint): its trees may "
                "differ from the training's",
                name,
                self.parser,
            )
        self.tree_level = getattr(config, "source_tree_level", 1)
        self.source_text = MosesText(config.source_language, config.lowercase)
        self.target_text = MosesText(config.target_language, config.lowercase)

    def __repr__(self) -> str:
        return f"Translator({self.name!r}, {self.model.config.variant}, beam={self.beam})"

    @torch.no_grad()
    def translate_tokens(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """Tokenised sentences → tokenised translations (lists of words), in order.

        Raises:
            InputError: an empty sentence (naming it, 1-based).
        """
        for number, words in enumerate(sentences, start=1):
            if not words:
                raise InputError("empty sentence", sentence=number)
        structures = None
        if self.kind is not None:
            structures = source_structures(sentences, self.kind, self.parser, level=self.tree_level)
        return self.translate_encoded(encode_pairs(self.tokenizer, sentences, None, self.kind, structures))

    @torch.no_grad()
    def translate_encoded(self, pairs: EncodedPairs) -> list[list[str]]:
        """Encoded sources (:func:`~syntaxformer.tasks.translation_data.encode_pairs`, their structures
        included; targets unused) → tokenised translations, in order: the search of the module docstring."""
        device = self.model.device
        order = sorted(range(len(pairs)), key=lambda i: len(pairs.source[i]))  # similar lengths batched
        out: list[list[str]] = [[] for _ in range(len(pairs))]
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            batch = make_batch(pairs, chunk, with_targets=False).to(device)
            encoded = self.model.get_encoder()(batch.input_ids, batch.attention_mask, batch.structure_inputs)
            generated = self.model.generate(
                encoder_outputs=encoded,
                attention_mask=batch.attention_mask,
                num_beams=self.beam,
                do_sample=False,
                length_penalty=1.0,
                max_new_tokens=int(1.5 * batch.input_ids.shape[1]) + 10,
            )
            for i, row in zip(chunk, generated.tolist()):
                out[i] = decode_pieces(self.tokenizer.backend_tokenizer, row)
        return out

    def translate(self, lines: Sequence[str]) -> list[str]:
        """Raw sentences → raw translations (module docstring), one per line, in order.

        Raises:
            InputError: an empty line (naming the sentence).
        """
        tokens = []
        for number, line in enumerate(lines, start=1):
            words = self.source_text.tokenize(line)
            if not words:
                raise InputError("empty sentence", sentence=number)
            tokens.append(words)
        return [self.target_text.detokenize(words) for words in self.translate_tokens(tokens)]


def translation_folder(model: str | Path) -> Path:
    """The folder of ``model``: a path, or the name of a shipped model (``multi30k-en-de``).

    Raises:
        InputError: neither a folder with a translation model nor a shipped name.
    """
    path = Path(model)
    if not path.is_dir() and str(model) in TRANSLATORS:
        path = PRETRAINED / str(model)
    if not is_translation_folder(path):
        shipped = [name for name in TRANSLATORS if is_translation_folder(PRETRAINED / name)]
        raise InputError(
            f"--model {model}: not a folder with a translation model (shipped: {', '.join(shipped) or 'none'})"
        )
    return path


def is_translation_folder(folder: str | Path) -> bool:
    """Whether ``folder``'s ``config.json`` is a translation model's (``model_type``
    ``syntaxformer-translation``)."""
    folder = Path(folder)
    config = folder / "config.json"
    return config.is_file() and '"syntaxformer-translation"' in config.read_text(encoding="utf-8", errors="replace")


def is_translation_model(model: str | Path | None) -> bool:
    """Whether ``model`` (a folder or a shipped name; None: no) names a translation model."""
    if model is None:
        return False
    path = Path(model)
    if not path.is_dir() and str(model) in TRANSLATORS:
        path = PRETRAINED / str(model)
    return path.is_dir() and is_translation_folder(path)


def load_translator(
    model: str | Path = "multi30k-en-de", device: str | None = None, beam: int = 5, batch_size: int = 64
) -> Translator:
    """A :class:`Translator` from a folder ``translation train`` wrote, or a shipped model's name.

    Raises:
        InputError: not a translation model folder (:func:`translation_folder`).
    """
    folder = translation_folder(model)
    dev = resolve_device(device)
    net = TranslationModel.from_pretrained(folder).to(dev)
    if net.dtype != torch.float32:  # shipped in float16: computed in float32
        net = net.float()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return Translator(net, tokenizer, beam=beam, batch_size=batch_size, name=str(model))


__all__ = [
    "Translator",
    "load_translator",
    "translation_folder",
    "is_translation_folder",
    "is_translation_model",
    "PRETRAINED",
]
