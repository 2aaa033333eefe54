"""Learning-rate sweep for configs/mnist.yaml (paper section 4.5, RQ4): prints one row per (lr_min, lr_max).

    .venv/bin/python benchmarks/lr_sweep.py [--cases-per-class 1] [--max-steps 50 100] [--out runs/lr_sweep]

Each setting runs HyNeA on the same origins (classes 0-9) through `python -m hynea_pl fit`; the figures are
the campaign summaries (misclassification rate, escape ratio, median SUT evaluations of flipped cases, median
MS-SSIM, mean runtime per case).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from rich.console import Console
from rich.table import Table

from campaign_runs import fit_summary

LR_RANGES = [(1e-4, 1e-3), (3e-4, 3e-3), (1e-3, 1e-2)]


def run(lr_min: float, lr_max: float, max_steps: int, options: argparse.Namespace) -> dict:
    name = f"lr_{lr_min:g}_{lr_max:g}_steps_{max_steps}"
    return fit_summary(name, [
        "--model.init_args.lr_min", str(lr_min), "--model.init_args.lr_max", str(lr_max),
        "--trainer.max_steps", str(max_steps), "--budget.max_evals", str(max_steps),
        "--cases.n_per_class", str(options.cases_per_class),
    ], options.out)


def main_sweep() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-per-class", type=int, default=1)
    parser.add_argument("--max-steps", type=int, nargs="+", default=[50, 100],
                        help="step budgets (= OneCycle lengths) to try")
    parser.add_argument("--out", type=Path, default=Path("runs/lr_sweep"))
    options = parser.parse_args()
    table = Table(title=f"HyNeA lr sweep, MNIST zoo, {options.cases_per_class} case(s)/class")
    for column in ("lr_min", "lr_max", "max_steps", "misclass.", "escape", "median evals", "mean evals", "median MS-SSIM",
                   "s/case"):
        table.add_column(column, justify="right")
    for (lr_min, lr_max), max_steps in itertools.product(LR_RANGES, options.max_steps):
        s = run(lr_min, lr_max, max_steps, options)
        fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        table.add_row(f"{lr_min:g}", f"{lr_max:g}", str(max_steps), fmt(s["misclassification_rate"], ".2f"),
                      fmt(s["escape_ratio"], ".2f"), fmt(s["median_sut_evals"], "g"), fmt(s["mean_sut_evals"], ".1f"),
                      fmt(s["median_ms_ssim"], ".3f"), fmt(s["mean_runtime_s"], ".1f"))
    Console(width=160).print(table)


if __name__ == "__main__":
    main_sweep()
