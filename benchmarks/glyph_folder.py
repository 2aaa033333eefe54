"""The letters A-J in matplotlib's fonts as a folder of labelled PNGs, to check ``zoo build --data`` end to end.

    .venv/bin/python benchmarks/glyph_folder.py OUT [--per-class 6000] [--size 32] [--seed 0] [--grey] [--workers 2]
    .venv/bin/python -m hynea_pl zoo build --data OUT --name glyphs

Writes ``OUT/<letter>/<index>.png`` (the ``ImageFolder`` layout; classes ``A`` .. ``J``; 60,000 images at the
default): an unseen labelled dataset of 28-32 px images this project was never tuned on, to run
``python -m hynea_pl zoo build --data OUT`` on as a user would. Each image is a capital letter in one of the fonts
matplotlib ships (``mpl-data/fonts/ttf``; a font is used only where rendering shows real, distinct capitals A-J:
:func:`usable_fonts`), drawn 4x larger (ink 55-90 % of the height), moved by a random affine (rotation +-12 degrees,
shear +-0.2, translation +-3 px), downsampled with LANCZOS, sometimes slightly blurred, in a random foreground and
background colour (luma at least 0.35 apart) with light pixel noise: ``size x size`` RGB, or grey levels (mode ``L``)
with ``--grey``. Every draw comes from a numpy Generator seeded by ``(seed, class, chunk of 500)``, so the same
arguments (and matplotlib and Pillow versions) give the same files, whatever the number of workers, and the first
``n`` files of a class are the same for any ``--per-class`` of at least ``n``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

LETTERS = "ABCDEFGHIJ"
_CHUNK = 500  # images per job, and per seed
_SCALE = 4  # drawn at SCALE x size, then downsampled
_FILL = (0.55, 0.90)  # ink height / image height
_ROTATION = 12.0  # degrees, +-
_SHEAR = 0.2  # +-
_SHIFT = 3.0  # output pixels, +-
_CONTRAST = 0.35  # least luma difference of foreground and background
_BLUR = (0.3, (0.3, 0.8))  # probability, radius range (output pixels)
_NOISE = (1.0, 6.0)  # range of the pixel noise's standard deviation, 8-bit levels
_MISSING = "\U0010fffd"  # a noncharacter: every font draws its missing-glyph box (.notdef) for it


@dataclass(frozen=True)
class Job:
    """One chunk of one class: the files ``start .. start + count - 1`` of ``OUT/<letter>``."""

    out: str
    letter: int
    chunk: int
    count: int
    size: int
    seed: int
    grey: bool
    fonts: tuple[str, ...]


def font_folder() -> Path:
    """matplotlib's folder of TrueType fonts."""
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


def _ink(font: ImageFont.FreeTypeFont, text: str, canvas: int) -> np.ndarray:
    """``text`` drawn white on black, centred on a ``canvas`` square (its anchor, not its ink), as uint8."""
    image = Image.new("L", (canvas, canvas), 0)
    ImageDraw.Draw(image).text((canvas / 2, canvas / 2), text, font=font, fill=255, anchor="mm")
    return np.asarray(image)


def _font_problem(path: Path, pixels: int = 64) -> str | None:
    """Why ``path`` cannot draw the capitals A-J (rendered at ``pixels``), or None where it can."""
    try:
        font = ImageFont.truetype(str(path), pixels)
    except OSError as error:
        return f"unreadable ({error})"
    glyphs = [_ink(font, letter, 4 * pixels) for letter in LETTERS]
    if any(not glyph.any() for glyph in glyphs):
        return "empty glyphs"
    missing = _ink(font, _MISSING, 4 * pixels)
    if any(np.array_equal(glyph, missing) for glyph in glyphs):
        return "missing-glyph boxes"
    if len({glyph.tobytes() for glyph in glyphs}) < len(LETTERS):
        return "identical glyphs"
    heights = [np.ptp(np.nonzero(glyph.any(axis=1))[0]) + 1 for glyph in glyphs]
    if max(heights) > 1.5 * min(heights):  # capitals share the cap height (J may descend a little)
        return f"not capitals (ink heights {min(heights)}-{max(heights)} px)"
    return None


