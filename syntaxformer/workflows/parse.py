"""Parse sentences with a model folder and write the trees (``syntaxformer parse``)."""

from __future__ import annotations

from pathlib import Path

import torch

from syntaxformer.errors import InputError
from syntaxformer.parser import load_parser
from syntaxformer.workflows.outputs import write_outputs, write_structures_json


def run_parse(
    sentences: list[list[str]],
    out: str | Path,
    model: str | Path | None = None,
    options=None,
    data: str = "<sentences>",
    batch_size: int = 64,
    write_json: bool = False,
    seed: int = 0,
    punctuation: bool = True,
) -> tuple[dict, list]:
    """Induce trees for ``sentences`` with a :class:`~syntaxformer.parser.Parser` and write them into ``out``.

    Writes ``OUT/trees.txt``, for a model with dependency heads ``OUT/dependencies.conllu`` and with
    ``write_json`` ``OUT/structures.json`` (:mod:`syntaxformer.workflows.outputs`).

    Args:
        sentences: the sentences, each a list of tokens (punctuation tokens are not shown to the model
            and are put back as leaves: :mod:`syntaxformer.parser`).
        out: output folder (created if missing).
        model: a model folder; None = the pretrained Tree Transformer shipped in the package.
        options: decoder settings: None = the model's saved ones (``decoder.json``; the shipped parser's
            report), a dict = the settings chosen (flags) over them, a
            :class:`~syntaxformer.structures.DecoderOptions` = exactly these.
        data: a name for the sentences, recorded in the summary.
        batch_size: sentences per forward pass.
        write_json: also write ``structures.json``.
        seed: torch seed (parsing is deterministic; recorded).
        punctuation: find punctuation tokens and keep them from the model (False: a treebank's
            leaves, every token a word).

    Returns:
        ``(summary, trees)``: the summary dict (``model``, ``data``, ``n_sentences``, ``decoder``,
        ``seed``, ``files``) and the trees, one ``nltk.Tree`` per sentence.

    Raises:
        InputError: no sentence, no pretrained model shipped, or the loader's / decoder's errors.
    """

    torch.manual_seed(seed)
    if not sentences:
        raise InputError("no sentence to parse", path=data)
    parser = load_parser(model, options, batch_size=batch_size)  # None: the shipped parser
    trees, heads, structures = parser.parse_tokens(sentences, punctuation=punctuation)
    options, model = parser.options, parser.name
    out = Path(out)
    paths = write_outputs(out, trees, heads, sentences)
    if write_json:
        paths.append(write_structures_json(out, structures))
    summary = {
        "model": str(model),
        "data": data,
        "n_sentences": len(trees),
        "decoder": options.to_dict(),
        "seed": seed,
        "files": [str(p) for p in paths],
    }
    return summary, trees
