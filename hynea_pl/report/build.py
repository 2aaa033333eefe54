"""``python -m hynea_pl report RUN_DIR ... --out DIR``: one ``report.html`` (self-contained; figures as PNG files in
``DIR/figures``, linked by relative paths) and the same ``report.md``.

Sections: RQ1 effectiveness (paper Table 1), RQ2 efficiency (Table 2, with distributions per run), statistics of
HyNeA against each baseline on paired cases, galleries (every case, valid failures, semantic changes), confusion
matrices, RQ4 (HyNeA runs that differ in ``lr_min``) and, given ratings, RQ3 (human ratings). Every metric comes
from each run's ``metrics.json`` (written by ``evaluate_run``; a run without one is scored first, ``rescore``
scores every run again); the statistics from the shared stats module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from torch import Tensor

from hynea_pl.evaluation.rescore import METRICS_FILE
from hynea_pl.report.compare import (
    REFERENCE_METHOD,
    compare_runs,
    origin_generators,
    origin_statement,
    origins_note,
    write_comparison,
)
from hynea_pl.report.document import Figure, Section, Table, Text, render_html, render_markdown
from hynea_pl.report.galleries import write_galleries
from hynea_pl.report.plots import LOG_DECADES, confusion_plot, distribution_plot, sweep_plot
from hynea_pl.report.sensitivity import is_sweep, sweep_table
from hynea_pl.report.significance import MIN_PAIRS, statistics_table
from hynea_pl.report.tables import confusion_counts, metric, rq1_table, rq2_table, run_labels, unavailable_notes
from hynea_pl.schema import CaseRecord, read_records

__all__ = ["Report", "build_report"]

FIGURES = "figures"
TITLE = "HyNeA report"
FLIPS_ARE_NOT_FAILURES = (
    "A flip is not a failure. `misclassification` and `flip rate` count every case whose SUT decision left the "
    "origin's. Only `valid failure` counts real faults of the SUT: flips whose image the validity oracle's judges "
    "still read as the origin's class. `semantic change`: the judges read the SUT's new label (the image changed "
    "class, the SUT was right); `ambiguous`: they read a third class; `unaccepted`: the SUT flipped on the best try "
    "of a case whose method accepted no result (never a failure). Verdict rates are over all cases; `judged` "
    "is how many cases the oracle judged (`-`: the run had no oracle).")


@dataclass
class Report:
    """What ``build_report`` wrote: the two documents, the tables shown and the figure files."""

    out_dir: Path
    html: Path
    markdown: Path
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def _relative(path: Path, out_dir: Path) -> str:
    return path.relative_to(out_dir).as_posix()


def _rq1(metrics: list[dict[str, Any]], labels: list[str], table: pd.DataFrame, run_dirs: list[Path],
         report: Report) -> Section:
    rq1 = rq1_table(metrics, labels, origins=list(table["origins"]))
    report.tables["rq1"] = rq1
    section = Section("RQ1: effectiveness", "rq1").add(Text(FLIPS_ARE_NOT_FAILURES),
                                                      Table(rq1, "rq1-table", "Table 1: effectiveness per run"))
    section.add(Text(origins_note(run_dirs)), Text(origin_statement(run_dirs)))
    section.add(Text("MS-SSIM and LPIPS: mean ± sd over the cases that ran; diversity and trace difference from the "
                     "run's embedder; FID / KID of the results against real images (`compare` / `evaluate`)."))
    for note in unavailable_notes(metrics, labels, ("lpips", "diversity", "trace_difference", "fid", "kid_mean",
                                                    "fid_valid_failures")):
        section.add(Text(note))
    return section


def _rq2(metrics: list[dict[str, Any]], labels: list[str], table: pd.DataFrame,
         records: dict[str, list[CaseRecord]], figures_dir: Path, report: Report) -> Section:
    rq2 = rq2_table(metrics, labels, eval_ratio=list(table["hynea_eval_ratio"]))
    report.tables["rq2"] = rq2
    section = Section("RQ2: efficiency", "rq2").add(
        Text("Runtime and SUT evaluations: mean ± sd over every case (a case that never flips spends its budget, "
             "unless it ends before); `SUT evals to a flip` is the median over flipped cases; `SUT evals per valid "
             "failure` = the evaluations of all cases / valid failures; `ended before budget` = the share of cases "
             "that stopped by the method's own rule or the step limit, without finding what they search for and "
             "before spending the budget; `hynea_eval_ratio` = HyNeA's mean SUT evaluations per case divided by "
             "the run's."),
        Table(rq2, "rq2-table", "Table 2: efficiency per run"))
    cases = {label: [r for r in recs if r.is_case] for label, recs in records.items()}
    for key, name, ylabel in (("sut_evals", "SUT evaluations", "SUT evaluations per case"),
                              ("runtime_s", "runtime", "runtime per case (s)")):
        path = distribution_plot({label: [getattr(r, key) for r in recs] for label, recs in cases.items()},
                                 ylabel, f"{name} per case and run", figures_dir / f"rq2_{key}.png")
        report.figures[f"rq2_{key}"] = path
        section.add(Figure(_relative(path, report.out_dir),
                           f"{name} per case (box: quartiles; dots: cases; log axis when the values span more "
                           f"than {LOG_DECADES} decades)", f"rq2-{key.replace('_', '-')}"))
    return section


def _statistics(metrics: list[dict[str, Any]], labels: list[str], records: dict[str, list[CaseRecord]],
                min_pairs: int, report: Report, run_dirs: list[Path]) -> Section:
    methods = {label: metric(m, "method") for m, label in zip(metrics, labels)}
    references = {label: records[label] for label, method in methods.items() if method == REFERENCE_METHOD}
    baselines = {label: records[label] for label, method in methods.items() if method != REFERENCE_METHOD}
    section = Section("Statistics: HyNeA against each baseline", "statistics")
    if not references or not baselines:
        return section.add(Text(f"Needs a `{REFERENCE_METHOD}` run and a baseline run: "
                                f"{len(references)} HyNeA run(s), {len(baselines)} baseline run(s)."))
    generators = origin_generators(run_dirs)
    origin_keys = {label: generators[str(run)][0] for run, label in zip(run_dirs, labels)}
    stats = statistics_table(references, baselines, min_pairs, origin_keys)
    report.tables["statistics"] = stats
    return section.add(
        Text("Paired cases: the same case id in both runs (MS-SSIM over the cases that ran without error in both; "
             "SUT evaluations and runtime over every case). Two-sided Wilcoxon signed-rank test (scipy; pairs "
             "with zero difference are dropped) and Cohen's d with the pooled SD, HyNeA minus baseline (for "
             "MS-SSIM positive favours HyNeA, for evaluations and runtime negative does). `*`: p < 0.05, no "
             f"correction for multiple comparisons. Fewer than {min_pairs} pairs: n/a (no two-sided p below "
             "0.05 is possible). `pairing`: `same origin images` when both runs sample their origins with the same "
             "generator; `same (seed, class) only` when they do not (e.g. a GAN-based baseline), a weaker pairing "
             "of cases that did not start from the same image."),
        Table(stats, "stats-table", "Wilcoxon p-values and Cohen's d on paired cases"))


def _galleries(run_dirs: list[Path], labels: list[str], records: dict[str, list[CaseRecord]], figures_dir: Path,
               max_cases: int, report: Report) -> tuple[Section, Section]:
    galleries = Section("Galleries", "galleries").add(
        Text("Per case: origin, result and their difference, upscaled (nearest) to at least 96 px; above each "
             "case its id, origin class, the SUT's label on the result and the oracle's verdict. The valid "
             f"failures are the faults that count; semantic changes are flips that are not faults. At most "
             f"{max_cases} cases per gallery, in the run's order."))
    confusion = Section("Confusion matrices", "confusion").add(
        Text("Cases per origin class (rows) and the SUT's label on the result (columns), over the cases that ran; "
             "outlined cells: the label did not change. A flip off the diagonal is a valid failure only when the "
             "oracle agrees (see the galleries)."))
    for index, (run_dir, label) in enumerate(zip(run_dirs, labels)):
        stem = f"{index:02d}_{_slug(label)}"
        method = records[label][0].method if records[label] else "?"
        run_section = Section(f"{method}: {label}", f"gallery-{index}")
        for gallery in write_galleries(run_dir, records[label], figures_dir, stem, max_cases=max_cases):
            part = Section(gallery.title.split(" (")[0], f"gallery-{index}-{gallery.key.replace('_', '-')}")
            if gallery.path is None:
                part.add(Text(f"none: no case of this run is among the {gallery.title}."))
            else:
                report.figures[f"gallery_{stem}_{gallery.key}"] = gallery.path
                part.add(Figure(_relative(gallery.path, report.out_dir),
                                f"{gallery.title}: {gallery.n_shown} of {gallery.n_total} shown",
                                f"figure-gallery-{index}-{gallery.key.replace('_', '-')}", wide=True))
            run_section.add(part)
        galleries.add(run_section)
        counts = confusion_counts(records[label])
        if counts.empty:
            confusion.add(Text(f"{label}: no multiclass case with both labels (binary and detection runs have no "
                               "confusion matrix)."))
            continue
        report.tables[f"confusion:{label}"] = counts
        path = confusion_plot(counts, f"{method}: {label}", figures_dir / f"{stem}_confusion.png")
        report.figures[f"confusion_{stem}"] = path
        confusion.add(Figure(_relative(path, report.out_dir),
                             f"{method} ({label}): origin class → SUT label, {int(counts.to_numpy().sum())} cases",
                             f"confusion-{index}"))
    return galleries, confusion


def _rq4(run_dirs: list[Path], metrics: list[dict[str, Any]], labels: list[str], figures_dir: Path,
         report: Report) -> Section:
    sweep = sweep_table(run_dirs, metrics, labels)
    section = Section("RQ4: learning-rate sensitivity", "rq4")
    if not is_sweep(sweep):
        return section.add(Text(f"Needs at least two `{REFERENCE_METHOD}` runs that differ in "
                                f"`model.init_args.search.lr_min` (config.yaml); found {sweep['lr_min'].nunique()} "
                                "distinct value(s)."))
    report.tables["sweep"] = sweep
    path = sweep_plot(sweep, figures_dir / "rq4_lr_min.png")
    report.figures["rq4"] = path
    return section.add(
        Text("HyNeA runs by `lr_min` (each run's config.yaml); misclassification counts flips, the valid-failure "
             "rate the oracle's verdicts; error bars: sd over the run's cases."),
        Table(sweep, "rq4-table", "Metrics per learning rate"),
        Figure(_relative(path, report.out_dir), "misclassification, valid-failure rate, MS-SSIM, FID and runtime "
               "against lr_min", "rq4-plot"))


def _rq3(ratings: Path, run_dirs: list[Path], report: Report) -> Section:
    from hynea_pl.report.ratings import rq3_tables  # another module's concern: loaded only when asked for

    tables = rq3_tables(Path(ratings), list(run_dirs))
    captions = {"table3": "Table 3: label preservation, image realism, ambiguity",
                "table4": "Table 4: HyNeA against each baseline (Wilcoxon p, Cohen's d)",
                "kappa": "Inter-rater agreement (Fleiss' kappa)"}
    section = Section("RQ3: human ratings", "rq3").add(Text(f"Ratings from `{ratings}`."))
    for key, frame in tables.items():
        report.tables[f"rq3_{key}"] = frame
        section.add(Table(frame, f"rq3-{_slug(key)}", captions.get(key, key)))
        section.add(*(Text(f"{name.replace('_', ' ')}: {value}") for name, value in frame.attrs.items()))
    return section


def build_report(run_dirs: Sequence[Path | str], out_dir: Path | str, *,
                 embedder: Callable[[Tensor], Tensor] | str | None = "auto", lpips_weights: str | None = None,
                 ratings: Path | str | None = None, gallery_max: int = 20, min_pairs: int = MIN_PAIRS,
                 rescore: bool = False) -> Report:
    """Tabulate ``run_dirs`` with ``compare_runs`` (each run's ``metrics.json``) and write ``report.html``,
    ``report.md``, ``compare.md`` / ``compare.csv`` and ``figures/*.png`` into ``out_dir``.

    A run's existing ``metrics.json`` is reused as it is (:func:`hynea_pl.evaluation.read_metrics`): only a run
    without one, or whose records changed after it was written, is scored (``embedder``, ``lpips_weights``) and its
    ``metrics.json`` written. ``rescore``: score every run again and rewrite its ``metrics.json``.

    ``ratings``: a human-ratings file for the RQ3 section (:func:`hynea_pl.report.ratings.rq3_tables`).
    Raises FileNotFoundError for a run folder without ``records.jsonl`` or a missing ratings file."""
    runs = [Path(run) for run in run_dirs]
    if not runs:
        raise ValueError("report needs at least one run folder")
    for run in runs:
        if not (run / "records.jsonl").is_file():
            raise FileNotFoundError(f"no records.jsonl in {run}")
    if ratings is not None and not Path(ratings).is_file():  # before the minutes of re-scoring
        raise FileNotFoundError(f"ratings file not found: {ratings}")
    out = Path(out_dir)
    figures_dir = out / FIGURES
    figures_dir.mkdir(parents=True, exist_ok=True)
    for stale in figures_dir.glob("*.png"):  # figures of an earlier report into the same folder
        stale.unlink()

    table = compare_runs(runs, embedder=embedder, lpips_weights=lpips_weights, rescore=rescore)
    metrics = [json.loads((run / METRICS_FILE).read_text()) for run in runs]
    labels = run_labels(runs)
    records = {label: read_records(run / "records.jsonl") for run, label in zip(runs, labels)}
    write_comparison(table, out, origins_note(runs))

    report = Report(out_dir=out, html=out / "report.html", markdown=out / "report.md")
    sections = [_rq1(metrics, labels, table, runs, report), _rq2(metrics, labels, table, records, figures_dir, report),
                _statistics(metrics, labels, records, min_pairs, report, run_dirs)]
    if ratings is not None:
        sections.append(_rq3(Path(ratings), runs, report))
    galleries, confusion = _galleries(runs, labels, records, figures_dir, gallery_max, report)
    sections += [galleries, confusion, _rq4(runs, metrics, labels, figures_dir, report)]

    intro = [Text("Runs: " + ", ".join(f"`{run}`" for run in runs) + ". Every metric comes from the shared metric "
                  "module (`evaluate_run`, written to each run's metrics.json); `compare.md` / `compare.csv` beside "
                  "this page hold the full comparison table.")]
    report.html.write_text(render_html(TITLE, sections, intro), encoding="utf-8")
    report.markdown.write_text(render_markdown(TITLE, sections, intro), encoding="utf-8")
    return report
