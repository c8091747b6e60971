"""The Neural and Compound PCFGs' ``induce`` recipes (Kim, Dyer & Rush, ACL 2019; DESIGN.md §10).

``paper``: the paper's grammar (30 nonterminals, 60 preterminals, symbol embeddings 256, the compound
latent 64) and the authors' optimisation (``train.py``): Adam at 1e-3 with betas (0.75, 0.999), no
decay, gradient-norm clipping 3, the length curriculum (training sentences up to 30 words in the first
epoch, one more per epoch, up to 40: the model's config), 10 epochs (the authors' default), the model
of the lowest validation perplexity kept; on the ptb-lm text (give ``--corpus`` and ``--valid``). The
authors batch 4 sentences of one length; batches here are 4 sentences of similar lengths.

``cpu``: the same procedure at 10 nonterminals and 20 preterminals (the compound variant's posterior
LSTM 128 wide) and batches of 32 sentences, so that an epoch of the ptb-lm text takes minutes on one
CPU thread (a batch of 32 sentences of 25 words: about 0.2 s forward and backward for the neural PCFG,
0.4 s for the compound one); stop it with ``--epochs`` or ``--max-minutes``.

No sentence is split or cut (``max_length`` 1,000 tokens): the curriculum drops long ones in training,
and validation reads every sentence.
"""

from __future__ import annotations

from syntaxformer.recipes.recipe import Recipe

NEURAL = "neural-pcfg"
COMPOUND = "compound-pcfg"

_TRAIN = dict(
    min_freq=1,
    max_length=1000,
    optimizer="adam",
    lr=1e-3,
    betas=(0.75, 0.999),
    eps=1e-8,
    weight_decay=0.0,
    clip=3.0,
    warmup_steps=0,
    schedule="constant",
    epochs=10,
    eval_each_epoch=True,
    keep_best=True,
    final_model="best",
)


def _recipes(model: str) -> dict[str, Recipe]:
    paper = Recipe(
        model,
        dict(_TRAIN, preset="paper", batch_size=4),
        about="the paper's grammar (30/60 symbols) and the authors' optimisation, 10 epochs on the ptb-lm text "
        "(give --corpus and --valid)",
        corpus="ptb-lm",
    )
    cpu = Recipe(
        model,
        dict(_TRAIN, preset="cpu", batch_size=32),
        about="the paper's procedure at 10/20 symbols and batches of 32 on the ptb-lm text, minutes per epoch on "
        "one CPU thread (give --corpus and --valid)",
        corpus="ptb-lm",
    )
    return {"paper": paper, "cpu": cpu}


RECIPES_NEURAL = _recipes(NEURAL)
RECIPES_COMPOUND = _recipes(COMPOUND)
