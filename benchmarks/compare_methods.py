"""Every method on the same origins, the same budget and the same verdict: one command that runs what is missing,
then writes the comparison (``compare.md`` / ``compare.csv``), the HTML report and the method table.

    .venv/bin/python benchmarks/compare_methods.py [--suites mnist real] [--methods hynea sinvad ...]
        [--seed 0] [--n-per-class 3] [--cap giftbench-high=10 ...] [--jobs 2] [--out runs/compare] [--markdown]

Each (suite, method) is one ``python -m hynea_pl fit`` into ``<out>/<suite>/<method>/`` with one thread
(``--jobs`` at a time). A run folder that already holds every selected case is not started again, and a suite
whose report is newer than all its records is not reported again, so a second call finishes in seconds; a run cut
short resumes where it stopped (the campaign keeps finished cases).

Suites: ``mnist`` starts every method from the zoo's generated origins (``--cases.seed``, ``--n-per-class`` per
class; the GAN methods from the GAN's image of the same seed); ``real`` starts them from the zoo's held-out real
digits (from index 9000, as ``configs/mnist_real.yaml``). ``--cap METHOD=N`` runs a method on its first N cases only,
one per class first (c0-0, c1-0, ..., c9-0, c0-1, ...): the genetic searches over the LDM spend minutes a case
(GIFTbench: 5 cases of the low setting, 10 of the high one, 5 of the high one from real digits). ``natural``
(``real`` only) generates nothing: it reads held-out real digits of the case's class until the SUT misreads one, the
cost of finding failures in more real data (``configs/mnist_natural.yaml``).

The printed table's rates are over **all cases of the row** (its ``cases`` column): ``flip`` counts flips,
``valid`` valid failures (the verdict accepts a result the method accepted), ``stable`` valid failures that hold on
every stability variant. ``median evals`` is over the flipped cases and over all cases, ``mean evals`` over all cases;
``evals / valid`` and ``evals / stable`` divide the SUT evaluations of all cases by the valid (stable valid) failures;
``ended early``
counts the cases that stopped on the method's own rule or step limit before flipping or spending the budget;
``wall / case`` is the mean of the cases' own run time. The ratio table divides each method's ``evals / valid``
(``evals / stable``) by HyNeA's: how many times more SUT evaluations the method spends per failure; a method that
found none shows what it spent in all (``none in N``) and the ratio that spending gives, a lower bound (``> r``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: the held-out real digits the ``real`` suite starts from, and the realism reference they leave out
#: (``configs/mnist_real.yaml``)
REAL_ORIGINS = ["--cases.images", "zoo://full/held_out?start=9000", "--realism.init_args.reference_size", "9000"]
#: the method the ratio table divides by
REFERENCE = "hynea"


@dataclass(frozen=True)
class Method:
    """One row: ``fit --config *configs *overrides`` (the ``real`` suite adds ``real`` or, when that is ``None``,
    :data:`REAL_ORIGINS`); ``cap``: the default number of cases (``None``: all selected), ``real_cap`` the ``real``
    suite's."""

    name: str
    configs: tuple[str, ...]
    overrides: tuple[str, ...] = ()
    cap: int | None = None
    real_cap: int | None = None
    real: tuple[str, ...] | None = None
    suites: tuple[str, ...] = ("mnist", "real")
    what: str = ""


