"""Command line: ``python -m hynea_pl {fit,zoo,evaluate} ...``."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import traceback
import warnings
from pathlib import Path
from typing import NoReturn

from hynea_pl import errors
from hynea_pl.errors import CampaignFailed, ConfigMismatch, one_line

#: the package's folders (the baselines' is the checkout's top-level baselines/ until installed from a wheel): a
#: warning raised there is the package's own, shown as one plain line
PACKAGE_DIRS = tuple(str(Path(folder).resolve()) for folder in (
    Path(__file__).parent, *importlib.util.find_spec("hynea_pl.baselines").submodule_search_locations))

USAGE = """usage: python -m hynea_pl [--debug] <command> [options]

  --debug   a failing command prints its full traceback, a failed case prints its traceback as it fails (a failed
            case's traceback is always kept in the run folder: errors/<case_id>.txt, named by its record)

commands:
  fit --config CONFIG.yaml [--section.option VALUE ...]   run a campaign of test cases (see fit --help)
  zoo build [--profile full|tiny] [--extras all|none|A,B] build the embedded MNIST zoo (cached), then on-demand
                                                          extras (default: stylegan, which the MNIST GAN configs use);
                                                          installed from the released weights, nothing trained
  zoo build --rebuild [zoo,EXTRA]                         train the base zoo (zoo) or extras again, gates beside the
                                                          released ones'
  zoo build --data PATH --name NAME [--size S] [--channels C] [--base full|tiny] [--set KEY=VALUE ...]
                                                          a zoo of your own labelled images: zoo://NAME/...
            [--accelerator cpu|gpu|auto]                  either build: where its components train
  evaluate RUN_DIR                                        re-score a run folder into metrics.json
  compare RUN_DIR [RUN_DIR ...] [--out DIR]               one table, a row per method (markdown + CSV)
  replay RUN_DIR CASE_ID                                  regenerate a case's result from its saved adapter
  repair RUN_DIR [RUN_DIR ...] --out DIR [--sut SUT.yaml] [--jobs N] [-- FIT_ARGS]
                                                          fine-tune the SUT on the runs' valid failures (and a
                                                          control), then measure both against the original
  sweep --config CONFIG.yaml --grid lr [--out DIR] [--section.option VALUE ...]
                                                          the paper's lr sweep (RQ4): a run per lr_min/lr_max
  rate RUN_DIR [RUN_DIR ...] [--port 8000] [--ratings PATH] [--rater NAME]
                                                          a local page to rate flipped results (RQ3)
  report RUN_DIR [RUN_DIR ...] --out DIR [--ratings PATH] one report.html + report.md: RQ1/RQ2 tables,
                                                          statistics, plots, galleries, RQ4 sweep
  judge IMAGES --out DIR [--people FILE.csv] [--profile full]
                                                          the verdict on any generator's images IMAGES/<class>/<image>
                                                          (PNG or .npy, 28 or 32 px) into DIR/verdicts.csv; with
                                                          people's readings, their agreement (DIR/agreement.csv)
