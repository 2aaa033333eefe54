"""The verdict's calibration on the MNIST zoo: each judge's accuracy on the held-out real digits (the 10,000 MNIST
test digits for ``full``), the accuracy of the judges' vote, and the realism test's pass rate on the held-out digits
(each left out of the reference), on the method split's training digits (real digits outside the reference), on
generated digits (the origins' distribution) and on the results of finished runs. Then the verdict's ceiling on the
held-out digits, which no zoo model trains on: its rates on all of them, on the SUT's mistakes among them (its
natural failures) and on the digits the SUT reads right; each judge's accuracy on the SUT's mistakes; how often each
pair of models errs on the same digit.

    .venv/bin/python benchmarks/verdict_calibration.py [--profile full] [--per-class 20] [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from hynea_pl.evaluation.ceiling import read_real_images
from hynea_pl.images import load_image
from hynea_pl.schema import read_records
from hynea_pl.zoo import load_zoo
from hynea_pl.zoo.labelled.classifier import normalize
from hynea_pl.zoo.labelled.gates import generate_images
from hynea_pl.zoo.labelled.oracle_sut import ZooOracle
from hynea_pl.zoo.labelled.realism import ZooTypicality, held_out_split


def run_results(run: Path) -> torch.Tensor:
    """The result images of a run folder's cases ``(N, 1, 32, 32)``."""
    images = [load_image(run / r.result_image)[:1] for r in read_records(run / "records.jsonl") if r.result_image]
    return torch.stack(images)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="full")
    parser.add_argument("--per-class", type=int, default=20)
    parser.add_argument("--seed", type=int, default=4321, help="seed of the generated digits")
    parser.add_argument("runs", nargs="*", type=Path)
    options = parser.parse_args()
    zoo = load_zoo(options.profile)
    held_out, held_out_labels = held_out_split(options.profile)  # the realism reference, never trained on
    judges = ZooOracle(options.profile, "judges")
    generated, classes = generate_images(zoo.generator(), options.per_class, options.seed)

    table = Table(title=f"verdict calibration, zoo profile {options.profile}")
    for column in ("check", "held-out real digits", f"generated digits ({len(classes)})"):
        table.add_column(column, justify="left" if column == "check" else "right")
    with torch.no_grad():
        readings = {}
        for name, member in zip(judges.member_names, judges.model.members):
            readings[name] = (member(held_out).argmax(1) == held_out_labels,
                              member(generated).argmax(1) == classes)
            table.add_row(f"judge {name}: accuracy", *(f"{r.double().mean():.3f}" for r in readings[name]))
        vote = [(judges.panel_readings(images)[0] == truth).double().mean()
                for images, truth in ((held_out, held_out_labels), (generated, classes))]
        table.add_row("the judges' vote reads the class", *(f"{u:.3f}" for u in vote))
    realism = ZooTypicality(options.profile)
    table.add_row("realism pass (held-out: leave-one-out)", f"{realism.held_out_pass_rate:.3f}",
                  f"{realism.pass_rate(generated):.3f}")
    table.add_row("realism pass (method split's digits, not in the reference)", f"{realism.real_check_pass_rate():.3f}",
                  "")
    Console(width=160).print(table)
    for run in options.runs:
        results = run_results(run)
        print(f"{run}: realism pass rate of {len(results)} results {realism.pass_rate(results):.3f}")
    print_ceiling(zoo, judges, realism, held_out, held_out_labels)


def print_ceiling(zoo, judges: ZooOracle, realism: ZooTypicality, images: torch.Tensor, labels: torch.Tensor) -> None:
    """The verdict's ceiling tables on the held-out digits, the realism test's reference, each judged left out of it
    (:mod:`hynea_pl.evaluation.ceiling`)."""
    sut = zoo.sut().eval()
    readings = read_real_images(judges, realism, lambda x: sut(normalize(x)), images, labels, are_reference=True)
    subsets = {"all": None, "the SUT's mistakes (natural failures)": ~readings.sut_correct,
               "the digits the SUT reads right": readings.sut_correct}
    table = Table(title=f"the verdict on the {len(labels):,} held-out MNIST test digits")
    for column in ("real test digits", "n", "the judges' vote reads the true class", "realistic", "valid",
                   *(f"{name} accuracy" for name in readings.judges)):
        table.add_column(column, justify="left" if column == "real test digits" else "right")
    for subset, where in subsets.items():
        rates, accuracy = readings.rates(where), readings.judge_accuracy(where)
        table.add_row(subset, str(rates["n"]), *(f"{rates[k]:.3f}" for k in ("panel", "realistic", "valid")),
                      *(f"{a:.4f}" for a in accuracy.values()))
    Console(width=200).print(table)
    together = Table(title=f"both models misread the digit (fraction of the {len(labels):,} held-out digits)")
    for column in ("model", "and model", "both wrong", "if they erred independently"):
        together.add_column(column, justify="left" if "model" in column else "right")
    errors = {name: 1 - accuracy for name, accuracy in readings.judge_accuracy().items()}
    errors["sut"] = 1 - float(readings.sut_correct.double().mean())
    for (a, b), rate in readings.errors_together().items():
        together.add_row(a, b, f"{rate:.4f}", f"{errors[a] * errors[b]:.4f}")
    Console(width=160).print(together)


if __name__ == "__main__":
    main()
