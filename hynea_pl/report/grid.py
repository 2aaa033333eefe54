"""Readable case grids: per case a column of origin / result / difference, upscaled, under a caption a person can
read (case id, origin class and the SUT's label, the validity oracle's verdict in colour), wrapped into rows.
Detection cases show the SUT's top-k boxes with confidence > 0.5 on origin and result (paper Fig. 6), other scene
cases the boxes of their layout's digits, the class under test in red."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from hynea_pl.images import load_image
from hynea_pl.schema import CaseRecord
from hynea_pl.verdicts import AMBIGUOUS, DEGRADED, NO_FLIP, SEMANTIC_CHANGE, UNACCEPTED, VALID_FAILURE, reading_name

__all__ = ["VERDICT_STYLE", "case_grid", "caption", "draw_boxes", "layout_boxes", "upscale", "write_grids"]

RGB = tuple[int, int, int]
BLACK: RGB = (0, 0, 0)
WHITE: RGB = (255, 255, 255)
PLACEHOLDER: RGB = (225, 225, 225)
#: verdict -> (caption text, colour); None: no oracle judged the case.
VERDICT_STYLE: dict[str | None, tuple[str, RGB]] = {
    VALID_FAILURE: ("valid failure", (0, 140, 0)),
    DEGRADED: ("degraded", (180, 150, 0)),
    SEMANTIC_CHANGE: ("semantic change", (210, 0, 0)),
    AMBIGUOUS: ("ambiguous", (230, 120, 0)),
    UNACCEPTED: ("unaccepted", (150, 150, 150)),
    NO_FLIP: ("no flip", (130, 130, 130)),
    None: ("not judged", (90, 90, 90)),
}
ERROR_STYLE: tuple[str, RGB] = ("error", (140, 0, 160))
ROWS = (("origin", "origin_image"), ("result", "result_image"), ("difference", "diff_image"))
#: the row above them when cases start from real images (``cases.images``): the real image the origin reconstructs
REAL_ROW = ("real image", "real_image")
PAD = 4
DEFAULT_COLUMNS = 10
#: boxes drawn on detection tiles: confidence above this (paper Fig. 6)
BOX_CONFIDENCE = 0.5
TARGET_BOX: RGB = (230, 30, 30)
OTHER_BOX: RGB = (40, 160, 255)


def upscale(image: Image.Image, min_size: int) -> Image.Image:
    """Enlarge by the smallest integer factor that brings the longer side to >= ``min_size`` px (NEAREST: each
    pixel becomes an exact block); images already that large are returned as they are."""
    factor = max(1, math.ceil(min_size / max(image.size)))
    return image if factor == 1 else image.resize((image.width * factor, image.height * factor), Image.NEAREST)


def caption(record: CaseRecord) -> list[tuple[str, RGB]]:
    """Caption lines with colours: case id, ``class c -> SUT label l``, each judge's reading (``judges 3 3 3 5``)
    when recorded, the verdict (or ``error``; ``unaccepted`` also for an unjudged flip on a result its method did
    not accept)."""
    origin = "unconditional" if record.origin_class is None else f"class {record.origin_class}"
    label = "?" if record.result_label is None else record.result_label
    if not record.ok:
        status = ERROR_STYLE
    elif record.flipped and record.accepted is False:
        status = VERDICT_STYLE[UNACCEPTED]
    else:
        status = VERDICT_STYLE[record.verdict]
    judges = ([("judges " + " ".join(reading_name(label, short=True) for label in record.judge_labels.values()), BLACK)]
              if record.judge_labels else [])
    return [(record.case_id, BLACK), (f"{origin} -> SUT label {label}", BLACK), *judges, status]


def draw_boxes(tile: Image.Image, boxes: Sequence[Sequence[float]], scale: float, target: int | None) -> Image.Image:
    """Draw detections ``[x0, y0, x1, y1, class, confidence]`` (in the saved image's pixels, times ``scale`` on
    ``tile``) whose confidence exceeds :data:`BOX_CONFIDENCE`, labelled ``class confidence``, or a scene layout's
    digit boxes ``[x0, y0, x1, y1, class]``, labelled ``class``; the class under test (``target``) in red, others
    in blue."""
    draw = ImageDraw.Draw(tile)
    font = ImageFont.load_default(size=max(10, tile.height // 14))
    for x0, y0, x1, y1, cls, *conf in boxes:
        if conf and conf[0] <= BOX_CONFIDENCE:
            continue
        colour = TARGET_BOX if target is not None and int(cls) == target else OTHER_BOX
        draw.rectangle((x0 * scale, y0 * scale, x1 * scale, y1 * scale), outline=colour, width=2)
        label = f"{int(cls)} {conf[0]:.2f}" if conf else f"{int(cls)}"
        draw.text((x0 * scale + 2, max(0.0, y0 * scale - font.size - 2)), label, fill=colour, font=font)
    return tile


def layout_boxes(record: CaseRecord) -> list[list[float]] | None:
    """A scene case's placed digits as ``[x0, y0, x1, y1, class]`` (its recorded layout: the origin's ink boxes),
    ``None`` for a case without a layout."""
    if not record.layout or not record.layout.get("boxes"):
        return None
    return [[*box, cls] for box, cls in zip(record.layout["boxes"], record.layout["classes"], strict=True)]


def _tile(run_dir: Path, relative: str | None, min_size: int, boxes: Sequence[Sequence[float]] | None = None,
          target: int | None = None) -> Image.Image | None:
    """A case PNG as an upscaled RGB image, with ``boxes`` drawn (:func:`draw_boxes`); None when absent or
    unreadable."""
    if not relative:
        return None
    try:
        array = load_image(run_dir / relative).expand(3, -1, -1).permute(1, 2, 0).numpy()
    except OSError:
        return None
    image = Image.fromarray(np.round(array * 255).astype(np.uint8), "RGB")
    tile = upscale(image, min_size)
    return draw_boxes(tile, boxes, tile.width / image.width, target) if boxes else tile


def _rows(cases: Sequence[CaseRecord]) -> tuple[tuple[str, str], ...]:
    """The grid's rows: :data:`ROWS`, under :data:`REAL_ROW` when a case started from a real image."""
    return (REAL_ROW, *ROWS) if any(r.real_image for r in cases) else ROWS


