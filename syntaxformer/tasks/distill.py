"""Distilling a parser ensemble into one student: the ensemble's trees taught to one model's syntactic
distances, from unlabelled text only.

Ensemble-then-distill (Shayegh et al., "Ensemble Distillation for Unsupervised Constituency Parsing",
ICLR 2024, §2.3): the teacher, an :class:`~syntaxformer.parser.EnsembleParser`, parses the training text
(never a gold tree); a student learns to give those trees. Here the student is a model whose tree is
the top-down split of its **syntactic distances** (a StructFormer: ``parser_distances``, paper §4.2),
so the teacher's binary tree is given to it as target distances (:func:`~syntaxformer.decoding.spans.tree_distances`:
per word gap, the length of the constituent it splits) and the student learns their **order** with the
pairwise ranking loss of Shen et al., "Straight to the Tree" (ACL 2018, §3.3):

    L = mean over gap pairs (i, j) with t_i != t_j of  relu(1 - sign(t_i - t_j) * (d_i - d_j))

(:func:`rank_loss`; ``d`` the student's distances, ``t`` the targets). Only the ranking within a
sentence matters: the split of any distances that order every constituent's gaps as the targets do
is the teacher's tree. Trained are the parameters of the student's parse network (``--train``
``parser``, the default: its convolutions and distance and height heads; the word embeddings and the
Transformer layers are kept, so its masked LM keeps its words) or all of them (``all``).

**The second stage** (``--mlm-weight``; Shayegh et al. §2.3 fine-tune their student with its own
unsupervised objective after imitation; Mohananey, Kann & Bowman, "Self-Training for Unsupervised
Parsing with PRPN", 2020, keep the language-model loss while learning from trees): the student, usually
the first stage's, learns from the teacher's trees and from its **own masked-LM objective** at once,

    L = tree_weight * L_rank + mlm_weight * L_MLM

``L_MLM`` the cross-entropy (nats) at the tokens masked by the student's own training rule (its
``training.json``'s ``mask_rate`` and ``mask_replace``; BERT's 0.15 and 80/10/10 when it has none:
:class:`~syntaxformer.training.objectives.MaskedLM`). With ``--train all`` every weight is free; the
mixture is chosen on dev as the epoch is.

Each epoch ends with the student's sentence F1 on a development treebank (ptb-sample's dev half by
default; its trees only choose the epoch kept, as the rest of the project chooses on dev); the
epoch of the highest is kept. The output folder is an ``induce``-style folder: ``model/`` (with
``decoder.json``), ``report.json``; ``teacher.jsonl`` caches the teacher's trees so that a repeated run,
or one over part of the same text (``--exclude-treebank``), does not parse again.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import SimpleNamespace

import torch

from syntaxformer.data.batching import pad_batch
from syntaxformer.data.corpus import exclude_treebank, load_corpus
from syntaxformer.data.preprocess import load_gold_trees
from syntaxformer.data.tokenization import encode, save_tokenizer
from syntaxformer.decoding.spans import brackets, tree_distances
from syntaxformer.errors import InputError
from syntaxformer.evaluation.constituency import bracket_scores
from syntaxformer.parser import Parser, TreeParser, load_parser
from syntaxformer.parsing import load_model, resolve_decoder_options
from syntaxformer.pretrained import model_folder
from syntaxformer.runtime import code_version
from syntaxformer.structures import DecoderOptions, save_decoder_options
from syntaxformer.training.arguments import DataArguments, TrainArguments, check_choices, option, same_option
from syntaxformer.training.mlm import unmasked_ids
from syntaxformer.training.objectives import MaskedLM

logger = logging.getLogger(__name__)

#: which parameters learn: the parse network only, or the whole model
TRAINED = ("parser", "all")
TEACHER_FILE = "teacher.jsonl"
#: learning-rate schedules: constant, or linear decay to 0 over the run's batches
SCHEDULES = ("constant", "linear")


@dataclass
class DistillJob:
    """One distillation run (``syntaxformer distill``'s options).

    Attributes:
        out: output folder.
        teacher: the teacher parser (an ensemble's name, folder or members joined by ``,``).
        student: the model folder (or shipped name) the student starts from; its parser must give
            ``parser_distances`` (a StructFormer).
        corpus: the unlabelled training text (:func:`~syntaxformer.data.corpus.load_corpus` spec).
        exclude_treebank: drop this treebank's sentences from ``corpus`` (the held-out setting).
        dev_treebank: the treebank whose sentence F1 chooses the epoch kept.
        epochs, batch_size, lr, schedule, seed: the optimisation (Adam, :data:`SCHEDULES`).
        train: :data:`TRAINED`.
        tree_weight, mlm_weight: the mixture of the tree loss and the student's masked LM (the second
            stage; module docstring); mlm_weight 0 is the first stage alone.
        clip: the gradients' largest global norm (None: not clipped).
        max_sentences: use only the first this many sentences of the text (None: all).
        threads: CPU threads (None: PyTorch's default).
    """

    out: str = option(help="output folder (model/, report.json, teacher.jsonl)")
    teacher: str = option(
        "ensemble-ptb-lm",
        help="the teacher: a shipped ensemble's name, an ensemble folder, or models joined by ','",
    )
    student: str = option(
        "structformer-ptb-lm",
        help="the model the student starts from (a folder or shipped name; a StructFormer, whose trees are "
        "the split of its syntactic distances)",
    )
    corpus: str = option(
        "ptb-sample",
        help="the unlabelled training text (as train's --corpus: ptb-sample, wikitext-2, text files, comma-separated)",
    )
    exclude_treebank: str | None = same_option(DataArguments, "exclude_treebank")
    dev_treebank: str = option("ptb-sample:dev", help="the treebank whose sentence F1 chooses the epoch kept")
    epochs: int = option(3, help="passes over the text")
    batch_size: int = option(64, help="sentences per batch")
    lr: float = option(1e-3, help="Adam's learning rate (the peak of --schedule)")
    schedule: str = option(
        "constant",
        choices=SCHEDULES,
        help="the learning rate over the run: constant, or linear decay to 0 at the last batch",
    )
    seed: int = option(0, help="random seed (batch order)")
    train: str = option("parser", choices=TRAINED, help="what learns: the parse network only, or all the weights")
    tree_weight: float = option(1.0, help="weight of the tree (ranking) loss")
    mlm_weight: float = option(
        0.0,
        help="weight of the student's own masked-LM loss beside the tree loss (the second stage; its "
        "training.json's masking rule); 0: the trees alone",
    )
    clip: float | None = option(None, help="clip the gradients' global norm to this (default: not clipped)")
    parser_layers: int | None = option(
        None,
        help="give the student this many convolution layers in its parse network: the student's own first, "
        "new ones (randomly initialised) after them; a wider view of the sentence (default: the student's own)",
    )
    max_sentences: int | None = option(None, help="use only the first this many sentences of the text (default: all)")
    threads: int | None = option(None, help="CPU threads (default: PyTorch's)")

    def check(self) -> None:
        """Raises InputError for an option out of range."""
        check_choices(self)
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError(f"--lr must be a positive number, got {self.lr}")
        for name in ("tree_weight", "mlm_weight"):
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                raise InputError(f"--{name.replace('_', '-')} must be a number >= 0, got {getattr(self, name)}")
        if self.tree_weight == 0 and self.mlm_weight == 0:
            raise InputError("--tree-weight and --mlm-weight are both 0: nothing to learn")
        if self.clip is not None and not self.clip > 0:
            raise InputError(f"--clip must be positive, got {self.clip}")


def rank_loss(distances: torch.Tensor, targets: torch.Tensor, gap_mask: torch.Tensor) -> torch.Tensor:
    """The pairwise ranking loss of syntactic distances (Shen et al., ACL 2018, §3.3; module docstring).

    Args:
        distances: ``(B, G)`` the student's distances of the word gaps.
        targets: ``(B, G)`` the teacher's (:func:`~syntaxformer.decoding.spans.tree_distances`).
        gap_mask: ``(B, G)`` bool, True at the gaps between two words of the sentence.
    Returns:
        The mean hinge over every pair of a sentence's gaps whose targets differ (0 when there is none).
    """
    sign = torch.sign(targets[:, :, None] - targets[:, None, :])  # (B, G, G)
    pairs = (sign != 0) & gap_mask[:, :, None] & gap_mask[:, None, :]  # (B, G, G)
    hinge = torch.relu(1.0 - sign * (distances[:, :, None] - distances[:, None, :]))  # (B, G, G)
    return (hinge * pairs).sum() / pairs.sum().clamp(min=1)


def teacher_targets(job: DistillJob, sentences: list[list[str]], out: Path) -> list[list[int]]:
    """The teacher's tree of every sentence, as target distances. ``OUT/teacher.jsonl`` keeps them, a
    sentence per line: a sentence found there (a repeated, resumed or filtered run over the same text)
    is not parsed again; the others are parsed, 2,048 at a time, and added to it."""
    cache = out / TEACHER_FILE
    known: dict[tuple[str, ...], list[int]] = {}
    if cache.is_file():
        for line in cache.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            known[tuple(row["words"])] = row["distances"]
    missing = list({tuple(s): None for s in sentences if tuple(s) not in known})
    logger.info("teacher trees: %d of %d sentences in %s", len(sentences) - len(missing), len(sentences), cache)
    if missing:
        teacher, start = load_parser(job.teacher), time.monotonic()
        with cache.open("a", encoding="utf-8") as f:
            for first in range(0, len(missing), 2048):
                chunk = [list(words) for words in missing[first : first + 2048]]
                for words, spans in zip(chunk, teacher.word_parses(chunk)[0]):
                    known[tuple(words)] = tree_distances(spans, len(words))
                    f.write(json.dumps({"words": words, "distances": known[tuple(words)]}) + "\n")
                done = min(first + 2048, len(missing))
                logger.info(
                    "teacher: %d of %d sentences parsed (%.1f min)", done, len(missing), (time.monotonic() - start) / 60
                )
    return [known[tuple(s)] for s in sentences]


def student_model(folder: Path, parser_layers: int | None = None):
    """The student's model (evaluation mode) and tokenizer from ``folder``; with ``parser_layers``, the
    same model with that many parse-network layers: its weights copied, layers beyond its own new.

    Raises:
        InputError: a model without ``parser_distances`` (not a StructFormer), or ``parser_layers`` below 1.
    """
    model, tokenizer, _ = load_model(folder)
    if not hasattr(model, "parser_distances"):
        raise InputError(
            f"the student must be a model with a syntactic-distance parser (a StructFormer), not {type(model).__name__}",
            path=folder,
        )
    if parser_layers is None or parser_layers == model.config.n_parser_layers:
        return model, tokenizer
    if parser_layers < 1:
        raise InputError(f"--parser-layers must be at least 1, got {parser_layers}")
    config = copy.deepcopy(model.config)
    config.n_parser_layers = parser_layers
    torch.manual_seed(0)
    wider = type(model)(config)
    wider.load_state_dict(model.state_dict(), strict=False)  # the new layers keep their initialisation
    return wider.eval(), tokenizer


#: the masking settings a student without ``training.json`` (or without one of them) is given
_MASKING = ("mask_rate", "mask_replace", "mask_unknown", "mask_cls")


def student_masking(folder: Path, tokenizer) -> tuple[MaskedLM, dict]:
    """The student's own masked-LM objective: the masking rule of its ``training.json`` (``mask_rate``,
    ``mask_replace``, ``mask_unknown``, ``mask_cls``; ``train``'s defaults for any it lacks), and those
    settings (for the report). Never selected: padding, ``[MASK]``, ``[CLS]`` unless ``mask_cls``,
    ``[UNK]`` unless ``mask_unknown`` (as ``train`` does).

    Raises:
        InputError: a tokenizer without ``[MASK]``; an unreadable ``training.json``.
    """
    defaults = {f.name: f.default for f in fields(TrainArguments) if f.name in _MASKING}
    recorded: dict = {}
    path = folder / "training.json"
    if path.is_file():
        try:
            recorded = json.loads(path.read_text(encoding="utf-8")).get("arguments", {})
        except (json.JSONDecodeError, AttributeError) as exc:
            raise InputError(f"unreadable training record ({exc})", path=path) from None
    settings = {name: recorded.get(name, default) for name, default in defaults.items()}
    unmasked = unmasked_ids(tokenizer, settings["mask_cls"], settings["mask_unknown"])
    args = SimpleNamespace(**settings, batch_size=None, pad_to_multiple=None, fixed_shapes=False)
    return MaskedLM(args, tokenizer, unmasked), settings


def _batches(lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Sentence indices in batches of similar length, in a shuffled order."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def dev_f1(parser: TreeParser, words: list[list[str]], gold: list[set]) -> float:
    """Sentence F1 (percent) of ``parser``'s trees of ``words`` against ``gold`` brackets."""
    spans = parser.word_parses(words)[0]
    return bracket_scores(spans, gold, [len(w) for w in words])["sentence_f1"]


def _encoded(tokenizer, sentences: list[list[str]]) -> list[list[int]]:
    """Token ids, one token per word (the student's word tokenizer).

    Raises:
        InputError: a tokenizer that does not give one token per word.
    """
    ids, word_ids = encode(tokenizer, sentences)
    for i, (row, words) in enumerate(zip(word_ids, sentences)):
        if row != list(range(len(words))):
            raise InputError("the student's tokenizer must give one token per word (a word tokenizer)", sentence=i + 1)
    return ids


def distill(job: DistillJob) -> dict:
    """Train the student on the teacher's trees (module docstring); returns the report (also written).

    Raises:
        InputError: bad options, an unreadable corpus, teacher or student, a student without
            ``parser_distances``, or a tokenizer without one token per word.
    """
    job.check()
    if job.threads is not None:
        torch.set_num_threads(job.threads)
    torch.manual_seed(job.seed)
    out = Path(job.out)
    out.mkdir(parents=True, exist_ok=True)
    sentences = [s for s in load_corpus(job.corpus) if len(s) >= 2]
    excluded = None
    if job.exclude_treebank is not None:
        sentences, excluded = exclude_treebank(sentences, job.exclude_treebank)
    sentences = sentences[: job.max_sentences] if job.max_sentences else sentences
    if not sentences:
        raise InputError("no training sentence of two or more words", path=job.corpus)
    folder = model_folder(job.student)
    model, tokenizer = student_model(folder, job.parser_layers)
    options = resolve_decoder_options(folder)
    # the trees are not needed when only the masked LM learns (a control of the second stage)
    targets = teacher_targets(job, sentences, out) if job.tree_weight > 0 else [[0] * (len(w) - 1) for w in sentences]
    ids = _encoded(tokenizer, sentences)
    gold_trees = load_gold_trees(job.dev_treebank)
    dev_words, dev_gold = [t.leaves() for t in gold_trees], [brackets(t) for t in gold_trees]
    masking, mask_settings = student_masking(folder, tokenizer) if job.mlm_weight > 0 else (None, None)
    student = _Student(model, tokenizer, options, folder)
    history = [{"epoch": 0, "dev_sentence_f1": round(dev_f1(student.parser(), dev_words, dev_gold), 2)}]
    logger.info("epoch 0 (the student as it starts): dev sentence F1 %.2f", history[0]["dev_sentence_f1"])
    best = history[0]["dev_sentence_f1"]
    student.save(out / "model")
    trained = model.structformer.parser.parameters() if job.train == "parser" else model.parameters()
    optimizer = torch.optim.Adam([p for p in trained if p.requires_grad], lr=job.lr)
    total = job.epochs * math.ceil(len(ids) / job.batch_size)
    decay = (lambda step: 1.0 - step / total) if job.schedule == "linear" else (lambda step: 1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, decay)
    rng, start = random.Random(job.seed), time.monotonic()
    step = _Step(model, optimizer, scheduler, job, masking, torch.Generator().manual_seed(job.seed))
    for epoch in range(1, job.epochs + 1):
        batches = _batches([len(s) for s in ids], job.batch_size, rng)
        losses = _epoch(step, ids, targets, tokenizer.pad_token_id, batches)
        f1 = round(dev_f1(student.parser(), dev_words, dev_gold), 2)
        history.append(
            {
                "epoch": epoch,
                **{name: round(value, 4) for name, value in losses.items()},
                "dev_sentence_f1": f1,
                "minutes": round((time.monotonic() - start) / 60, 2),
            }
        )
        logger.info("epoch %d: %s, dev sentence F1 %.2f", epoch, losses, f1)
        if f1 > best:
            best = f1
            student.save(out / "model")
    report = _report(job, len(sentences), excluded, mask_settings, history)
    report["decoder"] = options.to_dict()
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def _report(job: DistillJob, sentences: int, excluded: int | None, masking: dict | None, history: list) -> dict:
    """The run's report: the job, the text, the loss, the history by epoch and the epoch kept."""
    return {
        "job": asdict(job),
        "sentences": sentences,
        "excluded_sentences": excluded,
        "setting": "held-out: " + job.exclude_treebank + "'s sentences removed from the text"
        if job.exclude_treebank
        else "transductive: the text may hold the scored sentences",
        "loss": f"{job.tree_weight} * rank + {job.mlm_weight} * masked LM (nats)"
        if job.mlm_weight > 0
        else "rank (the trees alone)",
        "masked_lm": masking,
        "history": history,
        "kept_epoch": max(history, key=lambda h: (h["dev_sentence_f1"], -h["epoch"]))["epoch"],
        "dev_sentence_f1": max(h["dev_sentence_f1"] for h in history),
        "code": code_version(),
        "torch": torch.__version__,
    }


class _Step:
    """One optimisation step on a batch: the tree loss and, with ``mlm_weight``, the student's masked LM."""

    def __init__(self, model, optimizer, scheduler, job: DistillJob, masking: MaskedLM | None, generator):
        self.model, self.optimizer, self.scheduler, self.job = model, optimizer, scheduler, job
        self.masking, self.generator = masking, generator

    def __call__(self, sequences: list[list[int]], targets: list[list[int]], pad_id: int) -> dict[str, float]:
        """Learn from one batch (token ids and the teacher's target distances per sentence); its losses."""
        job, model = self.job, self.model
        input_ids, attention_mask = pad_batch(sequences, pad_id)  # (B, N), (B, N)
        target = torch.zeros(len(sequences), input_ids.shape[1] - 1)  # (B, G)
        for row, t in enumerate(targets):
            target[row, : len(t)] = torch.tensor(t, dtype=torch.float32)
        gap_mask = (attention_mask[:, :-1] * attention_mask[:, 1:]).bool()  # (B, G)
        losses = {}
        loss = torch.zeros(())
        if job.tree_weight > 0:
            rank = rank_loss(model.parser_distances(input_ids, attention_mask), target, gap_mask)
            loss, losses["train_rank_loss"] = loss + job.tree_weight * rank, rank.item()
        if self.masking is not None:
            masked = self.masking.batch(sequences, self.generator)
            mlm = model(
                masked.input_ids,
                masked.attention_mask,
                labels=masked.labels,
                masked_only=True,
                masked_positions=masked.masked_positions,
            ).loss
            loss, losses["train_mlm_loss"] = loss + job.mlm_weight * mlm, mlm.item()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if job.clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), job.clip)
        self.optimizer.step()
        self.scheduler.step()
        return losses


def _epoch(step: _Step, ids, targets, pad_id: int, batches: list[list[int]]) -> dict[str, float]:
    """One pass over the batches; the mean of each loss."""
    step.model.train()
    totals: dict[str, float] = {}
    for batch in batches:
        for name, value in step([ids[i] for i in batch], [targets[i] for i in batch], pad_id).items():
            totals[name] = totals.get(name, 0.0) + value
    step.model.eval()
    return {name: total / max(len(batches), 1) for name, total in totals.items()}


class _Student:
    """The student model as a parser and as the folder written for it."""

    def __init__(self, model, tokenizer, options: DecoderOptions, source: Path):
        self.model, self.tokenizer, self.options, self.source = model, tokenizer, options, source

    def parser(self) -> TreeParser:
        return Parser(self.model, self.tokenizer, self.options, name="student")

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder, safe_serialization=True)
        save_tokenizer(self.tokenizer, folder)
        save_decoder_options(folder, self.options)
        training = self.source / "training.json"
        if training.is_file():
            (folder / "training.json").write_text(training.read_text(encoding="utf-8"), encoding="utf-8")


__all__ = ["DistillJob", "distill", "rank_loss", "student_masking", "teacher_targets", "TRAINED"]
