"""BLEU for translation, both ways the Multi30k literature reports it, through ``sacrebleu``.

* :func:`tokenized_bleu`: BLEU-4 on lower-cased, Moses-tokenised hypotheses and references, split on
  whitespace only (``tokenize="none"``): what ``multi-bleu.perl`` and fairseq's ``--scoring bleu``
  give on the ``tok/`` files, and what most published Multi30k numbers are.
* :func:`detokenized_bleu`: sacreBLEU (Post, WMT 2018) on detokenised output against the raw
  references, with its signature (``13a`` tokenisation; ``case:lc`` when the model writes lower case:
  a lower-cased model cannot be scored against cased text fairly). Not comparable with the first.
* :func:`paired_bootstrap`: paired bootstrap resampling (Koehn, EMNLP 2004) of systems against a
  baseline, ``sacrebleu``'s implementation (1,000 samples): the p-value of each difference.

Scores are percentages (0-100).
"""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import BLEU

from syntaxformer.errors import InputError


def _check(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise InputError(f"{len(hypotheses)} translations against {len(references)} references")


def tokenized_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """BLEU-4 of tokenised, lower-cased lines (module docstring).

    Returns:
        ``{"bleu": score, "precisions": [p1..p4], "brevity_penalty": bp, "signature": str}``.
    Raises:
        InputError: different numbers of lines.
    """
    _check(hypotheses, references)
    metric = BLEU(tokenize="none", lowercase=True, force=True)
    score = metric.corpus_score([h.lower() for h in hypotheses], [[r.lower() for r in references]])
    return dict(
        bleu=round(score.score, 2),
        precisions=[round(p, 2) for p in score.precisions],
        brevity_penalty=round(score.bp, 4),
        signature=str(metric.get_signature()),
    )


def detokenized_bleu(hypotheses: Sequence[str], references: Sequence[str], lowercase: bool) -> dict:
    """sacreBLEU of detokenised lines against raw references, with its signature (module docstring).

    Raises:
        InputError: different numbers of lines.
    """
    _check(hypotheses, references)
    metric = BLEU(lowercase=lowercase)
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return dict(bleu=round(score.score, 2), signature=str(metric.get_signature()))


def paired_bootstrap(baseline: Sequence[str], systems: dict[str, Sequence[str]], references: Sequence[str]) -> dict:
    """Paired bootstrap resampling of ``systems`` against ``baseline`` on tokenised lines
    (``sacrebleu``'s ``paired_bs``, 1,000 resamples, its fixed seed).

    Returns:
        ``{name: {"bleu": score, "baseline_bleu": score, "p_value": p}}`` (p: the share of resamples
        where the difference does not hold, sacreBLEU's definition).
    """
    from sacrebleu.significance import PairedTest

    for hypotheses in [baseline, *systems.values()]:
        _check(hypotheses, references)
    metric = BLEU(tokenize="none", lowercase=True, force=True)
    named = [("baseline", list(baseline)), *((k, list(v)) for k, v in systems.items())]
    test = PairedTest(named, {"BLEU": metric}, [list(references)], test_type="bs", n_samples=1000)
    _, results = test()
    base, others = results["BLEU"][0], results["BLEU"][1:]
    return {
        name: dict(bleu=round(result.score, 2), baseline_bleu=round(base.score, 2), p_value=result.p_value)
        for (name, _), result in zip(named[1:], others)
    }


__all__ = ["tokenized_bleu", "detokenized_bleu", "paired_bootstrap"]
