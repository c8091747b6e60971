"""``docs/results/ensemble.md``: the ensemble of induced parsers, its members, the students distilled from
it and right-branching, beside the published ensemble (``ensemble``). (The README's ensemble row is
:mod:`benchmarks.tools.results.readme`'s.)

Data: ``records/ensemble/ensemble.json``.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.tools.results.core import load, markdown, table
from syntaxformer.pretrained import SHIPPED as SHIPPED_PARSERS

ENSEMBLE_JSON = "records/ensemble/ensemble.json"
#: the published ensemble of the ensemble-distillation paper, in its own setting
ENSEMBLE_PUBLISHED = [
    [
        "*published*: Shayegh et al. (ICLR 2024), ensemble of seven induced parsers (tree averaging); "
        "mean over runs, best 71.9 (as Papers with Code lists it)",
        "–",
        "70.4 (WSJ test)",
        "–",
        "–",
    ]
]


def _parser_label(record: dict, shipped_names: tuple = SHIPPED_PARSERS) -> str:
    name = Path(record["model"]).name
    return f"`{name}`" if name in shipped_names else name


def _student_label(student: dict) -> str:
    job = student["job"]
    size = f", {job['parser_layers']} parse layers" if job.get("parser_layers") else ""
    held = "held out: ptb-sample's sentences removed from the text" if job.get("exclude_treebank") else "transductive"
    return (
        f"student: `{Path(job['student']).name}` distilled from `{job['teacher']}` ({held}; {student['sentences']:,} "
        f"sentences, epoch {student['kept_epoch']} of {job['epochs']}, train {job['train']}{size})"
    )


@table("ensemble")
def ensemble_table() -> str:
    """Members, their ensemble (weights chosen on dev), the distilled students and right-branching: sentence
    F1 on ptb-sample's halves and UD-EWT (and its margin over right-branching), parse speed on the test half."""
    r = load(ENSEMBLE_JSON)
    rb = r["right_branching"]

    def cells(label: str, record: dict) -> list[str]:
        ud = record.get("ud-ewt")
        ud_cell = f"{ud['sentence_f1']:.2f} ({ud['sentence_f1'] - rb['ud-ewt']['sentence_f1']:+.2f})" if ud else "–"
        speed = record["test"].get("sentences_per_second")
        return [
            label,
            f"{record['dev']['sentence_f1']:.2f}",
            f"**{record['test']['sentence_f1']:.2f}**",
            ud_cell,
            f"{speed:,.0f}" if speed else "–",
        ]

    chosen = r["ensemble_chosen"]
    weights = ", ".join(f"{w:g}" for w in chosen["weights"])
    rows = [cells(f"member {_parser_label(m)}", m) for m in r["members"]]
    rows.append(cells(f"**ensemble** of the {len(r['members'])} (weights {weights}, chosen on dev)", chosen))
    rows += [cells(_student_label(s), s) for s in r["students"]]
    rows.append(cells("right-branching", {k: v | {"sentences_per_second": None} for k, v in rb.items()}))
    rows += ENSEMBLE_PUBLISHED
    header = ["parser", "dev sentence F1", "test sentence F1", "UD-EWT F1 (− right-branching)", "sentences/s (test)"]
    return markdown(header, rows, "lrrrr")


#: the shipped ensemble's record (the PCFG among its candidates), the one shipped before it (three parsers
#: and the right-branching voter: the same candidates without a PCFG), and an earlier trial of a PCFG member
PCFG_JSON = "records/ensemble/ensemble-pcfg.json"
VOTERS_JSON = "records/ensemble/ensemble-voters.json"
NPCFG_TRIAL_JSON = "records/ensemble/ensemble-npcfg-40min.json"


def _ensemble_row(label: str, record: dict, rb: dict) -> list[str]:
    ud = record.get("ud-ewt")
    ud_cell = f"{ud['sentence_f1']:.2f} ({ud['sentence_f1'] - rb['ud-ewt']['sentence_f1']:+.2f})" if ud else "–"
    return [label, f"{record['dev']['sentence_f1']:.2f}", f"**{record['test']['sentence_f1']:.2f}**", ud_cell]


