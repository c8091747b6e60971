"""Parse sentences with a model folder and write the trees (``syntaxformer parse``)."""
from __future__ import annotations

from pathlib import Path

import torch

from syntaxformer.errors import InputError


def run_parse(sentences: list[list[str]], out: str | Path, model: str | Path | None = None,
              options=None, data: str = "<sentences>", batch_size: int = 64,
              write_json: bool = False, seed: int = 0) -> tuple[dict, list]:
    """Induce trees for ``sentences`` and write them into ``out``.

    Writes ``OUT/trees.txt``, for a model with dependency heads ``OUT/dependencies.conllu`` and with
    ``write_json`` ``OUT/structures.json`` (:mod:`syntaxformer.workflows.outputs`).

    Args:
        sentences: the sentences, each a list of words (normalised as the caller wants).
        out: output folder (created if missing).
        model: a model folder; None = the pretrained Tree Transformer shipped in the package.
        options: decoder settings: None = the model's saved ones (``decoder.json``; the shipped parser's
            report), a dict = the settings chosen (flags) over them, a
            :class:`~syntaxformer.structures.DecoderOptions` = exactly these.
        data: a name for the sentences, recorded in the summary.
        batch_size: sentences per forward pass.
        write_json: also write ``structures.json``.
        seed: torch seed (parsing is deterministic; recorded).

    Returns:
        ``(summary, trees)``: the summary dict (``model``, ``data``, ``n_sentences``, ``decoder``,
        ``seed``, ``files``) and the trees, one ``nltk.Tree`` per sentence.

    Raises:
        InputError: no sentence, no pretrained model shipped, or the loader's / decoder's errors.
    """
    from syntaxformer.parsing import decode, load_model, model_structures
    from syntaxformer.pretrained import model_or_pretrained
    from syntaxformer.workflows.outputs import write_outputs, write_structures_json

    torch.manual_seed(seed)
    if not sentences:
        raise InputError("no sentence to parse", path=data)
    model, options = model_or_pretrained(model, options)  # default: shipped
    loaded, tokenizer, _ = load_model(model)
    structures = model_structures(loaded, tokenizer, sentences, batch_size=batch_size)
    trees, heads = decode(structures, options)
    out = Path(out)
    paths = write_outputs(out, trees, heads, sentences)
    if write_json:
        paths.append(write_structures_json(out, structures))
    summary = {"model": str(model), "data": data, "n_sentences": len(trees), "decoder": options.to_dict(),
               "seed": seed, "files": [str(p) for p in paths]}
    return summary, trees
