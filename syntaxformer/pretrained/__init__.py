"""The parsers shipped inside the package, each a model folder beside this file (:data:`SHIPPED`).

* ``structformer-ptb-lm`` (the default: the highest dev F1 of the models that induced their trees alone,
  the best dependency heads, and it has attention heads): a
  StructFormer (``mini``, 4 x 128, 2 parser layers, 500 learned positions) trained on the Penn Treebank
  language-modelling text by its authors' procedure (``induce --recipe paper``: 4,096-token batches,
  Adam 3e-4 halved on a validation plateau, the lowest validation loss kept) for its 100 epochs on one
  CPU thread; trees by the top-down distance split, dependency heads by the authors' argmax rule;
* ``structformer-distilled-ptb-lm``: the best trees of one model: ``structformer-ptb-lm`` (with two more
  convolution layers in its parse network) distilled from the trees of ``ensemble-ptb-lm`` as it was then
  (the StructFormer, the Tree Transformer, the ON-LSTM and the right-branching voter) of the same text
  (``syntaxformer distill``, two stages: the ensemble's trees for 10 epochs, then those trees beside its
  own masked LM at weight 0.1 for 2, chosen on dev); as fast as the default, any length, the ensemble's
  dev F1; its dependency heads are worse than the default's (test UAS 39.0 against 47.8);
* ``tree-transformer-ptb-lm``: a Tree Transformer (``small``, 6 x 256) trained with the ``long``
  recipe's model for 4,500 steps of 512 sentences on the same text, parsed by Algorithm 1 from layer 2
  (chosen on dev);
* ``on-lstm-ptb-lm``: an ON-LSTM (``mini``, 3 layers) trained on the same text by its authors'
  procedure (``induce --recipe paper``: running text, SGD then NT-ASGD) for 18 epochs on one CPU
  thread (seed 0, the best on dev of nine runs), parsed from layer 1's syntactic distances; it has no
  attention heads (``heads``, ``prune`` and ``show``'s attention maps need them);
* ``compound-pcfg-ptb-lm``: a parser of another family, a grammar: the Compound PCFG (Kim, Dyer & Rush,
  ACL 2019) at the ``cpu`` recipe's 10 nonterminals and 20 preterminals, trained on the same text
  (``induce --architecture compound-pcfg --recipe cpu``: its 10 epochs on one CPU thread, seed 0, the
  better on dev of two seeds), parsed by its max-marginal trees; no dependency heads, no attention heads, and sentences of at most 300 words
  (its chart's time is cubic in the length; in an ensemble it abstains on longer ones);
* ``tree-transformer-ptb``: a Tree Transformer (``mini``, 4 x 128) trained on ptb-sample's words;
* ``ensemble-ptb-lm`` (:data:`ENSEMBLES`): no weights of its own, an ``ensemble.json`` naming
  ``structformer-ptb-lm``, ``on-lstm-ptb-lm``, ``compound-pcfg-ptb-lm`` and the baseline voter
  ``right-branching`` with their votes' weights (chosen on the dev half), which
  :func:`syntaxformer.parser.load_parser` loads as one ensemble parser (the PCFG abstains on sentences
  over its 300 words).

A folder holds what ``syntaxformer train`` writes (``config.json``, ``model.safetensors`` in float16, the
tokenizer, ``training.json``), ``report.json`` (the ``induce`` report it was scored by: test-half F1,
recipe, seed, decoder settings), ``decoder.json`` (those decoder settings, which it is parsed with:
:func:`syntaxformer.structures.save_decoder_options`) and ``card.json`` (the text it was trained on
and its licence, the setting, the command that reproduces it, the compute). ``syntaxformer parse``,
``show``, ``heads``, ``prune`` and ``probe`` use the default when ``--model`` is not given, and take a
shipped name as ``--model``; in Python ``syntaxformer.load_parser(name)`` or

    model, tokenizer, info = syntaxformer.load_pretrained()                       # the default
    model, tokenizer, info = syntaxformer.load_pretrained("tree-transformer-ptb-lm", device="cpu")

Licence: all were trained on Wall Street Journal text of the Penn Treebank (LDC; the WSJ sample is
fair use, **non-commercial only**, ``syntaxformer/data/embedded/LICENSE.txt``), so the weights carry the
same restriction.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from syntaxformer.data.tokenization import save_tokenizer
from syntaxformer.errors import InputError
from syntaxformer.parsing import load_model, resolve_decoder_options
from syntaxformer.structures import save_decoder_options, saved_decoder_options

#: The parsers shipped inside this package, by name (each a folder beside this file); the first is the
#: default of every command and of :func:`syntaxformer.load_parser`: the best on the dev half among the
#: models that induced their structure alone (not distilled from an ensemble) with attention heads, which
#: every command can use; its dependency heads are the best shipped.
SHIPPED = (
    "structformer-ptb-lm",
    "structformer-distilled-ptb-lm",
    "tree-transformer-ptb-lm",
    "on-lstm-ptb-lm",
    "compound-pcfg-ptb-lm",
    "tree-transformer-ptb",
)
#: The default shipped parser's name.
PRETRAINED_NAME = SHIPPED[0]
#: The ensembles shipped inside this package, by name: each a folder beside this file with only an
#: ``ensemble.json`` naming shipped members and their weights (``syntaxformer.parser.load_parser``).
ENSEMBLES = ("ensemble-ptb-lm",)
#: The translation models shipped inside this package, by name (each a folder beside this file that
#: ``translation train`` wrote, in float16; ``syntaxformer.load_translator``, ``syntaxformer translate``).
TRANSLATORS = ("multi30k-en-de",)


def shipped_parsers() -> list[str]:
    """The names of the shipped parsers whose weights this installation has, default first."""
    root = Path(str(resources.files("syntaxformer.pretrained")))
    return [name for name in SHIPPED if (root / name / "model.safetensors").is_file()]


def pretrained_folder(name: str | None = None) -> Path:
    """The folder of a shipped parser.

    Args:
        name: a name in :data:`SHIPPED`; None = the default (:data:`PRETRAINED_NAME`).
    Raises:
        InputError: an unknown name, or the package holds no weights for it (a checkout without them).
    """
    name = name or PRETRAINED_NAME
    if name not in SHIPPED:
        raise InputError(f"no shipped parser named {name!r}; shipped: {', '.join(SHIPPED)}")
    folder = Path(str(resources.files("syntaxformer.pretrained").joinpath(name)))
    if not (folder / "model.safetensors").is_file():
        raise InputError("this installation ships no pretrained parser: give --model", path=folder)
    return folder


def model_folder(model: str | Path | None) -> Path:
    """The folder ``model`` names: None = the default shipped parser; an existing folder = itself; a
    name in :data:`SHIPPED` = that shipped parser, one in :data:`ENSEMBLES` that shipped ensemble's
    folder; anything else is returned as a path (the loader then names what is missing)."""
    if model is None:
        return pretrained_folder()
    if not Path(model).exists() and str(model) in SHIPPED:
        return pretrained_folder(str(model))
    if not Path(model).exists() and str(model) in ENSEMBLES:
        return Path(str(resources.files("syntaxformer.pretrained").joinpath(str(model))))
    return Path(model)


def model_or_pretrained(model: str | Path | None, options=None):
    """The model folder and decoder options a command uses: ``model`` (else the shipped folder) and
    its decoder settings with the user's choices over them
    (:func:`syntaxformer.parsing.resolve_decoder_options`).

    Args:
        model: a model folder, a shipped parser's name (:data:`SHIPPED`), or None for the default one.
        options: None (the folder's saved settings), a dict of chosen settings (flags) or a full
            :class:`~syntaxformer.structures.DecoderOptions`.
    Returns:
        ``(folder, options)``: ``options`` a :class:`~syntaxformer.structures.DecoderOptions`.
    Raises:
        InputError: ``model`` is None and no pretrained model is shipped; invalid decoder settings.
    """
    folder = model_folder(model)
    return folder, resolve_decoder_options(folder, options)


def load_pretrained(name: str | None = None, *, device: str | None = "cpu"):
    """Load a shipped pretrained parser's model (float32, evaluation mode).

    Args:
        name: a name in :data:`SHIPPED` (``"structformer-ptb-lm"``); None = the default
            (:data:`PRETRAINED_NAME`).
        device: keyword only: where to put it ("cpu", "cuda"; None = CUDA if available).
    Returns:
        ``(model, tokenizer, info)`` as :func:`syntaxformer.parsing.load_model` (``info`` is its
        ``training.json``).
    Raises:
        InputError: an unknown name (one line naming the shipped ones; a device given first is named
            as such), or no pretrained model in this installation.
    """
    if name is not None and name not in SHIPPED and _looks_like_device(str(name)):
        raise InputError(
            f"no shipped parser named {name!r}: load_pretrained takes the parser name first and the device "
            f"as a keyword, load_pretrained(name, device={name!r}); shipped: {', '.join(SHIPPED)}"
        )
    return load_model(pretrained_folder(name), device=device)


def _looks_like_device(text: str) -> bool:
    """Whether ``text`` names a torch device type (``cpu``, ``cuda``, ``cuda:1``, ``mps``, ...)."""
    return text.split(":")[0] in {"cpu", "cuda", "mps", "xpu", "meta"}


def export_pretrained(induce_out: str | Path, folder: str | Path) -> Path:
    """Write the folder this package ships from an ``induce`` output folder: the model in float16
    safetensors, its tokenizer, ``training.json``, the ``report.json`` of the run and ``decoder.json``
    (the decoder settings the model was scored with: ``model/decoder.json``, else the report's).

    Args:
        induce_out: an ``induce --out`` folder (``model/``, ``report.json``).
        folder: where to write (created; files of the same names are replaced).
    Returns:
        ``folder``.
    Raises:
        InputError: ``induce_out`` is not an induce output folder; an unreadable or invalid saved decoder
            setting.
    """
    induce_out, folder = Path(induce_out), Path(folder)
    if not (induce_out / "report.json").is_file():
        raise InputError("not an induce output folder (no report.json)", path=induce_out)
    model, tokenizer, _ = load_model(induce_out / "model")
    folder.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(folder, safe_serialization=True)
    save_tokenizer(tokenizer, folder)
    for name in ("model/training.json", "report.json"):
        shutil.copy(induce_out / name, folder / Path(name).name)
    save_decoder_options(folder, saved_decoder_options(induce_out / "model")[0])
    return folder


__all__ = [
    "SHIPPED",
    "PRETRAINED_NAME",
    "ENSEMBLES",
    "shipped_parsers",
    "pretrained_folder",
    "model_folder",
    "model_or_pretrained",
    "load_pretrained",
    "export_pretrained",
]
