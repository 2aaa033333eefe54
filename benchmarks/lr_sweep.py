"""Learning-rate sweep for configs/mnist.yaml (paper section 4.5, RQ4) at several step budgets.

    .venv/bin/python benchmarks/lr_sweep.py [--cases-per-class 1] [--max-steps 50 100] [--out runs/lr_sweep]

A thin wrapper of ``python -m hynea_pl sweep --config configs/mnist.yaml --grid lr`` (the grid and the run folders
are the command's, :mod:`hynea_pl.campaign.sweep`): one sweep per step budget into ``<out>/steps_<n>/``, each
printing a row per (lr_min, lr_max) from the campaign summaries. Existing run folders are resumed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hynea_pl.cli import main


def main_sweep() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-per-class", type=int, default=1)
    parser.add_argument("--max-steps", type=int, nargs="+", default=[50, 100],
                        help="step budgets (= OneCycle lengths) to try")
    parser.add_argument("--out", type=Path, default=Path("runs/lr_sweep"))
    options = parser.parse_args()
    for max_steps in options.max_steps:
        code = main(["sweep", "--config", "configs/mnist.yaml", "--grid", "lr", "--out",
                     str(options.out / f"steps_{max_steps}"), "--trainer.max_steps", str(max_steps),
                     "--budget.max_evals", str(max_steps), "--cases.n_per_class", str(options.cases_per_class)])
        if code != 0:
            raise SystemExit(code)


if __name__ == "__main__":
    main_sweep()