"""


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one line (``main`` prints ``error: ...`` and exits 2), not a usage block."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(f"{self.prog}: {message}")


def format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                   line: str | None = None) -> str:
    """``warnings.formatwarning`` for the command line: a warning the package raises on purpose is one plain line
    (``warning: ...``), without the package's file and source line; any other keeps Python's format. (Only the
    format changes, so that ``warnings.catch_warnings(record=True)`` still records every warning.)"""
    if str(Path(filename).resolve()).startswith(PACKAGE_DIRS):
        return f"warning: {' '.join(str(message).split())}\n"
    return _PYTHON_FORMAT_WARNING(message, category, filename, lineno, line)


_PYTHON_FORMAT_WARNING = warnings.formatwarning


def _zoo(args: list[str]) -> int:
    import argparse

    from hynea_pl.zoo import PROFILES, build_zoo
    from hynea_pl.zoo.registry import extra_names

    parser = OneLineParser(prog="python -m hynea_pl zoo")
    sub = parser.add_subparsers(dest="action", required=True)
    build = sub.add_parser("build", help="build what is missing of a zoo profile and print its quality table")
    build.add_argument("--profile", default="full",
                       help=f"a built-in profile ({', '.join(sorted(PROFILES))}) or one built with --data")
    build.add_argument("--data", metavar="PATH",
                       help="train a profile of your own labelled images: PATH/<class>/<image> (or --labels-csv)")
    build.add_argument("--name", help="the profile's name with --data (then zoo://NAME/ldm, ZooOracle(profile=NAME))")
    build.add_argument("--size", type=int, default=32, help="with --data: images are resized to S x S (default 32)")
    build.add_argument("--channels", type=int, choices=(1, 3),
                       help="with --data: 1 (grey) or 3 (RGB); default: the folder's most common")
    build.add_argument("--labels-csv", metavar="FILE", help="with --data: labels from a CSV (file,label)")
    build.add_argument("--base", choices=sorted(PROFILES), default="full",
                       help="with --data: the built-in profile whose models, steps and gates it takes (default full)")
    build.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="with --data: change one setting of the profile, e.g. denoiser.max_steps=1600, "
                            "gates.verdict_ceiling=0.5, oracles.oracle-1.max_steps=900 (repeatable)")
    build.add_argument("--extras", default=None,
                       help="on-demand components to build too: a comma list (default: stylegan, which the MNIST GAN "
                            f"configs use; none with --data), all or none ({', '.join(extra_names())})")
    build.add_argument("--accelerator", default="cpu",
                       help="train the components on one device of this kind (Lightning's flag: cpu, gpu, cuda, mps, "
                            "auto; default cpu); the gates are measured on the CPU")
    build.add_argument("--rebuild", nargs="?", const="zoo", metavar="zoo,EXTRA",
                       help="train again from scratch (not from the released weights or the cache) and compare the "
                            "gates with the released ones': the base zoo (zoo, the default) and/or extras, a comma "
                            "list (e.g. --rebuild stylegan)")
    release = sub.add_parser("release", help="(maintainers) ship the cached zoo of a profile and its extras in the "
                                             "package")
    release.add_argument("--profile", choices=sorted(PROFILES), default="full")
    options = parser.parse_args(args)
    if options.action == "release":
        from hynea_pl.zoo.registry import BASE_ZOO, build_component, cache_folders
        from hynea_pl.zoo.released import RELEASED
        from hynea_pl.zoo.released import release as write_release

        build_zoo(options.profile, verbose=False)
        for name in extra_names():
            build_component(options.profile, name, verbose=False)
        names = write_release(cache_folders(options.profile, [BASE_ZOO, *extra_names()]))
        print(f"released {len(names)} folders of the {options.profile} zoo and its extras into {RELEASED}")
        return 0
    if options.data is None and (options.name or options.set or options.labels_csv):
        raise ValueError("--name, --set and --labels-csv go with --data PATH (a profile of your own images)")
    from hynea_pl.zoo.train import training_accelerator

    with training_accelerator(options.accelerator):
        return _zoo_from_folder(options) if options.data is not None else _zoo_build(options)


def _zoo_build(options: argparse.Namespace) -> int:
    """``zoo build [--profile P] [--extras ...] [--rebuild]``: a built-in profile and its extras, gated."""
    from rich.console import Console

    from hynea_pl.zoo import build_zoo
    from hynea_pl.zoo.quality import quality_table
    from hynea_pl.zoo.registry import build_component, extra_names, get_component

    def names(text: str) -> list[str]:
        return [name.strip() for name in text.split(",") if name.strip()]

    extras = options.extras or "stylegan"
    wanted = {"all": extra_names(), "none": []}.get(extras)
    wanted = names(extras) if wanted is None else wanted
    rebuild = names(options.rebuild or "")
    wanted = list(dict.fromkeys([*wanted, *(name for name in rebuild if name != "zoo")]))  # a rebuilt extra is shown
    for name in wanted:
        get_component(name)  # an unknown name fails before anything is trained
    if rebuild:
        from hynea_pl.zoo.registry import BASE_ZOO, cache_folders
        from hynea_pl.zoo.released import compare_with_released, discard

        for name in rebuild:
            discard(cache_folders(options.profile, [BASE_ZOO if name == "zoo" else name]))
            if name == "zoo":
                Console().print(compare_with_released(build_zoo(options.profile, verbose=False,
                                                                released=False).manifest_dir))
            else:
                built = build_component(options.profile, name, verbose=False, released=False)
                Console().print(compare_with_released(built.manifest))
    zoo = build_zoo(options.profile, verbose=False)  # after a rebuild: the rebuilt one
    console = Console()
    console.print(quality_table(options.profile, zoo.quality["gates"]))
    console.print(f"zoo {options.profile}: {zoo.manifest_dir} (samples.png, quality.json)")
    for name in wanted:
        built = build_component(options.profile, name, verbose=False)
        console.print(quality_table(f"{options.profile}/{name}", built.quality["gates"]))
        console.print(f"zoo {options.profile}/{name}: {built.entry} (quality: {built.manifest})")
    return 0


def _zoo_from_folder(options: argparse.Namespace) -> int:
    """``zoo build --data PATH --name NAME``: a profile of the user's images, trained and gated."""
    from rich.console import Console

    from hynea_pl.zoo.folder import build_folder_zoo
    from hynea_pl.zoo.quality import quality_table

    if not options.name:
        raise ValueError("zoo build --data needs --name NAME (the profile's name: zoo://NAME/ldm)")
    if options.extras not in (None, "none"):
        raise ValueError("the extras (stylegan, scenes) are trained on MNIST digits; --data builds the base zoo only")
    zoo = build_folder_zoo(options.data, options.name, options.size, options.channels, options.labels_csv,
                               options.base, options.set)
    console = Console()
    console.print(quality_table(options.name, zoo.quality["gates"]))
    console.print(f"zoo {options.name}: {zoo.manifest_dir} (samples.png, quality.json); use it as zoo://{options.name}/"
                  f"ldm, zoo://{options.name}/sut, ZooOracle(profile={options.name}) (configs/custom.yaml)",
                  soft_wrap=True)
    return 0


