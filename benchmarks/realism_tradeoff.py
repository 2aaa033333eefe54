"""Valid failures against SUT evaluations: HyNeA settings on the MNIST zoo under the verdict (unanimous judges of
three families + the realism test), on tuning case seeds that the reported figures never use.

    .venv/bin/python benchmarks/realism_tradeoff.py [--seed 500] [--cases-per-class 1] [--jobs 2]
                                                    [--settings paper default ...] [--out runs/tradeoff]

Each setting runs configs/mnist.yaml (classes 0-9, the same origins for every setting) through
``python -m hynea_pl fit`` with its overrides, ``--jobs`` at a time with one thread each, and the script prints one
row per setting. Rates are over all cases; "median evals (flipped)" is the median SUT evaluations of the flipped
cases; "evals / valid" divides the evaluations of all cases by the valid failures found.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

NO_STEER = ["--model.init_args.reference", "null"]
#: every setting but ``default`` starts from these (the plain steering rule), then adds its own overrides
BASE = ["--model.init_args.reference_views", "false", "--model.init_args.reference_margin", "0"]


def lr(low: str, high: str, steps: int) -> list[str]:
    return ["--model.init_args.lr_min", low, "--model.init_args.lr_max", high, "--trainer.max_steps", str(steps)]


#: name -> (what it tries, fit overrides on configs/mnist.yaml)
SETTINGS: dict[str, tuple[str, list[str]]] = {
    "paper": ("the paper's HyNeA: no steering, lr 3e-4..3e-3, 50 steps", [*NO_STEER, *lr("3e-4", "3e-3", 50)]),
    "paper-slow": ("no steering, lr 1e-4..1e-3, 100 steps", [*NO_STEER, *lr("1e-4", "1e-3", 100)]),
    "steer-fast": ("steer-cnn loss 1 + stop, lr 3e-4..3e-3, 50 steps", lr("3e-4", "3e-3", 50)),
    "steer-slow": ("steer-cnn loss 1 + stop, lr 1e-4..1e-3, 100 steps", lr("1e-4", "1e-3", 100)),
    "steer-mid": ("steer-cnn loss 1 + stop, lr 2e-4..2e-3, 70 steps", lr("2e-4", "2e-3", 70)),
    "steer-slow-m90": ("steer-slow, the steering model at >= 0.9 on the class",
                       [*lr("1e-4", "1e-3", 100), "--model.init_args.reference_margin", "0.9"]),
    "steer-slow-w3": ("steer-slow, preservation weight 3",
                      [*lr("1e-4", "1e-3", 100), "--model.init_args.reference_weight", "3"]),
    "steer-mid-m90": ("steer-mid, margin 0.9",
                      [*lr("2e-4", "2e-3", 70), "--model.init_args.reference_margin", "0.9"]),
    "steer-fast-prior1": ("steer-fast + the denoiser prior, weight 1",
                          [*lr("3e-4", "3e-3", 50), "--model.init_args.prior_weight", "1"]),
    "steer-fast-prior3": ("steer-fast + the denoiser prior, weight 3",
                          [*lr("3e-4", "3e-3", 50), "--model.init_args.prior_weight", "3"]),
    "steer-mid-prior3-m90": ("steer-mid + prior 3 + margin 0.9",
                             [*lr("2e-4", "2e-3", 70), "--model.init_args.prior_weight", "3",
                              "--model.init_args.reference_margin", "0.9"]),
    "steer-fast-views": ("steer-fast, the steering model must keep the class on shifted / faded views too",
                         [*lr("3e-4", "3e-3", 50), "--model.init_args.reference_views", "true"]),
    "steer-fast-views-m90": ("steer-fast-views with margin 0.9",
                             [*lr("3e-4", "3e-3", 50), "--model.init_args.reference_views", "true",
                              "--model.init_args.reference_margin", "0.9"]),
    "default": ("configs/mnist.yaml as shipped (steer-fast-views-m90)", []),
}

#: the setting configs/mnist.yaml ships (highlighted in the plot)
SHIPPED = "steer-fast-views-m90"

COLUMNS = ("setting", "flip", "valid", "degraded", "semantic", "ambiguous", "real results", "MS-SSIM",
           "median evals (flipped)", "evals / valid", "s / case")


def run(name: str, options: argparse.Namespace) -> dict:
    """One campaign in a subprocess with one thread; returns its summary."""
    out = options.out / name
    if not (out / "summary.json").is_file():
        base = [] if name == "default" else BASE
        command = [sys.executable, "-m", "hynea_pl", "fit", "--config", options.config, *base, *SETTINGS[name][1],
                   "--cases.seed", str(options.seed), "--cases.n_per_class", str(options.cases_per_class),
                   "--output.root", str(options.out), "--output.name", name]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        log = (options.out / f"{name}.log").open("w")
        if subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
            raise SystemExit(f"setting {name} failed: see {options.out / f'{name}.log'}")
    return json.loads((out / "summary.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/mnist.yaml")
    parser.add_argument("--seed", type=int, default=500, help="first case seed (never one the README reports)")
    parser.add_argument("--cases-per-class", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--out", type=Path, default=Path("runs/tradeoff"))
    parser.add_argument("--markdown", action="store_true", help="print the rows as a markdown table")
    parser.add_argument("--plot", type=Path, help="save valid-failure rate against SUT evaluations as a PNG")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(options.jobs) as pool:
        summaries = dict(zip(options.settings, pool.map(lambda name: run(name, options), options.settings)))
    table = Table(title=f"HyNeA on the MNIST zoo, case seeds from {options.seed}, {options.cases_per_class} case(s) "
                        "per class; rates over all cases")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column == "setting" else "right")

    def fmt(value, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    rows = [[name, fmt(s["flip_rate"], ".2f"), fmt(s["valid_failure_rate"], ".2f"),
             fmt(s.get("degraded_rate"), ".2f"), fmt(s["semantic_change_rate"], ".2f"),
             fmt(s["ambiguous_rate"], ".2f"), fmt(s.get("realism_pass_results"), ".2f"),
             fmt(s["median_ms_ssim"], ".3f"), fmt(s.get("median_sut_evals_flipped"), "g"),
             fmt(s["sut_evals_per_valid_failure"], ".1f"), fmt(s["mean_runtime_s"], ".1f")]
            for name, s in summaries.items()]
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)
    for name in options.settings:
        print(f"{name}: {SETTINGS[name][0]}")
    if options.markdown:
        print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    if options.plot:
        plot(summaries, options.plot)


def plot(summaries: dict[str, dict], path: Path) -> None:
    """Valid-failure rate (all cases) against mean SUT evaluations per case (all cases), one point per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.5, 3.6), dpi=110)
    for name, s in summaries.items():
        x, y = s.get("mean_sut_evals_all"), s["valid_failure_rate"]
        axes.scatter([x], [y], color="tab:green" if name in ("default", SHIPPED) else "tab:blue")
        axes.annotate(name, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
    axes.set_xlabel("mean SUT evaluations per case (all cases)")
    axes.set_ylabel("valid-failure rate (all cases)")
    axes.set_ylim(-0.05, 1.05)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)


if __name__ == "__main__":
    main()
