"""The stability verdict's variants, variant by variant: how the zoo's SUT reads real test digits under each
variant (do the variants keep what a digit shows?), and, for finished runs, which variants undo their flips and
their valid failures.

    .venv/bin/python benchmarks/stability_variants.py [--profile full] [--real 5000] [RUN_DIR ...]

The variants are the config's default ``stability`` section (:class:`hynea_pl.evaluation.stability.StabilityVariants`);
a run's saved result PNGs are read again, so its records need not have been checked with the same variants.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from hynea_pl.evaluation.stability import StabilityVariants
from hynea_pl.images import as_saved, load_image
from hynea_pl.schema import read_records
from hynea_pl.verdicts import VALID_FAILURE
from hynea_pl.zoo import load_zoo
from hynea_pl.zoo.labelled.classifier import normalize
from hynea_pl.zoo.mnist.data import mnist_test_digits


def real_digits(sut: torch.nn.Module, variants: StabilityVariants, n: int, console: Console) -> None:
    """The SUT's accuracy on the first ``n`` MNIST test digits, on each variant, and on the image and every variant."""
    images, labels = mnist_test_digits()
    images, labels = images[:n], labels[:n]
    table = Table(title=f"the SUT on {n} real test digits")
    table.add_column("images")
    table.add_column("accuracy", justify="right")
    correct = sut(normalize(images)).argmax(-1) == labels
    table.add_row("as they are", f"{float(correct.double().mean()):.4f}")
    every = correct.clone()
    for name, change in variants.changes.items():
        right = sut(normalize(as_saved(change(images)))).argmax(-1) == labels
        every &= right
        table.add_row(name, f"{float(right.double().mean()):.4f}")
    table.add_row("the image and every variant", f"{float(every.double().mean()):.4f}")
    console.print(table)


def undone_by(sut: torch.nn.Module, variants: StabilityVariants, run: Path, console: Console) -> None:
    """For a run's flipped cases: how many each variant undoes (the SUT reads the origin's class again), over the
    flips and over the valid failures."""
    flips, valid = Counter(), Counter()
    n_flips = n_valid = 0
    for record in read_records(run / "records.jsonl"):
        if not record.flipped or not record.result_image:
            continue
        image = load_image(run / record.result_image)[None, :1]
        readings = sut(normalize(variants(image))).argmax(-1).tolist()
        undone = [name for name, label in zip(variants.names, readings, strict=True) if label == record.origin_label]
        n_flips += 1
        flips.update(undone)
        if record.verdict == VALID_FAILURE:
            n_valid += 1
            valid.update(undone)
    table = Table(title=f"{run}: variants that undo a flip ({n_flips} flips, {n_valid} valid failures)")
    for column in ("variant", "flips undone", "valid failures undone"):
        table.add_column(column, justify="right" if column != "variant" else "left")
    for name in variants.names:
        table.add_row(name, str(flips[name]), str(valid[name]))
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="full")
    parser.add_argument("--real", type=int, default=5000, help="real test digits to read (0: none)")
    parser.add_argument("runs", nargs="*", type=Path)
    options = parser.parse_args()
    console = Console()
    sut = load_zoo(options.profile).sut().eval()
    variants = StabilityVariants()
    with torch.no_grad():
        if options.real:
            real_digits(sut, variants, options.real, console)
        for run in options.runs:
            undone_by(sut, variants, run, console)


if __name__ == "__main__":
    main()
