"""Learning-rate sweep for configs/mnist.yaml (paper section 4.5, RQ4): prints one row per (lr_min, lr_max).

    .venv/bin/python benchmarks/lr_sweep.py [--cases-per-class 1] [--max-steps 100] [--out runs/lr_sweep]

Each setting runs HyNeA on the same origins (classes 0-9) through `python -m hynea_pl fit`; the figures are
the campaign summaries (misclassification rate, escape ratio, median SUT evaluations of flipped cases, median
MS-SSIM, mean runtime per case).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hynea_pl.cli import main

SETTINGS = [(1e-5, 1e-4), (3e-5, 3e-4), (1e-4, 1e-3), (3e-4, 3e-3)]


def run(lr_min: float, lr_max: float, options: argparse.Namespace) -> dict:
    name = f"lr_{lr_min:g}_{lr_max:g}"
    code = main([
        "fit", "--config", "configs/mnist.yaml",
        "--model.lr_min", str(lr_min), "--model.lr_max", str(lr_max),
        "--trainer.max_steps", str(options.max_steps), "--budget.max_evals", str(options.max_steps),
        "--cases.n_per_class", str(options.cases_per_class),
        "--output.root", str(options.out), "--output.name", name,
    ])
    if code != 0:
        raise SystemExit(f"sweep run {name} failed with exit code {code}")
    return json.loads((options.out / name / "summary.json").read_text())


def main_sweep() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-per-class", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("runs/lr_sweep"))
    options = parser.parse_args()
    table = Table(title=f"HyNeA lr sweep, MNIST zoo, {options.cases_per_class} case(s)/class, "
                        f"{options.max_steps} steps")
    for column in ("lr_min", "lr_max", "misclass.", "escape", "median evals", "mean evals", "median MS-SSIM",
                   "s/case"):
        table.add_column(column, justify="right")
    for lr_min, lr_max in SETTINGS:
        s = run(lr_min, lr_max, options)
        fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        table.add_row(f"{lr_min:g}", f"{lr_max:g}", fmt(s["misclassification_rate"], ".2f"),
                      fmt(s["escape_ratio"], ".2f"), fmt(s["median_sut_evals"], "g"), fmt(s["mean_sut_evals"], ".1f"),
                      fmt(s["median_ms_ssim"], ".3f"), fmt(s["mean_runtime_s"], ".1f"))
    Console().print(table)


if __name__ == "__main__":
    main_sweep()
