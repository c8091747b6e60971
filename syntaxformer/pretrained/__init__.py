"""The pretrained parser shipped inside the package: a Tree Transformer trained on ptb-sample's words.

``syntaxformer/pretrained/tree-transformer-ptb/`` holds a model folder as ``syntaxformer train``
writes it (``config.json``, ``model.safetensors`` in float16, the tokenizer, ``training.json``) and
``report.json``, the ``induce --recipe long`` report it was trained by (test-half F1, the recipe, the
seed). ``syntaxformer parse`` and ``show`` use it when ``--model`` is not given; in Python:

    model, tokenizer, info = syntaxformer.load_pretrained()

Licence: trained on the Penn Treebank WSJ sample (LDC, fair use, **non-commercial only**; see
``syntaxformer/data/embedded/LICENSE.txt``), so the weights carry the same restriction.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

#: The shipped model's folder name inside this package.
PRETRAINED_NAME = "tree-transformer-ptb"


def pretrained_folder() -> Path:
    """The folder of the shipped pretrained parser.

    Raises:
        InputError: the package holds no pretrained model (a checkout without the weights).
    """
    from syntaxformer.errors import InputError
    folder = Path(str(resources.files("syntaxformer.pretrained").joinpath(PRETRAINED_NAME)))
    if not (folder / "model.safetensors").is_file():
        raise InputError("this installation ships no pretrained parser: give --model", path=folder)
    return folder


def load_pretrained(device: str | None = "cpu"):
    """Load the shipped pretrained Tree Transformer (float32, evaluation mode).

    Args:
        device: where to put it ("cpu", "cuda"; None = CUDA if available).
    Returns:
        ``(model, tokenizer, info)`` as :func:`syntaxformer.parsing.load_model` (``info`` is its
        ``training.json``).
    Raises:
        InputError: no pretrained model in this installation.
    """
    from syntaxformer.parsing import load_model
    return load_model(pretrained_folder(), device=device)


__all__ = ["PRETRAINED_NAME", "pretrained_folder", "load_pretrained"]