BATCH = ("--cases.batch_size", "5")
METHODS: tuple[Method, ...] = (
    Method("hynea", ("configs/mnist.yaml",), BATCH, real=("--config", "configs/mnist_real.yaml", *BATCH),
           what="the shipped default (configs/mnist.yaml; real: configs/mnist_real.yaml)"),
    Method("hynea-paper", ("configs/mnist.yaml", "configs/overlays/hynea_paper.yaml"), BATCH, suites=("mnist",),
           what="the paper's HyNeA (configs/overlays/hynea_paper.yaml over the default)"),
    Method("giftbench-low", ("configs/mnist_giftbench.yaml",), ("--model.init_args.config", "low"), cap=5,
           suites=("mnist",), what="GIFTbench, the authors' perturbation (1e-4)"),
    Method("giftbench-high", ("configs/mnist_giftbench.yaml",), ("--model.init_args.config", "high"), cap=10,
           real_cap=5,
           what="GIFTbench, the paper's perturbation (1e-3)"),
    Method("sinvad", ("configs/mnist_sinvad.yaml",), what="SINVAD (VAE latent GA)"),
    Method("cfg-first-flip", ("configs/mnist_cfg_firstflip.yaml",), suites=("mnist",),
           what="the LDM's guidance scale, descended until the SUT flips"),
    Method("mimicry", ("configs/mnist_mimicry.yaml",), suites=("mnist",), what="Mimicry (StyleGAN style mixing GA)"),
    Method("truncation-first-flip", ("configs/mnist_truncation.yaml",), suites=("mnist",),
           what="truncation probe, first flip, fixed schedule"),
    Method("truncation-adaptive", ("configs/mnist_truncation_adaptive.yaml",), suites=("mnist",),
           what="truncation probe, adaptive psi"),
    Method("truncation-stylemix", ("configs/mnist_truncation_stylemix.yaml",), suites=("mnist",),
           what="truncation-assisted style mixing"),
    Method("natural", ("configs/mnist_natural.yaml",), suites=("real",),
           what="no generation: held-out real digits of the class (9000-9999) read until the SUT misreads one"),
)
SUITES = ("mnist", "real")
#: printed columns: (header, metrics key or callable of the row)
PRINTED = ("method", "cases", "flip", "valid", "stable", "degraded", "semantic", "ambiguous", "unaccepted",
           "median evals (flipped)", "median evals (all)", "mean evals (all)", "evals / valid", "evals / stable",
           "ended early", "median MS-SSIM", "wall / case (s)")


@dataclass
class Job:
    """One (suite, method) run: its folder, command and the case ids it must hold to be finished."""

    suite: str
    method: Method
    folder: Path
    command: list[str]
    case_ids: list[str]
    log: Path
    state: str = field(default="")


def case_ids(n_per_class: int, cap: int | None, classes: Sequence[int] = range(10)) -> list[str]:
    """The first ``cap`` case ids, one per class first: ``c0-0, c1-0, ..., c9-0, c0-1, ...``."""
    ids = [f"c{k}-{i}" for i in range(n_per_class) for k in classes]
    return ids[:cap] if cap is not None else ids


def fit_command(method: Method, suite: str, root: Path, seed: int, n_per_class: int, cap: int | None) -> list[str]:
    """The ``fit`` command line of one (suite, method) run into ``root/suite/method``."""
    configs = [arg for config in method.configs for arg in ("--config", config)]
    args = [*configs, *method.overrides]
    if suite == "real":
        args = [*method.real] if method.real is not None else [*args, *REAL_ORIGINS]
    selection = ["--cases.seed", str(seed), "--cases.n_per_class", str(n_per_class)]
    if cap is not None:
        selection += ["--cases.case_ids", "[" + ", ".join(case_ids(n_per_class, cap)) + "]"]
    return [sys.executable, "-m", "hynea_pl", "fit", *args, *selection,
            "--output.root", str(root / suite), "--output.name", method.name]


def finished(job: Job) -> bool:
    """Whether the run folder holds a record without error for every case id of the job."""
    from hynea_pl.schema import read_records

    path = job.folder / "records.jsonl"
    if not path.is_file():
        return False
    done = {r.case_id for r in read_records(path) if r.error is None}
    return set(job.case_ids) <= done