def _column(run_dir: Path, record: CaseRecord, min_size: int,
            rows: Sequence[tuple[str, str]] = ROWS) -> list[Image.Image | None]:
    """The tiles of one case, one per row: boxes on origin and result, the SUT's for detection, else a scene's
    placed digits."""
    placed = layout_boxes(record)
    boxes = {"origin_image": record.origin_boxes or placed, "result_image": record.result_boxes or placed}
    return [_tile(run_dir, getattr(record, key), min_size, boxes.get(key), record.target) for _, key in rows]


def _text_width(draw: ImageDraw.ImageDraw, text: str, font: ImageFont.ImageFont | ImageFont.FreeTypeFont) -> int:
    left, _, right, _ = draw.textbbox((0, 0), text, font=font)
    return int(math.ceil(right - left))


def case_grid(run_dir: Path, records: Sequence[CaseRecord], title: str | None = None, min_size: int = 96,
              columns: int | None = None) -> Image.Image:
    """The grid of ``records``' cases (records without a valid origin are left out): a column per case with its
    caption above origin / result / difference (and the real image above them for cases from real images),
    ``columns`` per row (default 10), missing images in grey.

    Raises ValueError when no record is a case.
    """
    run_dir = Path(run_dir)
    cases = [r for r in records if r.is_case]
    if not cases:
        raise ValueError("no test case to show in a grid")
    columns = max(1, min(columns or DEFAULT_COLUMNS, len(cases)))
    rows = _rows(cases)
    tiles = [_column(run_dir, r, min_size, rows) for r in cases]
    sizes = [t.size for column in tiles for t in column if t is not None] or [(min_size, min_size)]
    cell_w, cell_h = max(w for w, _ in sizes), max(h for _, h in sizes)

    font_size = int(min(18, max(12, cell_h / 8)))
    font = ImageFont.load_default(size=font_size)
    title_font = ImageFont.load_default(size=font_size + 4)
    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    captions = [caption(r) for r in cases]
    text_w = max(_text_width(draw, text, font) for lines in captions for text, _ in lines)
    line_h = font_size + 3
    col_w = max(cell_w, text_w) + 4 * PAD
    margin_w = max(_text_width(draw, name, font) for name, _ in rows) + 3 * PAD
    caption_h = len(captions[0]) * line_h + 2 * PAD
    block_h = caption_h + len(rows) * (cell_h + PAD) + 2 * PAD
    title_h = font_size + 4 + 3 * PAD if title else PAD
    n_rows = math.ceil(len(cases) / columns)

    width = max(margin_w + columns * col_w + PAD, _text_width(draw, title, title_font) + 2 * PAD if title else 0)
    grid = Image.new("RGB", (width, title_h + n_rows * block_h), WHITE)
    draw = ImageDraw.Draw(grid)
    if title:
        draw.text((PAD, PAD), title, fill=BLACK, font=title_font)
    for index, (lines, column) in enumerate(zip(captions, tiles)):
        row, col = divmod(index, columns)
        x0, y0 = margin_w + col * col_w, title_h + row * block_h
        for k, (text, colour) in enumerate(lines):
            draw.text((x0 + col_w // 2, y0 + PAD + k * line_h), text, fill=colour, font=font, anchor="ma")
        for k, tile in enumerate(column):
            tx, ty = x0 + (col_w - cell_w) // 2, y0 + caption_h + k * (cell_h + PAD)
            if tile is None:
                draw.rectangle((tx, ty, tx + cell_w - 1, ty + cell_h - 1), fill=PLACEHOLDER)
                draw.text((tx + cell_w // 2, ty + cell_h // 2), "no image", fill=(120, 120, 120), font=font,
                          anchor="mm")
            else:
                grid.paste(tile, (tx + (cell_w - tile.width) // 2, ty + (cell_h - tile.height) // 2))
    for row in range(n_rows):
        for k, (name, _) in enumerate(rows):
            y = title_h + row * block_h + caption_h + k * (cell_h + PAD) + cell_h // 2
            draw.text((PAD, y), name, fill=BLACK, font=font, anchor="lm")
    return grid


def write_grids(run_dir: Path, records: Sequence[CaseRecord]) -> list[Path]:
    """Write ``grid.png`` (every case) and ``grid_valid_failures.png`` (verdict == valid_failure, never a result its
    method did not accept; skipped when there is none) into ``run_dir``; returns the paths written (none when there
    is no case)."""
    run_dir = Path(run_dir)
    cases = [r for r in records if r.is_case]
    if not cases:
        return []
    head = f"{cases[0].method} / {cases[0].run}"
    valid = [r for r in cases if r.is_valid_failure]
    judged = sum(r.verdict is not None for r in cases)
    written = []
    for name, shown, title in (
        ("grid.png", cases, f"{head}: {len(cases)} cases"),
        ("grid_valid_failures.png", valid, f"{head}: {len(valid)} valid failures of {judged} judged cases"),
    ):
        if shown:
            path = run_dir / name
            case_grid(run_dir, shown, title=title).save(path)
            written.append(path)
    return written