def usable_fonts(folder: Path) -> tuple[list[Path], dict[str, str]]:
    """The ``.ttf`` files of ``folder`` (sorted) that draw real, distinct capitals A-J, and why each other is not."""
    usable, skipped = [], {}
    for path in sorted(folder.glob("*.ttf")):
        problem = _font_problem(path)
        if problem is None:
            usable.append(path)
        else:
            skipped[path.name] = problem
    return usable, skipped


@lru_cache(maxsize=4096)
def _font(path: str, pixels: int) -> ImageFont.FreeTypeFont:
    """The font ``path`` at ``pixels`` (cached per worker)."""
    return ImageFont.truetype(path, pixels)


@lru_cache(maxsize=1024)
def _ink_per_pixel(path: str, letter: str) -> float:
    """The ink height of ``letter`` in ``path`` per pixel of font size."""
    glyph = _ink(_font(path, 200), letter, 800)
    return (np.ptp(np.nonzero(glyph.any(axis=1))[0]) + 1) / 200


def _glyph(path: str, letter: str, height: float) -> Image.Image:
    """``letter`` in ``path`` as a mode ``L`` mask cropped to its ink, about ``height`` pixels tall."""
    pixels = max(4, round(height / _ink_per_pixel(path, letter)))
    canvas = int(pixels * 3)
    image = Image.fromarray(_ink(_font(path, pixels), letter, canvas))
    return image.crop(image.getbbox())


def _placed(glyph: Image.Image, canvas: int, rng: np.random.Generator) -> Image.Image:
    """``glyph`` rotated, sheared and shifted at random onto a ``canvas`` square, shrunk only where it would not fit."""
    angle = np.deg2rad(rng.uniform(-_ROTATION, _ROTATION))
    shear = rng.uniform(-_SHEAR, _SHEAR)
    shift = rng.uniform(-_SHIFT, _SHIFT, size=2) * _SCALE
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    linear = rotation @ np.array([[1.0, shear], [0.0, 1.0]])
    half = np.array(glyph.size) / 2
    corners = linear @ (np.array([[-1, -1, 1, 1], [-1, 1, -1, 1]]) * half[:, None])
    room = canvas / 2 - 1 - np.abs(shift)  # keep every corner of the ink box inside the canvas
    linear = linear * min(1.0, float(np.min(room / np.abs(corners).max(axis=1))))
    inverse = np.linalg.inv(linear)  # output pixel -> glyph pixel, about the two centres
    offset = half - inverse @ (canvas / 2 + shift)
    coefficients = (inverse[0, 0], inverse[0, 1], offset[0], inverse[1, 0], inverse[1, 1], offset[1])
    return glyph.transform((canvas, canvas), Image.Transform.AFFINE, coefficients, resample=Image.Resampling.BICUBIC)


def _colours(rng: np.random.Generator, grey: bool) -> tuple[np.ndarray, np.ndarray]:
    """A background and a foreground colour in [0, 1] (3 values, or 1 with ``grey``) whose luma differ enough."""
    weights = np.array([1.0]) if grey else np.array([0.299, 0.587, 0.114])
    while True:
        background, foreground = rng.random((2, len(weights)))
        if abs(weights @ background - weights @ foreground) >= _CONTRAST:
            return background, foreground


