"""The ON-LSTM's ``induce`` recipes (Shen et al. 2019).

``default`` and ``long``: next-word training on ptb-sample's words (the causal-LM objective, sentences
framed by ``[CLS]``), parsed from layer ``parse_layer`` (1, the public parser's) by the top-down split
at the largest distance. Not searched (Adam with the trainer's schedule instead of the public
SGD/NT-ASGD; clipping 0.25 as the public code). Steps from the measured speed: a ``mini`` training step
(64 sentences) took 0.39 s on 2 idle cores in a 120-step trainer run (the last 20 steps at 4,570
tokens/s; the Tree Transformer's ``mini`` 0.24 s in the same conditions): ``default`` = 2,500 steps,
~14-16 minutes of training on 2 idle CPU cores; ``long`` = 7,500 steps, three times as many. The parse
layer stays the public code's (1); on ptb-sample:dev this recipe's layer 2 parses better (README,
records/induce).
"""

from __future__ import annotations

from syntaxformer.recipes.recipe import Recipe

MODEL = "on-lstm"

DEFAULT = Recipe(
    MODEL,
    dict(
        preset="mini",
        max_steps=2500,
        batch_size=64,
        lr=2e-3,
        warmup_steps=100,
        schedule="linear",
        final_lr_fraction=0.1,
        clip=0.25,
        min_freq=2,
    ),
    about="next-word training of the mini model on ptb-sample's words, 2,500 steps",
)
LONG = DEFAULT.with_train(about="the default setting, three times as many steps", max_steps=7500)

#: the public procedure (yikangshen/Ordered-Neurons README's command and ``main.py``; DESIGN.md §3.4): the
#: AWD-LSTM training of :mod:`syntaxformer.tasks.running_text` on the ptb-lm running text (give it with
#: ``--corpus .../ptb.train.txt --valid .../ptb.valid.txt``): batch 20, BPTT 70, SGD lr 30 then NT-ASGD
#: (non-monotone 5, the averaging restarted after epoch 500), weight decay 1.2e-6, clip 0.25, AR 2, TAR 1,
#: the public dropouts (the ``paper`` preset), 1,000 epochs, the model of the best validation perplexity
#: (``keep_best``, ``final_model="best"``).
PAPER = Recipe(
    MODEL,
    dict(
        preset="paper",
        min_freq=1,
        bptt=70,
        batch_size=20,
        eval_batch_size=10,
        optimizer="sgd",
        lr=30.0,
        weight_decay=1.2e-6,
        clip=0.25,
        nonmono=5,
        asgd_restart_epoch=500,
        ar_alpha=2.0,
        tar_beta=1.0,
        epochs=1000,
        keep_best=True,
        final_model="best",
    ),
    about="the authors' procedure: running text, SGD then NT-ASGD, 1,000 epochs (give --corpus and --valid)",
    corpus="ptb-lm",
)

RECIPES = {"default": DEFAULT, "long": LONG, "paper": PAPER}