def _evaluate(args: list[str]) -> int:
    import argparse
    import json
    from pathlib import Path

    from hynea_pl.campaign.records import check_run_folder
    from hynea_pl.evaluation import evaluate_run
    from hynea_pl.report.compare import load_embedder, run_realism_inputs

    parser = OneLineParser(prog="python -m hynea_pl evaluate",
                                     description="Re-score a run folder (records.jsonl + PNGs) into metrics.json.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--embedder", default="auto",
                        help="embedding network for diversity / trace difference: auto (from the run's config: the "
                             "zoo embedder for a zoo run, else resnet50), zoo://<profile> (MNIST zoo embedder), "
                             "resnet50 (ImageNet ResNet-50 from the torch cache) or none")
    parser.add_argument("--lpips-weights", default=None, help="local LPIPS backbone weights (else the torch cache)")
    options = parser.parse_args(args)
    check_run_folder(options.run_dir)
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

    from hynea_pl.campaign.records import check_run_folder
    from hynea_pl.report.compare import (
        compare_runs,
        display_rows,
        origin_statement,
        origins_note,
        write_comparison,
    )

    parser = OneLineParser(prog="python -m hynea_pl compare",
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
        check_run_folder(run_dir)
    note = origins_note(options.run_dirs)
    table = compare_runs(options.run_dirs, embedder=options.embedder, lpips_weights=options.lpips_weights)
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


def _report(args: list[str]) -> int:
    from pathlib import Path

    from hynea_pl.campaign.records import check_run_folder
    from hynea_pl.report.build import build_report
    from hynea_pl.report.significance import MIN_PAIRS

    parser = OneLineParser(prog="python -m hynea_pl report",
                                     description="Write report.html and report.md (RQ1 / RQ2 tables, HyNeA-vs-baseline "
                                                 "statistics, plots, galleries, confusion matrices, the lr_min sweep) "
                                                 "for run folders, from each run's metrics.json (scored first where "
                                                 "a run has none).")
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=None,
                        help="report folder (default: <first run's parent>/report); figures go to its figures/")
    parser.add_argument("--ratings", type=Path, default=None, help="human ratings file: adds the RQ3 section")
    parser.add_argument("--embedder", default="auto",
                        help="embedding network for diversity / trace difference (see evaluate --help; auto: each "
                             "run's own)")
    parser.add_argument("--lpips-weights", default=None)
    parser.add_argument("--gallery-max", type=int, default=20, help="cases per gallery (default 20)")
    parser.add_argument("--min-pairs", type=int, default=MIN_PAIRS,
                        help=f"fewest paired cases for a p-value / effect size (default {MIN_PAIRS})")
    parser.add_argument("--rescore", action="store_true",
                        help="score every run again and rewrite its metrics.json (default: reuse a run's metrics.json)")
    options = parser.parse_args(args)
    for run_dir in options.run_dirs:
        check_run_folder(run_dir)
    out = options.out or options.run_dirs[0].parent / "report"
    report = build_report(options.run_dirs, out, embedder=options.embedder, lpips_weights=options.lpips_weights,
                          ratings=options.ratings, gallery_max=options.gallery_max, min_pairs=options.min_pairs,
                          rescore=options.rescore)
    print(f"wrote {report.html} and {report.markdown} ({len(report.figures)} figures in {out / 'figures'})")
    return 0


