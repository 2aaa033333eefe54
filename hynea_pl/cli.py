"""Command line: ``python -m hynea_pl {fit,zoo,evaluate} ...``."""

from __future__ import annotations

import argparse
import sys

from hynea_pl.errors import one_line

USAGE = """usage: python -m hynea_pl <command> [options]

commands:
  fit --config CONFIG.yaml [--section.option VALUE ...]   run a campaign of test cases (see fit --help)
  zoo build [--profile full|tiny] [--extras all|none|A,B] build the embedded MNIST zoo (cached), then its
                                                          on-demand extras (default all: stylegan)
  evaluate RUN_DIR                                        re-score a run folder into metrics.json
  compare RUN_DIR [RUN_DIR ...] [--out DIR]               one table, a row per method (markdown + CSV)
  replay RUN_DIR CASE_ID                                  regenerate a case's result from its saved adapter
"""


def _zoo(args: list[str]) -> int:
    import argparse

    from rich.console import Console

    from hynea_pl.zoo import PROFILES, build_zoo
    from hynea_pl.zoo.extras import build_extra, extra_names, get_extra
    from hynea_pl.zoo.quality import quality_table

    parser = argparse.ArgumentParser(prog="python -m hynea_pl zoo")
    sub = parser.add_subparsers(dest="action", required=True)
    build = sub.add_parser("build", help="build what is missing of a zoo profile and print its quality table")
    build.add_argument("--profile", choices=sorted(PROFILES), default="full")
    build.add_argument("--extras", default="all",
                       help="on-demand components to build too: all (default), none, or a comma list "
                            f"({', '.join(extra_names())})")
    options = parser.parse_args(args)
    wanted = {"all": extra_names(), "none": []}.get(options.extras)
    wanted = [n.strip() for n in options.extras.split(",") if n.strip()] if wanted is None else wanted
    for name in wanted:
        get_extra(name)  # an unknown name fails before anything is trained
    zoo = build_zoo(options.profile, verbose=False)
    console = Console()
    console.print(quality_table(options.profile, zoo.quality["gates"]))
    console.print(f"zoo {options.profile}: {zoo.manifest_dir} (samples.png, quality.json)")
    for name in wanted:
        built = build_extra(options.profile, name, verbose=False)
        console.print(quality_table(f"{options.profile}/{name}", built.quality["gates"]))
        console.print(f"zoo {options.profile}/{name}: {built.entry} (quality: {built.manifest})")
    return 0


def _evaluate(args: list[str]) -> int:
    import argparse
    import json
    from pathlib import Path

    from hynea_pl.metrics import evaluate_run
    from hynea_pl.report.compare import load_embedder, run_realism_inputs

    parser = argparse.ArgumentParser(prog="python -m hynea_pl evaluate",
                                     description="Re-score a run folder (records.jsonl + PNGs) into metrics.json.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--embedder", default="auto",
                        help="embedding network for diversity / trace difference: auto (from the run's config: the "
                             "zoo embedder for a zoo run, else resnet50), zoo://<profile> (MNIST zoo embedder), "
                             "resnet50 (ImageNet ResNet-50 from the torch cache) or none")
    parser.add_argument("--lpips-weights", default=None, help="local LPIPS backbone weights (else the torch cache)")
    options = parser.parse_args(args)
    if not (options.run_dir / "records.jsonl").is_file():
        raise FileNotFoundError(f"no records.jsonl in {options.run_dir}")
    embedder = load_embedder(options.embedder, options.run_dir)
    features, reference = run_realism_inputs(options.run_dir)
    row = evaluate_run(options.run_dir, embedder=embedder, lpips_weights=options.lpips_weights,
                       realism_features=features, realism_reference=reference)
    print(json.dumps(row, indent=2))
    print(f"wrote {options.run_dir / 'metrics.json'}")
    return 0


def _compare(args: list[str]) -> int:
    import argparse
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from hynea_pl.report.compare import (
        compare_runs,
        display_rows,
        origin_mismatches,
        origin_statement,
        write_comparison,
    )

    parser = argparse.ArgumentParser(prog="python -m hynea_pl compare",
                                     description="Compare run folders (one per method) on the shared metrics.")
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=None,
                        help="where compare.md / compare.csv go (default: the first run's parent folder)")
    parser.add_argument("--embedder", default="auto",
                        help="embedding network for diversity / trace difference (see evaluate --help; auto: each "
                             "run's own)")
    parser.add_argument("--lpips-weights", default=None)
    options = parser.parse_args(args)
    for run_dir in options.run_dirs:
        if not (run_dir / "records.jsonl").is_file():
            raise FileNotFoundError(f"no records.jsonl in {run_dir}")
    mismatches = origin_mismatches(options.run_dirs)
    table = compare_runs(options.run_dirs, embedder=options.embedder, lpips_weights=options.lpips_weights)
    note = ("Origins: identical in every run (same case ids, seeds and classes)." if not mismatches else
            f"WARNING: {len(mismatches)} case(s) started from different origins, e.g. {mismatches[0]}")
    columns, rows = display_rows(table)
    rich_table = Table(title="methods compared")
    for column in columns:
        rich_table.add_column(column, justify="left" if column == "method" else "right")
    for row in rows:
        rich_table.add_row(*row)
    console = Console(width=200)
    console.print(rich_table)
    console.print(note)
    console.print(origin_statement(options.run_dirs))
    markdown, csv = write_comparison(table, options.out or options.run_dirs[0].parent, note)
    console.print(f"wrote {markdown} and {csv}")
    return 0


def _replay(args: list[str]) -> int:
    from pathlib import Path

    from hynea_pl.campaign.replay import PIXEL_TOLERANCE, replay_case

    parser = argparse.ArgumentParser(prog="python -m hynea_pl replay",
                                     description="Regenerate a case's result image from its saved adapter and seed, "
                                                 "and check it against the stored PNG and the SUT's label.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("case_id")
    options = parser.parse_args(args)
    result = replay_case(options.run_dir, options.case_id)
    record = result.record
    print(f"{record.case_id}: regenerated from {record.adapter}; max pixel difference to {record.result_image}: "
          f"{result.max_abs_diff * 255:.0f}/255 (tolerance {PIXEL_TOLERANCE * 255:.0f}/255); SUT label "
          f"{result.result_label} (recorded {record.result_label}): {'match' if result.matches else 'MISMATCH'}")
    return 0 if result.matches else 1


def _fit(args: list[str]) -> int:
    from hynea_pl.campaign.cli import fit

    fit(args)
    return 0


COMMANDS = {"fit": _fit, "zoo": _zoo, "evaluate": _evaluate, "compare": _compare, "replay": _replay}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] not in COMMANDS:
        print(f"error: unknown command {argv[0]!r}; choose one of {sorted(COMMANDS)}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[argv[0]](argv[1:])
    except KeyboardInterrupt:
        print("interrupted: the records already written are kept", file=sys.stderr)
        return 130
    except SystemExit as stop:  # Lightning turns SIGTERM into a SystemExit without a code, which would exit 0
        from lightning.pytorch.utilities.exceptions import SIGTERMException

        if isinstance(stop, SIGTERMException):
            print("terminated (SIGTERM): the records and zoo entries already written are kept", file=sys.stderr)
            return 143
        raise
    except (argparse.ArgumentError, FileNotFoundError, ValueError, TypeError, OSError, RuntimeError) as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2
