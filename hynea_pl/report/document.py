"""A report as a tree of sections (text, tables, figures), rendered to one HTML page and to markdown.

The HTML page needs no server: styles are inline and figures are PNG files referenced by paths relative to the
page. Table cells are shown with :func:`hynea_pl.report.compare.format_value` (3 significant digits, ``-`` for
missing), the one formatting rule of every report table.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import pandas as pd

from hynea_pl.report.compare import format_value, to_markdown

__all__ = ["Figure", "Section", "Table", "Text", "display_frame", "render_html", "render_markdown"]


@dataclass
class Text:
    """A paragraph; `code` spans in backticks are kept in markdown and shown as code in HTML."""

    text: str


@dataclass
class Table:
    """A table with an anchor id and a caption; the index is shown as columns unless it is a plain range."""

    frame: pd.DataFrame
    id: str
    caption: str = ""


@dataclass
class Figure:
    """A PNG beside the page (``src`` relative to the report folder); ``wide`` figures scroll instead of shrinking
    (galleries keep their upscaled pixels)."""

    src: str
    caption: str
    id: str
    wide: bool = False


@dataclass
class Section:
    """A titled section holding blocks and nested sections, in order."""

    title: str
    id: str
    blocks: list[Text | Table | Figure | Section] = field(default_factory=list)

    def add(self, *blocks: Text | Table | Figure | Section) -> Section:
        self.blocks.extend(blocks)
        return self


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as shown: a non-range index becomes leading columns, every cell a formatted string."""
    if not isinstance(frame.index, pd.RangeIndex):
        frame = frame.reset_index()
    frame = frame.copy()
    frame.columns = [str(c) for c in frame.columns]
    return frame.astype(object).map(format_value)


_CODE = re.compile(r"`([^`]+)`")


def _inline_html(text: str) -> str:
    """Escaped text with `code` spans; line breaks kept."""
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text)).replace("\n", "<br>\n")


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
table.data { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
div.scroll { overflow-x: auto; max-width: 100%; }
table.data th, table.data td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
table.data td { white-space: nowrap; }
table.data th { background: #f0f0f0; }
table.data td:first-child, table.data th:first-child { text-align: left; }
figure { margin: 0.5em 0 1.5em; }
figure img { max-width: 100%; }
figure.wide { overflow-x: auto; }
figure.wide img { max-width: none; image-rendering: pixelated; }
figcaption { font-size: 0.9em; color: #555; }
p.note { color: #444; }
nav li { margin: 0.1em 0; }
"""


def _html_block(block: Text | Table | Figure | Section, level: int) -> list[str]:
    if isinstance(block, Section):
        lines = [f'<section id="{html.escape(block.id)}">', f"<h{level}>{html.escape(block.title)}</h{level}>"]
        for child in block.blocks:
            lines += _html_block(child, min(level + 1, 6))
        return lines + ["</section>"]
    if isinstance(block, Text):
        return [f'<p class="note">{_inline_html(block.text)}</p>']
    if isinstance(block, Table):
        table = display_frame(block.frame).to_html(index=False, table_id=block.id, classes="data", border=0,
                                                   escape=True, na_rep="-")
        caption = f"<p><strong>{_inline_html(block.caption)}</strong></p>" if block.caption else ""
        return [caption, f'<div class="scroll">{table}</div>']  # a wide table scrolls, the page keeps its width
    css = ' class="wide"' if block.wide else ""
    return [f'<figure id="{html.escape(block.id)}"{css}>',
            f'<img src="{html.escape(block.src)}" alt="{html.escape(block.caption)}">',
            f"<figcaption>{_inline_html(block.caption)}</figcaption>", "</figure>"]


def render_html(title: str, sections: list[Section], intro: list[Text] | None = None) -> str:
    """One self-contained HTML page: a table of contents, then every section."""
    toc = "".join(f'<li><a href="#{html.escape(s.id)}">{html.escape(s.title)}</a></li>' for s in sections)
    body = [f"<h1>{html.escape(title)}</h1>"]
    body += [f'<p class="note">{_inline_html(t.text)}</p>' for t in intro or []]
    body.append(f"<nav><ul>{toc}</ul></nav>")
    for section in sections:
        body += _html_block(section, 2)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(line for line in body if line) + "\n</body>\n</html>\n")


def _markdown_block(block: Text | Table | Figure | Section, level: int) -> list[str]:
    if isinstance(block, Section):
        lines = [f"{'#' * level} {block.title}", ""]
        for child in block.blocks:
            lines += _markdown_block(child, min(level + 1, 6))
        return lines
    if isinstance(block, Text):
        return [block.text, ""]
    if isinstance(block, Table):
        caption = [f"**{block.caption}**", ""] if block.caption else []
        return caption + [to_markdown(display_frame(block.frame)).rstrip("\n"), ""]
    return [f"![{block.id}]({block.src})", "", f"*{block.caption}*", ""]


def render_markdown(title: str, sections: list[Section], intro: list[Text] | None = None) -> str:
    """The same report as GitHub markdown (figures as relative image links)."""
    lines = [f"# {title}", ""]
    lines += [line for t in intro or [] for line in (t.text, "")]
    for section in sections:
        lines += _markdown_block(section, 2)
    return "\n".join(lines).rstrip("\n") + "\n"