def run_job(job: Job, console: Console, threads: int) -> None:
    """Run (or resume) one job's ``fit``, its output in ``job.log``; ``job.state`` says how it ended."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    console.print(f"[bold]{job.suite}/{job.method.name}[/]: running {len(job.case_ids)} cases (log {job.log})")
    start = time.monotonic()
    with job.log.open("a") as log:
        code = subprocess.run(job.command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    minutes = (time.monotonic() - start) / 60
    job.state = f"ran in {minutes:.1f} min" if code == 0 else f"FAILED (exit {code}, see {job.log})"
    console.print(f"[bold]{job.suite}/{job.method.name}[/]: {job.state}")


def method_row(name: str, folder: Path) -> dict[str, Any]:
    """The printed row of one run folder, from its records alone (the same metrics as ``compare``)."""
    from hynea_pl.evaluation.rescore import records_row
    from hynea_pl.schema import read_records

    row = records_row(read_records(folder / "records.jsonl"))
    return {"method": name, **row}


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def printed_cells(row: dict[str, Any], to_real: bool = False) -> list[str]:
    """One row of :data:`PRINTED` (``to_real``: and the median MS-SSIM of the results to the real images)."""
    stable = row["stable_failure_rate"]
    if stable is None and row["n_flipped"] == 0 and row["valid_failure_rate"] is not None:
        stable = 0.0  # nothing flipped, so nothing was asked about its variants: no stable failure either
    return [row["method"], fmt(row["n_cases"]), fmt(row["flip_rate"]), fmt(row["valid_failure_rate"]),
            fmt(stable), fmt(row["degraded_rate"]), fmt(row["semantic_change_rate"]),
            fmt(row["ambiguous_rate"]), fmt(row["unaccepted_rate"]), fmt(row["median_sut_evals_flipped"], 1),
            fmt(row["median_sut_evals_all"], 1), fmt(row["mean_sut_evals_all"], 1),
            fmt(row["sut_evals_per_valid_failure"], 1),
            fmt(row["sut_evals_per_stable_failure"], 1), fmt(row["ended_before_budget_rate"]),
            fmt(row["median_ms_ssim"]), fmt(row["mean_runtime_s"], 1),
            *([fmt(row["median_ms_ssim_to_real"])] if to_real else [])]


def ratio_cells(row: dict[str, Any], reference: dict[str, Any]) -> list[str]:
    """``evals / valid`` and ``evals / stable`` of ``row`` and their ratio to the reference's. A method that found
    none spent all its evaluations without one: ``none in N`` and a lower bound of the ratio (``> N / reference``)."""
    cells = [row["method"]]
    spent = row.get("total_sut_evals")
    for key in ("sut_evals_per_valid_failure", "sut_evals_per_stable_failure"):
        mine, theirs = row.get(key), reference.get(key)
        if mine:
            cells += [fmt(mine, 1), f"{mine / theirs:.2f}x" if theirs else "-"]
        elif spent:
            cells += [f"none in {spent:.0f}", f"> {spent / theirs:.2f}x" if theirs else "-"]
        else:
            cells += ["-", "-"]
    return cells


def markdown(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])


def show(console: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], as_md: bool) -> None:
    if as_md:
        console.print(f"\n{title}\n\n{markdown(columns, rows)}\n", soft_wrap=True)
        return
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column == "method" else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)


def report_suite(folders: list[Path], out: Path, console: Console) -> None:
    """``compare`` + ``report`` of a suite's run folders into ``out`` (skipped when ``report.html`` is newer than
    every run's records)."""
    html = out / "report.html"
    newest = max((folder / "records.jsonl").stat().st_mtime for folder in folders)
    if html.is_file() and html.stat().st_mtime > newest:
        console.print(f"{out}: up to date")
        return
    from hynea_pl.report.build import build_report

    report = build_report(folders, out)
    console.print(f"wrote {report.html}, {report.markdown} and {out / 'compare.md'}")


def parse_caps(values: Sequence[str]) -> dict[str, int | None]:
    caps: dict[str, int | None] = {}
    for value in values:
        name, sep, number = value.partition("=")
        if not sep or name not in {m.name for m in METHODS} or not (number.isdigit() or number in ("all", "none")):
            raise ValueError(f"--cap takes METHOD=N with a method of {[m.name for m in METHODS]}; got {value!r}")
        caps[name] = None if number in ("all", "none") else int(number)
    return caps