def _members(record: dict, model_folder: str = "Neural PCFG (`--recipe cpu`)") -> str:
    """``record``'s chosen members with their weights, "name × weight"; a member given by a run's ``…/model``
    folder is called ``model_folder`` (None: by its run folder's name)."""

    def name(path: Path) -> str:
        if path.name != "model":
            return path.name
        return model_folder if model_folder is not None else path.parent.name

    names = [name(Path(m["model"])) for m in record["members"]]
    return ", ".join(f"{n} × {w:g}" for n, w in zip(names, record["ensemble_chosen"]["weights"]))


ENSEMBLE_HEADER = [
    "ensemble (members × weights)",
    "dev sentence F1",
    "test sentence F1",
    "UD-EWT F1 (− right-branching)",
]


@table("ensemble-today")
def ensemble_today() -> str:
    """The shipped ensemble (members and weights chosen on dev among the shipped parsers, a Neural PCFG run and
    the baseline voters), the best of the same candidates without a PCFG (the PCFG's share), right-branching."""
    pcfg, voters = load(PCFG_JSON), load(VOTERS_JSON)
    rb = pcfg["right_branching"]
    rows = [
        _ensemble_row(f"**`ensemble-ptb-lm`** (shipped): {_members(pcfg)}", pcfg["ensemble_chosen"], rb),
        _ensemble_row(f"without a PCFG among the candidates: {_members(voters)}", voters["ensemble_chosen"], rb),
        _ensemble_row("right-branching", rb, rb),
    ]
    return markdown(ENSEMBLE_HEADER, rows, "lrrr")


@table("ensemble-history")
def ensemble_history() -> str:
    """The ensembles shipped or tried before: the one without a PCFG, the three parsers' equal vote, and the
    first trial of a PCFG member (a 40-minute Neural PCFG run)."""
    voters, before, trial = load(VOTERS_JSON), load(ENSEMBLE_JSON), load(NPCFG_TRIAL_JSON)
    rb = voters["right_branching"]
    rows = [
        _ensemble_row(f"shipped before this one: {_members(voters)}", voters["ensemble_chosen"], rb),
        _ensemble_row("shipped before that: the three parsers alone, equal weights", before["ensemble_chosen"], rb),
        _ensemble_row(
            f"tried, not shipped: the Neural PCFG's 40-minute run a candidate: {_members(trial)}",
            trial["ensemble_chosen"],
            rb,
        ),
    ]
    return markdown(ENSEMBLE_HEADER, rows, "lrrr")


#: the student's two stages, each stage's students scored beside the ensemble, the best tried as a member
TWO_STAGE_JSON = "records/ensemble/two-stage.json"


def _stage(job: dict) -> str:
    """A student's stage and loss: the first (the teacher's trees, from a shipped model), or a second one
    from a student (``model/`` of a ``distill`` run): the trees beside its masked LM, either alone."""
    tree, mlm = job.get("tree_weight", 1.0), job.get("mlm_weight", 0.0)
    if Path(job["student"]).name != "model":
        return "1: the teacher's trees"
    if not mlm:
        return "2: the trees alone (imitation continued, the control)"
    return f"2: {tree:g} × trees + {mlm:g} × masked LM" if tree else f"2: {mlm:g} × masked LM alone"


@table("ensemble-students")
def ensemble_students() -> str:
    """The teacher, the student after each stage (the epoch kept on dev) and the ensemble chosen on dev with
    the best student among its candidates: sentence F1 on ptb-sample's halves and UD-EWT."""
    voters, r = load(VOTERS_JSON), load(TWO_STAGE_JSON)
    rb = voters["right_branching"]
    rows = [
        _ensemble_row(f"teacher: `ensemble-ptb-lm` as shipped then, {_members(voters)}", voters["ensemble_chosen"], rb)
    ]
    for student in r["students"]:
        job = student["job"]
        label = f"student, stage {_stage(job)} (epoch {student['kept_epoch']} of {job['epochs']}, lr {job['lr']:g})"
        rows.append(_ensemble_row(label, student, rb))
    members = _members(r, model_folder=None)
    rows.append(
        _ensemble_row(f"ensemble chosen on dev with the student a candidate: {members}", r["ensemble_chosen"], rb)
    )
    return markdown(["parser", "dev sentence F1", "test sentence F1", "UD-EWT F1 (− right-branching)"], rows, "lrrr")
