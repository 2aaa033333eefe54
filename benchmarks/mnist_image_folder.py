"""The package's MNIST digits as a folder of labelled PNGs, and the time and memory of converting it to a store.

    .venv/bin/python benchmarks/mnist_image_folder.py OUT [--split train|test|all] [--workers 2]
    .venv/bin/python benchmarks/mnist_image_folder.py OUT --measure STORE    # write_image_store(OUT, STORE, 32)

The first form writes the digits (:func:`~hynea_pl.zoo.mnist.data.mnist_train_digits`,
:func:`~hynea_pl.zoo.mnist.data.mnist_test_digits`: ``(N, 1, 32, 32)`` exact 8-bit levels / 255) as 8-bit grayscale
32x32 PNGs in the ``ImageFolder`` layout ``OUT/<digit>/<index>.png`` (``--split all``: the 60,000 training and the
10,000 test digits in the same class folders, as ``train-<index>.png`` and ``test-<index>.png``), then reads every
100th file back and checks its pixels are the digit's. The second form converts ``OUT`` to an image store
(size 32, the folder's channels) in a fresh process and prints its time and peak resident memory, before and after.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

_CHUNK = 1000


def _digits(split: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(file prefix, (N, 32, 32) uint8 levels, (N,) labels)`` of each part of ``split``."""
    import torch

    from hynea_pl.zoo.mnist.data import mnist_test_digits, mnist_train_digits

    parts = {"train": mnist_train_digits, "test": mnist_test_digits}
    chosen = list(parts) if split == "all" else [split]
    result = []
    for part in chosen:
        images, labels = parts[part]()
        levels = images[:, 0].mul(255).round().to(torch.uint8).numpy()
        result.append((f"{part}-" if split == "all" else "", levels, labels.numpy()))
    return result


def _write_chunk(job: tuple[str, str, int, np.ndarray, np.ndarray]) -> int:
    """Write one chunk of digits ``(n, 32, 32)`` uint8 as PNGs; returns how many."""
    out, prefix, start, levels, labels = job
    for offset, (pixels, label) in enumerate(zip(levels, labels)):
        Image.fromarray(pixels, mode="L").save(Path(out) / str(int(label)) / f"{prefix}{start + offset}.png")
    return len(levels)


def export(out: Path, split: str, workers: int) -> None:
    """Write the digits of ``split`` under ``out`` and check every 100th file reads back exactly."""
    parts = _digits(split)
    for digit in range(10):
        (out / str(digit)).mkdir(parents=True, exist_ok=True)
    jobs = [(str(out), prefix, start, levels[start:start + _CHUNK], labels[start:start + _CHUNK])
            for prefix, levels, labels in parts for start in range(0, len(levels), _CHUNK)]
    began = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        written = sum(pool.imap_unordered(_write_chunk, jobs))
    seconds = time.perf_counter() - began
    for prefix, levels, labels in parts:
        for index in range(0, len(levels), 100):
            path = out / str(int(labels[index])) / f"{prefix}{index}.png"
            with Image.open(path) as image:
                assert image.mode == "L" and np.array_equal(np.asarray(image), levels[index]), path
    print(f"wrote {written} digits ({split}) to {out} in {seconds:.1f} s with {workers} workers; every 100th read "
          f"back exactly")


def _store_child(folder: str, store: str) -> None:
    """In a fresh process: write the store and print one JSON line of its figures."""
    from hynea_pl.data import write_image_store

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    began = time.perf_counter()
    result = write_image_store(folder, store, size=32)
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "images": list(result.images.shape), "classes": result.num_classes, "skipped": result.skipped,
        "converted": result.converted, "seconds": round(seconds, 2), "peak_rss_mb_before": round(before / 1024, 1),
        "peak_rss_mb_after": round(after / 1024, 1), "fingerprint": result.fingerprint,
        "per_class": np.bincount(result.labels.numpy()).tolist(),
    }))


def measure(folder: Path, store: Path) -> None:
    """Convert ``folder`` to ``store`` in a fresh process; print its time and peak resident memory."""
    command = [sys.executable, __file__, str(folder), "--store-child", str(store)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    figures = json.loads(output.strip().splitlines()[-1])
    print(f"write_image_store({folder}, size=32): {figures['images']} uint8, {figures['classes']} classes "
          f"{figures['per_class']}, skipped {figures['skipped']}, converted {figures['converted']}")
    print(f"  {figures['seconds']} s; peak RSS {figures['peak_rss_mb_before']} MB after importing, "
          f"{figures['peak_rss_mb_after']} MB after writing; fingerprint {figures['fingerprint']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the image folder to write (or to convert, with --measure)")
    parser.add_argument("--split", choices=("train", "test", "all"), default="train")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--measure", type=Path, metavar="STORE", help="convert OUT to the store STORE instead")
    parser.add_argument("--store-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.store_child is not None:
        _store_child(str(args.out), str(args.store_child))
    elif args.measure is not None:
        measure(args.out, args.measure)
    else:
        export(args.out, args.split, args.workers)


if __name__ == "__main__":
    main()
