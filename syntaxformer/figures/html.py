"""``index.html``: every figure of a ``syntaxformer show`` run on one page, for quick browsing."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #212529; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; border-top: 1px solid #ccc;
padding-top: 0.8em; } figure { margin: 1em 0; } img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #495057; } pre { background: #f8f9fa; padding: 0.5em;
overflow-x: auto; } .meta { color: #495057; font-size: 0.9em; }
"""


def write_index(
    out_dir: str | Path,
    title: str,
    sections: Sequence[tuple[str, Sequence[tuple[str, str | Path]]]],
    meta: str = "",
    notes: Sequence[str] = (),
) -> Path:
    """Write ``out_dir/index.html`` showing every figure, grouped in sections.

    Args:
        out_dir: the folder holding the figures; the page links them by relative path.
        title: page heading.
        sections: ``(heading, figures)`` pairs, one per sentence, where ``figures`` is a list of
            ``(caption, path of the PNG)``; each image links to its SVG when one sits beside it.
        meta: one line under the title (model, data, seed).
        notes: extra lines shown at the end (for example figures that could not be drawn).

    Returns:
        The path of the page written.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if meta:
        parts.append(f'<p class="meta">{html.escape(meta)}</p>')
    for heading, figures in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        for caption, png in figures:
            png = Path(png)
            rel = Path(os.path.relpath(png if png.is_absolute() else out_dir / png, out_dir))
            src = html.escape(rel.as_posix(), quote=True)
            svg = rel.with_suffix(".svg")
            img = f'<img src="{src}" alt="{html.escape(caption, quote=True)}" loading="lazy">'
            if (out_dir / svg).exists():
                img = f'<a href="{html.escape(svg.as_posix(), quote=True)}">{img}</a>'
            parts.append(f"<figure>{img}<figcaption>{html.escape(caption)}</figcaption></figure>")
    if notes:
        parts.append("<h2>Notes</h2><ul>")
        parts.extend(f"<li>{html.escape(note)}</li>" for note in notes)
        parts.append("</ul>")
    parts.append("</body></html>")
    path = out_dir / "index.html"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