def render(letter: str, fonts: tuple[str, ...], size: int, grey: bool, rng: np.random.Generator) -> Image.Image:
    """One ``size x size`` image of ``letter``: a random font, size, affine, blur, colours and noise from ``rng``."""
    font = fonts[rng.integers(len(fonts))]
    canvas = size * _SCALE
    mask = _placed(_glyph(font, letter, rng.uniform(*_FILL) * canvas), canvas, rng)
    mask = mask.resize((size, size), Image.Resampling.LANCZOS)
    blurred, radius = rng.random() < _BLUR[0], rng.uniform(*_BLUR[1])
    if blurred:
        mask = mask.filter(ImageFilter.GaussianBlur(radius))
    background, foreground = _colours(rng, grey)
    alpha = np.asarray(mask, dtype=np.float64)[..., None] / 255
    pixels = (background * (1 - alpha) + foreground * alpha) * 255
    pixels = pixels + rng.normal(0.0, rng.uniform(*_NOISE), size=pixels.shape)
    pixels = np.clip(np.rint(pixels), 0, 255).astype(np.uint8)
    return Image.fromarray(pixels[..., 0], mode="L") if grey else Image.fromarray(pixels, mode="RGB")


def _write_chunk(job: Job) -> int:
    """Write the images of one chunk; returns how many."""
    rng = np.random.default_rng([job.seed, job.letter, job.chunk])
    letter = LETTERS[job.letter]
    folder = Path(job.out) / letter
    start = job.chunk * _CHUNK
    for index in range(start, start + job.count):
        render(letter, job.fonts, job.size, job.grey, rng).save(folder / f"{index:05d}.png")
    return job.count


def _jobs(out: Path, per_class: int, size: int, seed: int, grey: bool, fonts: list[Path]) -> list[Job]:
    """The chunks of every class, class by class."""
    names = tuple(str(path) for path in fonts)
    return [Job(str(out), letter, chunk, min(_CHUNK, per_class - chunk * _CHUNK), size, seed, grey, names)
            for letter in range(len(LETTERS)) for chunk in range((per_class + _CHUNK - 1) // _CHUNK)]


def write(out: Path, per_class: int, size: int, seed: int, grey: bool, workers: int) -> None:
    """Write the dataset under ``out`` (which must not exist or be empty); print progress and one summary line."""
    began = time.perf_counter()
    fonts, skipped = usable_fonts(font_folder())
    if not fonts:
        raise SystemExit(f"no font in {font_folder()} draws the letters A-J")
    print(f"{len(fonts)} fonts: {', '.join(path.stem for path in fonts)}")
    print(f"  skipped {len(skipped)}: " + ", ".join(f"{name} ({why})" for name, why in skipped.items()))
    for letter in LETTERS:
        (out / letter).mkdir(parents=True, exist_ok=True)
    jobs = _jobs(out, per_class, size, seed, grey, fonts)
    total, written, reported = per_class * len(LETTERS), 0, 0
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for count in pool.imap_unordered(_write_chunk, jobs):
            written += count
            if written * 10 // total > reported or written == total:
                reported = written * 10 // total
                print(f"  {written:,} / {total:,} images, {time.perf_counter() - began:.1f} s", flush=True)
    seconds = time.perf_counter() - began
    mode = "grey" if grey else "RGB"
    print(f"wrote {written} {size}x{size} {mode} PNGs ({per_class} per letter A-J) to {out} with {len(fonts)} fonts "
          f"in {seconds:.1f} s ({workers} workers)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the image folder to write: OUT/<letter>/<index>.png")
    parser.add_argument("--per-class", type=int, default=6000, help="images per letter (default 6000)")
    parser.add_argument("--size", type=int, default=32, help="image side in pixels (default 32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grey", action="store_true", help="single-channel (L) images in grey levels")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.per_class < 1 or args.size < 8 or args.workers < 1 or args.seed < 0:
        parser.error("--per-class and --workers must be at least 1, --size at least 8, --seed not negative")
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        print(f"refusing to write into {args.out}: it exists and is not an empty folder", file=sys.stderr)
        raise SystemExit(2)
    write(args.out, args.per_class, args.size, args.seed, args.grey, args.workers)


if __name__ == "__main__":
    main()
