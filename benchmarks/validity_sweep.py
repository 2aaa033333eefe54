"""Valid failures, not flips: HyNeA settings on the full zoo, judged by the zoo's oracle judges (issue 13).

    .venv/bin/python benchmarks/validity_sweep.py [--cases-per-class 1] [--settings paper steer-stop ...]
                                                  [--out runs/validity_sweep]

Every setting runs configs/mnist.yaml (classes 0-9, the same origins) through ``python -m hynea_pl fit`` with the
overrides below, and prints the campaign summaries: flip rate (the SUT's decision left the origin's), the judges'
verdicts (valid failure / semantic change / ambiguous, rates over all cases), median MS-SSIM (all results and valid
failures), median SUT evaluations of flipped cases, SUT evaluations and seconds per valid failure. The steering
member ``oracle-0`` (trained apart from the judges) is the only model a setting may steer with.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from campaign_runs import fit_summary

STEER = ["--model.init_args.reference", "hynea_pl.zoo.oracle_sut.ZooOracle",
         "--model.init_args.reference.init_args.role", "steering"]

#: name -> (what it tries, fit overrides)
SETTINGS: dict[str, tuple[str, list[str]]] = {
    "paper": ("stop at the target (the paper), no steering", []),
    "steer-stop": ("stop only while the steering member keeps the class", [*STEER]),
    "steer-loss-1": ("+ preservation loss, weight 1", [*STEER, "--model.init_args.reference_weight", "1"]),
    "steer-loss-3": ("+ preservation loss, weight 3", [*STEER, "--model.init_args.reference_weight", "3"]),
    "steer-loss-1-flip": ("weight 1, stop at any flip the member survives",
                          [*STEER, "--model.init_args.reference_weight", "1", "--model.init_args.stop_on", "flip"]),
    "steer-loss-1-lowlr": ("weight 1, lr 1e-4..1e-3 over 100 steps",
                           [*STEER, "--model.init_args.reference_weight", "1", "--model.init_args.lr_min", "1e-4",
                            "--model.init_args.lr_max", "1e-3", "--trainer.max_steps", "100"]),
    "lowlr": ("no steering, lr 1e-4..1e-3 over 100 steps",
              ["--model.init_args.lr_min", "1e-4", "--model.init_args.lr_max", "1e-3", "--trainer.max_steps", "100"]),
}


def run(name: str, overrides: list[str], options: argparse.Namespace) -> dict:
    return fit_summary(name, [*overrides, "--cases.n_per_class", str(options.cases_per_class)], options.out)


def main_sweep() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-per-class", type=int, default=1)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--out", type=Path, default=Path("runs/validity_sweep"))
    options = parser.parse_args()
    rows = []
    for name in options.settings:
        rows.append((name, run(name, SETTINGS[name][1], options)))
    table = Table(title=f"HyNeA validity sweep, MNIST zoo, {options.cases_per_class} case(s)/class, judged by "
                        "oracle-1 + oracle-2")
    columns = ("setting", "flip", "valid", "semantic", "ambiguous", "MS-SSIM", "MS-SSIM valid",
               "median evals (flipped)", "evals/valid", "s/case", "s/valid")
    for column in columns:
        table.add_column(column, justify="left" if column == "setting" else "right")

    def fmt(value, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    for name, s in rows:
        table.add_row(name, fmt(s["flip_rate"], ".2f"), fmt(s["valid_failure_rate"], ".2f"),
                      fmt(s["semantic_change_rate"], ".2f"), fmt(s["ambiguous_rate"], ".2f"),
                      fmt(s["median_ms_ssim"], ".3f"), fmt(s["median_ms_ssim_valid_failures"], ".3f"),
                      fmt(s["median_sut_evals_flipped"], "g"), fmt(s["sut_evals_per_valid_failure"], ".1f"),
                      fmt(s["mean_runtime_s"], ".1f"), fmt(s["runtime_s_per_valid_failure"], ".1f"))
    Console(width=180).print(table)
    for name in options.settings:
        print(f"{name}: {SETTINGS[name][0]}")


if __name__ == "__main__":
    main_sweep()