def _replay(args: list[str]) -> int:
    from pathlib import Path

    from hynea_pl.campaign.replay import PIXEL_TOLERANCE, replay_case

    parser = OneLineParser(prog="python -m hynea_pl replay",
                                     description="Regenerate a case's result image from its saved adapter and seed, "
                                                 "and check it against the stored PNG and the SUT's label.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("case_id")
    options = parser.parse_args(args)
    result = replay_case(options.run_dir, options.case_id)
    record = result.record
    print(f"{record.case_id}: regenerated from {record.adapter}; max pixel difference to {record.result_image}: "
          f"{result.max_abs_diff * 255:.0f}/255 (tolerance {PIXEL_TOLERANCE * 255:.0f}/255); SUT label "
          f"{result.result_label}, on the stored PNG {result.stored_label} (recorded {record.result_label}): "
          f"{'match' if result.matches else 'MISMATCH'}")
    return 0 if result.matches else 1


def _sweep(args: list[str]) -> int:
    from pathlib import Path

    from rich.console import Console

    from hynea_pl.campaign.sweep import LR_GRIDS, parse_grid, row_line, run_sweep, sweep_table

    parser = OneLineParser(prog="python -m hynea_pl sweep", allow_abbrev=False,
                                     description="The paper's learning-rate sweep (RQ4): one fit per (lr_min, lr_max) "
                                                 "into <out>/lr_<lr_min>_<lr_max>/ (an existing folder is resumed). "
                                                 "Any other option is passed to fit.")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--grid", required=True,
                        help="lr: the task's grid from the paper (see hynea_pl.campaign.sweep), or explicit "
                             "settings lr_min:lr_max,...")
    parser.add_argument("--task", choices=list(LR_GRIDS), default=None,
                        help="whose grid --grid lr runs (default: from the config's file name)")
    parser.add_argument("--out", type=Path, default=None, help="parent of the runs (default runs/<config>_lr_sweep)")
    options, overrides = parser.parse_known_args(args)
    if not options.config.is_file():
        raise FileNotFoundError(f"config file not found: {options.config}")
    settings = parse_grid(options.grid, options.config, options.task)
    out = options.out or Path("runs") / f"{options.config.stem}_lr_sweep"
    print(f"sweep: {len(settings)} lr settings of {options.config} into {out}/", flush=True)
    rows = run_sweep(options.config, settings, out, overrides, fit=fit_with_grids,
                     on_row=lambda row: print(row_line(row), flush=True))
    Console(width=200).print(sweep_table(rows, title=f"lr sweep of {options.config}"))
    failed = [row for row in rows if row["error"]]
    if failed:
        print(f"error: {len(failed)}/{len(rows)} settings failed; first: {failed[0]['run']}: {failed[0]['error']}",
              file=sys.stderr)
        return 2
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _rate(args: list[str]) -> int:
    import signal
    import threading
    from pathlib import Path

    from hynea_pl.report.rate import build_app, make_server
    from hynea_pl.report.ratings import default_ratings_path, load_class_names

    parser = OneLineParser(prog="python -m hynea_pl rate",
                                     description="Serve a local page on which people rate the runs' flipped results "
                                                 "(RQ3): 'Is this a <class>?' and realism 1-5, one image at a time, "
                                                 "method hidden; every answer is appended to the ratings file.")
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--port", type=int, default=8000, help="default 8000; 0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    parser.add_argument("--ratings", type=Path, default=None,
                        help="ratings file (default: ratings.jsonl in the first run's parent folder)")
    parser.add_argument("--rater", default=None, help="the rater's name (default: the page asks for it)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the per-rater shuffle (default 0)")
    parser.add_argument("--class-names", type=Path, default=None,
                        help="class names: a JSON list or object, or one name per line (default: from each run's "
                             "config: 'digit <i>' on the zoo, torchvision's ImageNet names, else 'class <i>')")
    options = parser.parse_args(args)
    if not 0 <= options.port <= 65535:
        raise ValueError(f"--port = {options.port}: must be within 1-65535 (0 picks a free port)")
    ratings = options.ratings or default_ratings_path(options.run_dirs)
    names = load_class_names(options.class_names) if options.class_names else None
    app = build_app(options.run_dirs, ratings, options.rater, options.seed, names)
    server = make_server(app, options.host, options.port)
    host, port = server.server_address[:2]
    print(f"rate: {len(app.items)} flipped results of {len(options.run_dirs)} run(s); answers go to {ratings}",
          flush=True)
    print(f"open http://{host}:{port}/ (Ctrl-C stops; every answer is saved as it is given)", flush=True)
    if threading.current_thread() is threading.main_thread():  # SIGTERM stops it as Ctrl-C does (a background
        signal.signal(signal.SIGTERM, _interrupt)              # job may have SIGINT ignored)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print(f"stopped; the answers are in {ratings}", flush=True)
    finally:
        server.server_close()
    return 0


