"""``syntaxformer distill``: one student parser from an ensemble's trees of unlabelled text.

The teacher (by default the shipped ensemble ``ensemble-ptb-lm``) parses the training text; the student
(by default the shipped StructFormer) learns to order its syntactic distances as the teacher's trees
order their word gaps; the epoch with the best dev-half sentence F1 is kept in ``OUT/model``, which
``parse --model``, ``load_parser`` and ``export_pretrained`` take. The work:
:func:`syntaxformer.tasks.distill.distill`.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from syntaxformer.cli.arguments import add_dataclass_arguments
from syntaxformer.tasks.distill import DistillJob


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "distill",
        help="train one student parser on an ensemble's trees of unlabelled text",
        description="Ensemble-then-distill (Shayegh et al., ICLR 2024): the teacher ensemble parses the "
        "training text (no gold tree), the student StructFormer learns those trees through its syntactic "
        "distances (the ranking loss of Shen et al., ACL 2018); the epoch of the best dev sentence F1 is kept.",
    )
    add_dataclass_arguments(p, DistillJob, grouped=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntaxformer.tasks.distill import distill

    report = distill(DistillJob(**{f.name: getattr(args, f.name) for f in fields(DistillJob)}))
    history = ", ".join(f"{h['epoch']}: {h['dev_sentence_f1']:.2f}" for h in report["history"])
    print(
        f"syntaxformer distill: {report['sentences']:,} sentences ({report['setting']}); dev sentence F1 by "
        f"epoch {history}; kept epoch {report['kept_epoch']} -> {args.out}/model"
    )
    return 0
