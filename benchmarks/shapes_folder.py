"""Ten coloured shapes as a folder of labelled PNGs: a domain this project was never tuned on, to run
``zoo build --data`` and ``fit --profile`` on as a user would.

    .venv/bin/python benchmarks/shapes_folder.py OUT [--per-class 6000] [--size 32] [--seed 0]
    .venv/bin/python -m hynea_pl zoo build --data OUT --name shapes
    .venv/bin/python -m hynea_pl fit --config configs/custom.yaml --profile shapes --cases.n_per_class 2

Writes ``OUT/<shape>/<index>.png`` (the ``ImageFolder`` layout; the ten classes of ``tests/synthetic_images.py``:
square, disc, triangle, cross, bar, ring, diamond, frame, saltire, pillar), each shape at a random position and
scale in a random RGB colour on a random background of contrasting brightness, with pixel noise. The same
arguments give the same files.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic_images import SHAPES, write_shapes  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the image folder to write: OUT/<shape>/<index>.png")
    parser.add_argument("--per-class", type=int, default=6000, help="images per shape (default 6000)")
    parser.add_argument("--size", type=int, default=32, help="image side in pixels (default 32)")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)
    start = time.monotonic()
    write_shapes(options.out, classes=len(SHAPES), per_class=options.per_class, size=options.size, channels=3,
                 seed=options.seed)
    print(f"wrote {len(SHAPES) * options.per_class} images of {len(SHAPES)} shapes to {options.out} "
          f"in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