def main(argv: Sequence[str] | None = None) -> int:
    """Run what is missing and print the tables; a bad argument is one line on stderr (exit 2), as ``fit``'s."""
    try:
        return compare(argv)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def compare(argv: Sequence[str] | None = None) -> int:
    from hynea_pl.cli import OneLineParser

    parser = OneLineParser(prog="benchmarks/compare_methods.py", description=__doc__.split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suites", nargs="+", choices=SUITES, default=list(SUITES))
    parser.add_argument("--methods", nargs="+", choices=[m.name for m in METHODS], default=None,
                        help="default: every method of each suite")
    parser.add_argument("--seed", type=int, default=0, help="case seed (default 0, the README's)")
    parser.add_argument("--n-per-class", type=int, default=3)
    parser.add_argument("--cap", nargs="*", default=[], metavar="METHOD=N",
                        help="cases of a method in every suite (one per class first); defaults: "
                             + ", ".join(f"{m.name}={m.cap}" + (f" ({m.real_cap} from real digits)" if m.real_cap
                                                                       else "") for m in METHODS if m.cap))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, one thread each (default 2)")
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    parser.add_argument("--no-run", action="store_true", help="tabulate what has run; start nothing")
    parser.add_argument("--no-report", action="store_true", help="skip compare / report (the table still prints)")
    parser.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    options = parser.parse_args(argv)
    console = Console(width=220)
    given = parse_caps(options.cap)
    out = options.out.resolve() if not options.out.is_absolute() else options.out

    jobs = []
    for suite in options.suites:
        for method in METHODS:
            if suite not in method.suites or (options.methods and method.name not in options.methods):
                continue
            cap = given.get(method.name, method.real_cap if suite == "real" and method.real_cap else method.cap)
            jobs.append(Job(suite, method, out / suite / method.name,
                            fit_command(method, suite, out, options.seed, options.n_per_class, cap),
                            case_ids(options.n_per_class, cap), out / "logs" / f"{suite}_{method.name}.log"))
    todo = [job for job in jobs if not finished(job)]
    for job in jobs:
        if job not in todo:
            job.state = "finished before"
    if todo and not options.no_run:
        console.print(f"{len(todo)} of {len(jobs)} runs to do, {options.jobs} at a time: "
                      + ", ".join(f"{j.suite}/{j.method.name}" for j in todo))
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            list(pool.map(lambda job: run_job(job, console, threads=1), todo))

    failed = [job for job in jobs if job.state.startswith("FAILED")]
    for suite in options.suites:
        ran = [job for job in jobs if job.suite == suite and (job.folder / "records.jsonl").is_file()]
        if not ran:
            continue
        rows = [method_row(job.method.name, job.folder) for job in ran]
        title = (f"{suite}: case seed {options.seed}, rates over all cases of the row "
                 f"({'generated' if suite == 'mnist' else 'held-out real'} origins)")
        to_real = any(row.get("median_ms_ssim_to_real") is not None for row in rows)
        columns = (*PRINTED, "median MS-SSIM to the real image") if to_real else PRINTED
        show(console, title, columns, [printed_cells(row, to_real) for row in rows], options.markdown)
        reference = next((row for row in rows if row["method"] == REFERENCE), None)
        if reference is not None:
            show(console, f"{suite}: SUT evaluations per failure, against {REFERENCE}",
                 ("method", "evals / valid", "vs hynea", "evals / stable", "vs hynea"),
                 [ratio_cells(row, reference) for row in rows], options.markdown)
        unfinished = [f"{job.method.name} ({job.state or 'unfinished'})" for job in ran if not finished(job)]
        if unfinished:
            console.print(f"{suite}: not every case has run yet: {', '.join(unfinished)}")
        if not options.no_report:
            report_suite([job.folder for job in ran], out / suite / "report", console)
    if failed:
        console.print(f"error: {len(failed)} run(s) failed: " + ", ".join(f"{j.suite}/{j.method.name}" for j in failed))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
