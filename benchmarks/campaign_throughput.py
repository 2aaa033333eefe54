"""Campaign throughput and per-case overhead: prints measured numbers (nothing is asserted).

    .venv/bin/python benchmarks/campaign_throughput.py [--profile tiny|full] [--cases 6] [--processes 1 2]
        [--batch-sizes 1 4 16] [--device cpu|cuda] [--overhead-cases 4] [--steps 10] [--no-overheads]
        [--out runs/throughput]

Three measurements, all on configs/mnist.yaml pointed at the zoo profile:
1. **Cases per hour** of a whole ``python -m hynea_pl fit`` campaign (process start, zoo load and origins included)
   for each process count (``--trainer.devices N``; on ``--device cuda``, N GPUs) and each batch size
   (``--cases.batch_size B``, cases adapting together), side by side in one run, with the campaign process's peak
   resident memory and its flips and valid failures (batching must not change them).
2. **Per-case overhead** (building a case's module and Trainer arguments, then its ``setup``), before and after
   components were shared: "before" re-instantiates the whole parsed config for every case as the runner used to
   (generator, SUT, reference and oracle loaded again); "after" is the campaign's :class:`CaseFactory`.
3. **Lightning overhead** of one HyNeA case: ``Trainer.fit`` of ``--steps`` steps against a bare PyTorch loop
   running the same module's ``training_step`` / optimiser / scheduler for the same steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def zoo_args(profile: str) -> list[str]:
    if profile == "full":
        return []
    return ["--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "4",
            "--sut.init_args.weights", "zoo://tiny/sut", "--sut.init_args.model.init_args.channels", "[8, 16]",
            "--sut.init_args.model.init_args.hidden", "32", "--oracle.init_args.profile", "tiny",
            "--model.init_args.steering.model.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
            "--model.init_args.acceptance.test.init_args.profile", "tiny",
            "--cases.validate_origins", "false"]


def case_args(options: argparse.Namespace) -> list[str]:
    per_class = max(1, -(-options.cases // 10))
    classes = list(range(10))[: max(1, -(-options.cases // per_class))]
    return ["--config", "configs/mnist.yaml", *zoo_args(options.profile), "--cases.classes", json.dumps(classes),
            "--cases.n_per_class", str(per_class), "--trainer.max_steps", str(options.steps)]


def throughput(options: argparse.Namespace, processes: int, batch_size: int = 1) -> dict:
    name = f"{options.profile}_{processes}proc_b{batch_size}"
    run = Path(options.out) / name
    if run.exists():
        import shutil

        shutil.rmtree(run)
    accelerator = "gpu" if options.device == "cuda" else "cpu"
    command = [sys.executable, "-m", "hynea_pl", "fit", *case_args(options), "--trainer.accelerator", accelerator,
               "--trainer.devices", str(processes), "--cases.batch_size", str(batch_size),
               "--output.root", options.out, "--output.name", name]
    log = Path(options.out) / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, text=True,
                                   env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
        try:
            _, status, usage = os.wait4(process.pid, 0)  # the campaign process's own peak RSS (KiB on Linux)
        except BaseException:  # interrupted: never leave the campaign running
            process.kill()
            process.wait()
            raise
        process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"campaign failed ({processes} processes, B={batch_size}): {log.read_text()[-3000:]}")
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    return {"processes": processes, "batch_size": batch_size, "cases": len(records), "wall_s": wall,
            "cases_per_hour": 3600 * len(records) / wall,
            "mean_case_s": statistics.mean(r["runtime_s"] for r in records),
            "peak_rss_gib": usage.ru_maxrss / 2**20, "flipped": sum(bool(r["flipped"]) for r in records),
            "valid_failures": sum(r.get("verdict") == "valid_failure" for r in records),
            "errors": sum(bool(r["error"]) for r in records)}


def overheads(options: argparse.Namespace) -> dict:
    from hynea_pl.campaign import Campaign
    from hynea_pl.campaign.case_types import TestCase
    from hynea_pl.campaign.config import parse_config, quiet_lightning_info

    quiet_lightning_info()
    warnings.filterwarnings("ignore")
    cli = parse_config([*case_args(options), "--output.root", options.out])
    campaign = Campaign.from_config(cli)
    cases = [TestCase(f"c{c}-0", c, 100000 * c, 0) for c in range(options.overhead_cases)]

    def old_build(case: TestCase):  # a runner that instantiates the whole config per case
        built = cli.instantiate()
        return built.model(built.generator, built.sut, case.origin_class, case.seed)

    timings: dict[str, list[float]] = {"before_build_s": [], "after_build_s": [], "setup_s": []}
    for case in cases:
        start = time.perf_counter()
        old_build(case)
        timings["before_build_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        model, _ = campaign.build_case(case, "bench")
        timings["after_build_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        model.setup("fit")
        timings["setup_s"].append(time.perf_counter() - start)
    row = {key: statistics.median(values) for key, values in timings.items()}
    row["before_s"] = row["before_build_s"] + row["setup_s"]
    row["after_s"] = row["after_build_s"] + row["setup_s"]
    row["factor"] = row["before_s"] / row["after_s"]
    row.update(lightning_overhead(campaign, options.steps, options.repeats))
    return row


def lightning_overhead(campaign, steps: int, repeats: int) -> dict:
    """Median seconds of one case's ``steps`` steps under ``Trainer.fit`` vs a bare loop over the same module."""
    import lightning as L
    import torch

    from hynea_pl.campaign.case_types import TestCase

    case = TestCase("c1-0", 1, 100000, 0)

    def fit_once() -> float:
        L.seed_everything(case.seed, verbose=False)
        model, kwargs = campaign.build_case(case, "bench")
        kwargs.update(max_steps=steps, callbacks=[], logger=False)
        trainer = L.Trainer(**kwargs)
        start = time.perf_counter()
        trainer.fit(model)
        return time.perf_counter() - start

    def bare_once() -> float:
        L.seed_everything(case.seed, verbose=False)
        model = campaign.build_module(case)
        # the OneCycle length the Trainer would give (no trainer attached); a copy: the group is shared by the cases
        model.search = dataclasses.replace(model.search, total_steps=steps)
        start = time.perf_counter()
        model.setup("fit")
        config = model.configure_optimizers()
        optimizer, scheduler = config["optimizer"], config["lr_scheduler"]["scheduler"]
        model.train()
        for step in range(steps):
            with torch.enable_grad():
                loss = model.training_step(step, step)["loss"]
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            optimizer.step()
            scheduler.step()
        return time.perf_counter() - start

    fit_s = statistics.median(fit_once() for _ in range(repeats))
    bare_s = statistics.median(bare_once() for _ in range(repeats))
    return {"fit_s": fit_s, "bare_s": bare_s, "lightning_overhead": fit_s / bare_s - 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["tiny", "full"], default="tiny")
    parser.add_argument("--cases", type=int, default=6)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1],
                        help="cases.batch_size values measured side by side (HyNeA batches cases)")
    parser.add_argument("--no-overheads", action="store_true", help="only the cases-per-hour rows")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--overhead-cases", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="runs/throughput")
    options = parser.parse_args()
    os.chdir(REPO)
    print(f"zoo profile {options.profile}, {options.cases} cases of {options.steps} steps, device {options.device}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, load {os.getloadavg()[0]:.2f}")
    rows = []
    for processes in options.processes:
        for batch_size in options.batch_sizes:
            row = throughput(options, processes, batch_size)
            rows.append(row)
            print(f"{processes} process(es), B={batch_size}: {row['cases']} cases in {row['wall_s']:.1f} s wall -> "
                  f"{row['cases_per_hour']:.0f} cases/hour (mean case {row['mean_case_s']:.2f} s), peak RSS "
                  f"{row['peak_rss_gib']:.2f} GiB; flipped {row['flipped']}, valid failures {row['valid_failures']}, "
                  f"errors {row['errors']}", flush=True)
    for processes in options.processes:
        base = next((r for r in rows if r["processes"] == processes and r["batch_size"] == 1), None)
        for row in rows:
            if base is not None and row["processes"] == processes and row["batch_size"] > 1:
                print(f"{processes} process(es): B={row['batch_size']} gives "
                      f"{row['cases_per_hour'] / base['cases_per_hour']:.2f}x the cases/hour of B=1")
    (Path(options.out) / "throughput.json").write_text(json.dumps(rows, indent=2))
    if options.no_overheads:
        return
    row = overheads(options)
    print(f"per-case overhead (build + setup, median of {options.overhead_cases}): before {row['before_s']:.3f} s "
          f"(build {row['before_build_s']:.3f} s), after {row['after_s']:.3f} s (build {row['after_build_s']:.3f} s); "
          f"setup {row['setup_s']:.3f} s; {row['factor']:.1f}x less")
    print(f"one HyNeA case of {options.steps} steps (median of {options.repeats}): Trainer.fit {row['fit_s']:.3f} s, "
          f"bare loop {row['bare_s']:.3f} s -> Lightning overhead {100 * row['lightning_overhead']:+.1f}% "
          f"(target <= 3%)")


if __name__ == "__main__":
    main()
