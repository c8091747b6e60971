"""``docs/guide/parse.md``: the shipped parsers (``shipped-parsers``): each parser of
``syntaxformer.pretrained.SHIPPED`` (the default first) with its training, its dev- and test-half sentence
F1 and its size.

Data: each shipped parser's folder, ``syntaxformer/pretrained/NAME/``: its ``report.json`` (with
``training.json``'s minutes, :func:`~benchmarks.tools.results.core.shipped_report`) and the size of its
``model.safetensors``.
"""

from __future__ import annotations

from benchmarks import ROOT
from benchmarks.tools.results.core import SHIPPED_REPORT, markdown, part_scores, shipped_report, table
from syntaxformer.pretrained import SHIPPED as SHIPPED_PARSERS


@table("shipped-parsers")
def shipped_parsers_table() -> str:
    """The parse guide: each shipped parser (``syntaxformer.pretrained.SHIPPED``, the default first) with
    its training, its dev- and test-half sentence F1 (the default is the best on dev) and its size."""
    rows = []
    for i, name in enumerate(SHIPPED_PARSERS):
        report = shipped_report(SHIPPED_REPORT.format(name))
        training = report["training"]
        planned = training.get("planned_steps") or training["steps"]
        steps = f"{training['steps']:,} steps" + (
            f" of a {planned:,}-step schedule" if planned != training["steps"] else ""
        )
        if "distilled" in report:  # a student: the model it started from, then its stages
            stages = report["distilled"]["stages"]
            epochs = " + ".join(str(s["kept_epoch"]) for s in stages)
            steps += f" (the default's), then distilled from `{stages[0]['job']['teacher']}` ({epochs} epochs)"
        rows.append(
            [
                f"`{name}`" + (" (default)" if i == 0 else ""),
                f"{report['model']} `{report['preset']}`",
                f"{steps}, {report['data'].get('recipe_text') or report['data']['train']}",
                f"{part_scores([report], 'dev')[0]:.2f}",
                f"**{part_scores([report], 'test')[0]:.2f}**",
                f"{(ROOT / SHIPPED_REPORT.format(name)).with_name('model.safetensors').stat().st_size / 2**20:.1f} MB",
            ]
        )
    return markdown(["name", "model", "training", "dev F1", "test F1", "size"], rows, "lllrrr")