def fit_with_grids(args: list[str]) -> dict:
    """``fit``, then the run's grids (``grid.png``, ``grid_valid_failures.png``), drawn by the report layer."""
    from hynea_pl.campaign.fit import fit
    from hynea_pl.report.grid import write_grids

    return fit(args, on_records=write_grids)


def _fit(args: list[str]) -> int:
    fit_with_grids(args)
    return 0


def interrupted_line(signal_name: str) -> str:
    """What an interrupted command says, the same for SIGINT (Ctrl-C) and SIGTERM: ``interrupted (SIGINT); 3 records
    kept in runs/x`` when it was writing a run folder."""
    records = sys.modules.get("hynea_pl.campaign.records")
    folder = records.last_opened() if records is not None else None
    if folder is None:
        return f"interrupted ({signal_name}); the records and zoo entries already written are kept"
    return f"interrupted ({signal_name}); {folder.n_kept()} records kept in {folder.path}"


def _repair(args: list[str]) -> int:
    from hynea_pl.repair.command import RepairSettings, repair

    defaults = RepairSettings()
    own, eval_args = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    parser = OneLineParser(prog="python -m hynea_pl repair",
                           description="Fine-tune a SUT on the valid failures of runs (and, as a control, on as many "
                                       "real images), then measure the original, the repaired and the control model: "
                                       "held-out accuracy, the original's natural errors, and a HyNeA campaign "
                                       "against each. Arguments after -- go to those campaigns' fit.")
    parser.add_argument("run_dirs", nargs="+", help="run folders whose valid failures repair the SUT, each once")
    parser.add_argument("--out", required=True,
                        help="the repair's folder: new, empty, or holding a repair of the same arguments (a second "
                             "call reuses what it holds)")
    parser.add_argument("--sut", default=None,
                        help="a SUT file as fit --sut takes it, or a fit config with a sut section (default: the sut "
                             "section of --eval-config)")
    parser.add_argument("--profile", default=defaults.profile,
                        help=f"the zoo profile of the real images (default {defaults.profile})")
    parser.add_argument("--steps", type=int, default=defaults.steps,
                        help=f"fine-tuning steps at most, a positive integer (default {defaults.steps})")
    parser.add_argument("--eval-config", default=defaults.eval_config,
                        help=f"the fit config of the campaign run against each model (default {defaults.eval_config})")
    parser.add_argument("--eval-seeds", type=int, nargs="*", default=list(defaults.eval_seeds),
                        help="case seeds of those campaigns, distinct integers other than the runs' case seeds "
                             "(none: no campaign)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="campaigns at a time, at least 1, one torch thread each when more than one (default 1)")
    options = parser.parse_args(own)  # every value is checked before anything is written (check_arguments)
    repair(options.run_dirs, options.out, sut=options.sut, jobs=options.jobs, profile=options.profile,
           steps=options.steps, eval_config=options.eval_config, eval_seeds=tuple(options.eval_seeds),
           eval_args=tuple(eval_args))
    return 0


def _judge(args: list[str]) -> int:
    from hynea_pl.evaluation.judge_folder import judge_folder
    from hynea_pl.zoo.labelled.oracle_sut import ZooOracle
    from hynea_pl.zoo.labelled.realism import ZooTypicality
    from hynea_pl.zoo.profiles import get_profile

    parser = OneLineParser(prog="python -m hynea_pl judge",
                           description="The verdict on any generator's images: each image of IMAGES/<class>/<image> "
                                       "(PNG or .npy, 28 px zero-padded to 32, or 32 px) read by the zoo's judges as "
                                       "a panel and by its realism test, as a result that must keep its class: "
                                       "valid, degraded, semantic_change or ambiguous (DIR/verdicts.csv).")
    parser.add_argument("images", help="a folder IMAGES/<class>/<image>, class folders named 0-9 for the digits")
    parser.add_argument("--out", required=True, help="where verdicts.csv (and agreement.csv) go")
    parser.add_argument("--people", default=None, metavar="FILE.csv",
                        help="people's readings: a path column (relative to IMAGES), then a column per person, each "
                             "a digit, 'not a digit' or anything else for unsure; adds DIR/agreement.csv")
    parser.add_argument("--profile", default="full", help="the zoo whose judges and realism test read (default full)")
    options = parser.parse_args(args)
    data = get_profile(options.profile).data

    def zoo_readers() -> tuple[ZooOracle, ZooTypicality]:  # the zoo's (hynea_pl.evaluation may not import it)
        return ZooOracle(profile=options.profile, role="judges"), ZooTypicality(options.profile)

    judge_folder(options.images, options.out, options.profile, data, zoo_readers, people=options.people)
    return 0


COMMANDS = {"fit": _fit, "zoo": _zoo, "evaluate": _evaluate, "compare": _compare, "replay": _replay, "report": _report,
            "sweep": _sweep, "rate": _rate, "repair": _repair, "judge": _judge}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    errors.DEBUG = bool(argv) and argv[0] == "--debug"
    argv = argv[1:] if errors.DEBUG else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] not in COMMANDS:
        print(f"error: unknown command {argv[0]!r}; choose one of {sorted(COMMANDS)}", file=sys.stderr)
        return 2
    formatted, warnings.formatwarning = warnings.formatwarning, format_warning
    try:
        return COMMANDS[argv[0]](argv[1:])
    except KeyboardInterrupt:
        print(interrupted_line("SIGINT"), file=sys.stderr)
        return 130
    except SystemExit as stop:  # Lightning turns SIGTERM into a SystemExit without a code, which would exit 0
        from lightning.pytorch.utilities.exceptions import SIGTERMException

        if isinstance(stop, SIGTERMException):
            print(interrupted_line("SIGTERM"), file=sys.stderr)
            return 143
        raise
    except (ConfigMismatch, CampaignFailed) as error:  # the run folder is kept: a mismatch, or failed cases
        return failed(error, 1)
    except (argparse.ArgumentError, FileNotFoundError, ValueError, TypeError, OSError, RuntimeError) as error:
        return failed(error, 2)
    finally:
        warnings.formatwarning = formatted


def failed(error: BaseException, code: int) -> int:
    """Print ``error`` on one line (after its full traceback with ``--debug``) and return the exit ``code``."""
    if errors.DEBUG:
        traceback.print_exception(error, file=sys.stderr)
    print(f"error: {one_line(error)}", file=sys.stderr)
    return code
