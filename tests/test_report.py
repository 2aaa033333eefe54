"""``python -m hynea_pl report``: the table and statistics builders on crafted records and metrics, the whole page
on crafted run folders (no zoo), and end to end on tiny HyNeA and baseline runs (slow)."""

from __future__ import annotations

import json
import math
import sys
import types
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from method_runs import fit_runs
from PIL import Image
from scipy import stats

from hynea_pl.cli import main
from hynea_pl.metrics.functional.stats import cohens_d
from hynea_pl.report.build import build_report
from hynea_pl.report.document import display_frame
from hynea_pl.report.plots import confusion_plot, distribution_plot, needs_log_scale, sweep_plot
from hynea_pl.report.sensitivity import is_sweep, run_learning_rates, sweep_table
from hynea_pl.report.significance import paired_test, paired_values, statistics_table
from hynea_pl.report.tables import confusion_counts, mean_sd, rq1_table, rq2_table, run_labels, unavailable_notes
from hynea_pl.schema import CaseRecord, read_records, write_records


def case(case_id: str, method: str = "hynea", **fields) -> CaseRecord:
    """A crafted multiclass case record (class and seed from the id ``c<class>-<index>``)."""
    origin = int(case_id[1:].split("-")[0])
    values = {"method": method, "run": "r", "task": "multiclass", "case_id": case_id, "seed": int(case_id[-1]),
              "origin_class": origin, "origin_label": origin, "result_label": origin}
    values.update(fields)
    return CaseRecord(**values)


# ---------------------------------------------------------------------------------------------- statistics
def test_pairs_follow_case_ids_not_positions_and_drop_what_cannot_pair():
    ids = [f"c{k}-{k}" for k in range(8)]
    reference = [case(i, ms_ssim=0.5 + 0.05 * k, sut_evals=10 + k, runtime_s=1.0 + k) for k, i in enumerate(ids)]
    baseline = [case(i, "sinvad", ms_ssim=0.4 + 0.01 * k, sut_evals=50 + 3 * k, runtime_s=2.0 + k)
                for k, i in enumerate(ids)][::-1]  # another order
    baseline[0] = case(baseline[0].case_id, "sinvad", ms_ssim=None, sut_evals=99, runtime_s=5.0)  # c7: no MS-SSIM
    baseline[1] = case(baseline[1].case_id, "sinvad", ms_ssim=0.9, sut_evals=60, runtime_s=float("nan"),
                       error="out of memory")  # c6: failed
    baseline.append(case("c9-9", "sinvad", ms_ssim=0.1, sut_evals=1, runtime_s=1.0))  # only in the baseline
    reference.append(case("c8-8", ms_ssim=0.2, sut_evals=3, runtime_s=1.0))  # only in HyNeA

    got_ids, x, y = paired_values(reference, baseline, "ms_ssim")
    assert got_ids == ids[:6]  # c6 failed, c7 has no MS-SSIM, c8 / c9 exist in one run only
    assert np.allclose(x, [0.5 + 0.05 * k for k in range(6)]) and np.allclose(y, [0.4 + 0.01 * k for k in range(6)])
    got_ids, x, y = paired_values(reference, baseline, "sut_evals")
    assert got_ids == ids and y[6] == 60 and y[7] == 99  # the failed case spent its budget: it pairs
    got_ids, _, _ = paired_values(reference, baseline, "runtime_s")
    assert got_ids == ids[:6] + ids[7:]  # a NaN runtime never pairs

    _, x, y = paired_values(reference, baseline, "sut_evals")
    test = paired_test(x, y)
    assert test["n"] == 8
    assert test["p"] == pytest.approx(stats.wilcoxon(x - y).pvalue)
    assert test["d"] == pytest.approx(cohens_d(x, y)) and test["d"] < 0  # HyNeA spent less


def test_too_few_or_identical_pairs_are_not_a_number_but_say_why():
    few = paired_test(np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0, 5.0]))
    assert (few["p"], few["d"], few["p_note"]) == (None, None, "n/a (n<6)")
    equal = paired_test(np.arange(8.0), np.arange(8.0))
    assert equal["p"] is None and equal["p_note"] == "n/a (all differences 0)" and equal["d"] == 0.0
    constant = paired_test(np.ones(8), np.ones(8))
    assert constant["d"] is None and constant["d_note"] == "n/a (sd 0)"
    assert paired_test(np.array([1.0, 2.0]), np.array([0.0, 0.0]), min_pairs=2)["p"] is not None


def test_statistics_table_has_a_row_per_baseline_and_metric():
    ids = [f"c{k}-{k}" for k in range(7)]
    hynea = [case(i, ms_ssim=0.9, sut_evals=5 + k, runtime_s=1.0 + k) for k, i in enumerate(ids)]
    gift = [case(i, "giftbench-low-1e-4", ms_ssim=0.5 + 0.01 * k, sut_evals=100 + k * k, runtime_s=9.0 + 2 * k)
            for k, i in enumerate(ids)]
    few = [case(i, "sinvad", ms_ssim=0.6, sut_evals=50, runtime_s=3.0) for i in ids[:2]]
    table = statistics_table({"h": hynea}, {"g": gift, "s": few})
    assert list(table["metric"]) == ["MS-SSIM", "SUT evaluations", "runtime (s)"] * 2
    g, s = table[table["baseline run"] == "g"], table[table["baseline run"] == "s"]
    assert list(g["n pairs"]) == [7, 7, 7] and list(s["n pairs"]) == [2, 2, 2]
    assert (s["Wilcoxon p"] == "n/a (n<6)").all() and (s["Cohen's d"] == "n/a (n<6)").all()
    p = stats.wilcoxon([0.9 - (0.5 + 0.01 * k) for k in range(7)]).pvalue  # every pair favours HyNeA
    assert g.iloc[0]["Wilcoxon p"] == f"{p:.2g} *" and float(g.iloc[0]["Cohen's d"]) > 0
    assert table["pairing"].isna().all()  # no generator keys given: the pairing is not claimed either way
    keyed = statistics_table({"h": hynea}, {"g": gift, "s": few}, origin_keys={"h": "ldm", "g": "ldm", "s": "gan"})
    assert set(keyed[keyed["baseline run"] == "g"]["pairing"]) == {"same origin images"}
    assert set(keyed[keyed["baseline run"] == "s"]["pairing"]) == {"same (seed, class) only"}


# ---------------------------------------------------------------------------------------------- tables
def metrics_row(method: str, **values) -> dict:
    row = {"method": method, "n_cases": 4, "misclassification_rate": 1.0, "flip_rate": 1.0, "escape_ratio": 0.0,
           "confidence_reduction": None, "n_judged": 4, "valid_failure_rate": 0.5, "semantic_change_rate": 0.25,
           "ambiguous_rate": 0.25, "mean_ms_ssim": 0.76, "std_ms_ssim": 0.126,
           "lpips": {"value": None, "unavailable": "no LPIPS weights"},
           "lpips_std": {"value": None, "unavailable": "no LPIPS weights"}, "diversity": 0.18,
           "trace_difference": 79.6, "fid": 12.5, "kid_mean": 0.01, "kid_std": None, "fid_valid_failures": None,
           "mean_runtime_s": 94.41, "std_runtime_s": 99.26, "mean_sut_evals_all": 25.29,
           "std_sut_evals_all": 26.72, "median_sut_evals_flipped": 12.0, "sut_evals_per_valid_failure": 50.6,
           "runtime_s_per_valid_failure": 188.8}
    row.update(values)
    return row


def test_rq1_and_rq2_show_metrics_json_values_with_their_sd():
    metrics = [metrics_row("hynea"), metrics_row("sinvad", mean_ms_ssim=0.5, std_ms_ssim=float("nan"),
                                                 valid_failure_rate=None, n_judged=None, fid=None)]
    rq1 = rq1_table(metrics, ["a", "b"], origins=["LDM", "LDM"])
    assert list(rq1.columns[:3]) == ["method", "run folder", "origins"]
    assert "conf. reduction ↑" not in rq1  # no run has one (not a detection task)
    first, second = rq1.iloc[0], rq1.iloc[1]
    assert first["MS-SSIM ↑ (mean ± sd)"] == "0.76 ± 0.126" and second["MS-SSIM ↑ (mean ± sd)"] == "0.5"
    assert first["LPIPS ↓ (mean ± sd)"] == "-" and first["KID ↓ (mean ± sd)"] == "0.01"
    assert first["valid failure ↑"] == 0.5 and pd.isna(second["valid failure ↑"]) and pd.isna(second["FID ↓"])
    assert list(rq1.columns).index("unaccepted") == list(rq1.columns).index("ambiguous") + 1
    assert pd.isna(first["unaccepted"])  # a row without the rate (older metrics.json): empty, not zero
    assert rq1_table([metrics_row("hynea", unaccepted_rate=0.25)], ["a"]).iloc[0]["unaccepted"] == 0.25
    shown = display_frame(rq1)
    assert shown.iloc[1]["valid failure ↑"] == "-" and shown.iloc[1]["judged"] == "-"
    assert shown.iloc[0]["cases"] == "4" and shown.iloc[0]["trace diff ↓"] == "79.6"
    detection = rq1_table([metrics_row("hynea", confidence_reduction=0.95, confidence_reduction_std=0.11)], ["d"])
    assert detection.iloc[0]["conf. reduction ↑"] == "0.95 ± 0.11"

    rq2 = rq2_table(metrics, ["a", "b"], eval_ratio=[1.0, float("nan")])
    assert rq2.iloc[0]["runtime s ↓ (mean ± sd)"] == "94.4 ± 99.3"
    assert rq2.iloc[0]["SUT evals ↓ (mean ± sd, all cases)"] == "25.3 ± 26.7"
    assert rq2.iloc[0]["SUT evals to a flip (median, flipped cases)"] == 12.0
    assert list(display_frame(rq2)["hynea_eval_ratio"]) == ["1", "-"]
    assert unavailable_notes(metrics, ["a", "b"], ["lpips", "fid"]) == [
        "lpips unavailable for a, b: no LPIPS weights"]


def test_mean_sd_and_labels():
    assert mean_sd(None, 1.0) == "-" and mean_sd(2.0, None) == "2" and mean_sd(0.0, 0.0) == "0 ± 0"
    assert run_labels(["x/a", "y/a", "y/b"]) == ["x/a", "y/a", "b"]


def test_confusion_counts_rows_are_origins_columns_every_label_seen():
    records = [case("c1-0", result_label=7, flipped=True), case("c1-1", result_label=7, flipped=True),
               case("c7-2"), case("c3-3", result_label=5, error="NaN loss"),
               case("c2-4", result_label=None),
               CaseRecord(method="hynea", run="r", task="binary", case_id="u-5", seed=5, origin_class=None,
                          result_label=1)]
    counts = confusion_counts(records)
    assert list(counts.index) == [1, 7] and list(counts.columns) == [1, 7]
    assert counts.loc[1, 7] == 2 and counts.loc[7, 7] == 1 and counts.to_numpy().sum() == 3
    assert confusion_counts(records[3:]).empty


def test_log_scale_only_when_positive_values_span_more_than_one_and_a_half_decades():
    assert needs_log_scale([1, 10, 100]) and needs_log_scale([2, 2700])
    assert not needs_log_scale([1, 30]) and not needs_log_scale([0, 1000]) and not needs_log_scale([])
    assert not needs_log_scale([float("nan"), 5.0])


def test_plots_survive_zeros_nans_empty_groups_and_missing_sweep_values(tmp_path):
    path = distribution_plot({"a": [0, 3, 2700], "b": [], "c": [float("nan"), 5.0]}, "evals", "t", tmp_path / "d.png")
    assert Image.open(path).size[0] > 300
    counts = confusion_counts([case("c1-0", result_label=7, flipped=True), case("c2-1")])
    assert Image.open(confusion_plot(counts, "t", tmp_path / "c.png")).size[1] > 100
    sweep = pd.DataFrame({"lr_min": [1e-4, 1e-3], "misclassification_rate": [1.0, 0.5],
                          "valid_failure_rate": [None, None], "mean_ms_ssim": [0.8, 0.7], "std_ms_ssim": [None, 0.1],
                          "fid": [None, None], "mean_runtime_s": [10.0, 2.0], "std_runtime_s": [1.0, None]})
    assert sweep_plot(sweep, tmp_path / "s.png").is_file()


def write_config(run: Path, lr_min: float | None) -> None:
    run.mkdir(parents=True, exist_ok=True)
    init_args = {} if lr_min is None else {"search": {"lr_min": lr_min, "lr_max": 10 * lr_min}}
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"class_path": "x", "init_args": init_args}}))


def test_sweep_reads_lr_min_from_config_and_keeps_hynea_runs_only(tmp_path):
    runs = [tmp_path / name for name in ("a", "b", "c", "d", "e")]
    for run, lr in zip(runs, (1e-3, 1e-5, None, 1e-4)):
        write_config(run, lr)
    assert run_learning_rates(runs[0]) == (1e-3, 1e-2) and run_learning_rates(runs[4]) == (None, None)
    metrics = [metrics_row("hynea", fid=3.0), metrics_row("hynea"), metrics_row("hynea"),
               metrics_row("sinvad"), metrics_row("hynea")]
    sweep = sweep_table(runs, metrics, ["a", "b", "c", "d", "e"])
    assert list(sweep["run folder"]) == ["b", "a"] and list(sweep["lr_min"]) == [1e-5, 1e-3]
    assert sweep.iloc[1]["fid"] == 3.0 and is_sweep(sweep)
    assert not is_sweep(sweep.iloc[:1]) and not is_sweep(sweep_table([], [], []))


# ---------------------------------------------------------------------------------------------- the page
class Page(HTMLParser):
    """Section ids, table ids, image sources and the text of an HTML page."""

    def __init__(self, text: str):
        super().__init__()
        self.sections: list[str] = []
        self.tables: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.sections.append(attrs["id"])
        elif tag == "table":
            self.tables.append(attrs.get("id"))
        elif tag == "img":
            self.images.append(attrs["src"])

    def handle_data(self, data):
        self.text.append(data)


def check_page(out: Path) -> Page:
    """The page parses, every image it references is a PNG beside it (relative path), and the markdown links the
    same images."""
    page = Page((out / "report.html").read_text())
    assert page.images, "no figure in the report"
    for src in page.images:
        assert not Path(src).is_absolute() and not src.startswith(("http:", "https:", "data:"))
        assert (out / src).is_file(), src
        Image.open(out / src).verify()
    markdown = (out / "report.md").read_text()
    assert all(f"]({src})" in markdown for src in page.images)
    return page


def crafted_run(root: Path, method: str, n: int, seed: int, lr_min: float | None = None) -> Path:
    """A run folder of ``n`` cases with random 32 px PNGs and every verdict in turn."""
    rng = np.random.default_rng(seed)
    (root / "cases").mkdir(parents=True)
    records = []
    for i in range(n):
        paths = {}
        for kind in ("origin", "result", "diff"):
            relative = f"cases/c{i % 10}-{i}_{kind}.png"
            Image.fromarray(rng.integers(0, 256, (32, 32), dtype=np.uint8), "L").save(root / relative)
            paths[f"{kind}_image"] = relative
        verdict = ("valid_failure", "semantic_change", "ambiguous", "no_flip")[i % 4]
        label = i % 10 if verdict == "no_flip" else (i + 1) % 10
        logits = [0.0] * 10
        records.append(case(f"c{i % 10}-{i}", method, seed=i, result_label=label, flipped=verdict != "no_flip",
                            verdict=verdict, sut_evals=int(rng.integers(1, 2700)), runtime_s=float(rng.uniform(1, 99)),
                            ms_ssim=float(rng.uniform(0.3, 0.9)), origin_pred=logits, result_pred=logits,
                            target=(i + 1) % 10, **paths))
    write_records(root / "records.jsonl", records)
    write_config(root, lr_min)
    return root


def test_report_on_crafted_runs_has_every_section_table_and_figure(tmp_path, monkeypatch):
    runs = [crafted_run(tmp_path / "hynea_a", "hynea", 8, 0, lr_min=1e-4),
            crafted_run(tmp_path / "hynea_b", "hynea", 8, 1, lr_min=1e-3),
            crafted_run(tmp_path / "sinvad", "sinvad", 8, 2)]
    seen = {}

    def rq3_tables(ratings_path: Path, run_dirs: list[Path]) -> dict[str, pd.DataFrame]:
        seen["args"] = (ratings_path, run_dirs)
        table3 = pd.DataFrame({"label preservation": [0.787, 0.287]}, index=pd.Index(["HyNeA", "Mimicry"],
                                                                                      name="method"))
        return {"table3": table3, "table4": pd.DataFrame({"p": [9.6e-6]}), "kappa": pd.DataFrame({"kappa": [0.336]})}

    monkeypatch.setitem(sys.modules, "hynea_pl.report.ratings", types.SimpleNamespace(rq3_tables=rq3_tables))
    out = tmp_path / "report"
    (tmp_path / "ratings.csv").write_text("read by the stub only\n")
    assert main(["report", *map(str, runs), "--out", str(out), "--embedder", "none", "--ratings",
                 str(tmp_path / "ratings.csv")]) == 0
    assert seen["args"] == (tmp_path / "ratings.csv", runs)
    page = check_page(out)
    assert page.sections[:4] == ["rq1", "rq2", "statistics", "rq3"]
    assert {"galleries", "confusion", "rq4", "gallery-0-valid-failures", "gallery-2-semantic-changes"} <= set(
        page.sections)
    assert {"rq1-table", "rq2-table", "stats-table", "rq4-table", "rq3-table3", "rq3-table4", "rq3-kappa"} <= set(
        page.tables)
    text = " ".join(page.text)
    assert "A flip is not a failure" in text and "HyNeA" in text and "0.787" in text
    sources = set(page.images)
    assert {"figures/rq2_sut_evals.png", "figures/rq2_runtime_s.png", "figures/rq4_lr_min.png"} <= sources
    for index, name in enumerate(("hynea_a", "hynea_b", "sinvad")):
        assert {f"figures/{index:02d}_{name}_{kind}.png" for kind in
                ("cases", "valid_failures", "semantic_changes", "confusion")} <= sources
    assert Image.open(out / "figures/00_hynea_a_valid_failures.png").height > 3 * 96  # three 96 px tiles
    assert (out / "compare.csv").is_file()
    assert "n/a (n<" not in text and "n/a (all" not in text  # 8 pairs each: every p and d computed


def test_report_renders_the_ratings_modules_rq3_tables(tmp_path):
    """``--ratings`` with the real :func:`hynea_pl.report.ratings.rq3_tables`: three raters answer every flipped
    case of a HyNeA and a SINVAD run."""
    ratings_module = pytest.importorskip("hynea_pl.report.ratings")
    runs = [crafted_run(tmp_path / "hynea", "hynea", 8, 0), crafted_run(tmp_path / "sinvad", "sinvad", 8, 1)]
    lines = []
    for rater in ("ann", "bob", "cy"):
        for run in runs:
            for k, record in enumerate(r for r in read_records(run / "records.jsonl") if r.flipped):
                answer = ("yes", "no", "unsure")[(k + len(rater)) % 3] if run.name == "sinvad" else "yes"
                lines.append(json.dumps({
                    "rater": rater, "item": ratings_module.item_id(run.name, record.case_id), "run": run.name,
                    "case_id": record.case_id, "origin_class": record.origin_class, "question": "Is this a digit?",
                    "answer": answer, "realism": 1 + (k % 5), "time": f"2025-01-01T00:00:{len(lines):02d}Z"}))
    ratings = tmp_path / "ratings.jsonl"
    ratings.write_text("\n".join(lines) + "\n")
    report = build_report(runs, tmp_path / "out", embedder="none", ratings=ratings)
    page = check_page(tmp_path / "out")
    assert "rq3" in page.sections
    assert {"rq3-table3", "rq3-table4", "rq3-kappa"} <= set(page.tables)
    assert list(report.tables["rq3_table3"].index) == ["hynea", "sinvad"]
    assert "pairing: pairs are" in " ".join(page.text)


def test_report_without_ratings_or_sweep_says_what_is_missing(tmp_path):
    runs = [crafted_run(tmp_path / "hynea", "hynea", 3, 0), crafted_run(tmp_path / "gift", "giftbench-low-1e-4", 3, 1)]
    report = build_report(runs, tmp_path / "out", embedder="none", gallery_max=2)
    page = check_page(tmp_path / "out")
    assert "rq3" not in page.sections and "rq4-table" not in page.tables
    text = " ".join(page.text)
    assert "n/a (n<6)" in text and "found 0 distinct value" in text
    assert "2 of 3 shown" in text  # the gallery cap
    assert set(report.tables["statistics"]["n pairs"]) == {3}


def test_report_names_a_missing_run_or_ratings_file(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    assert "nope: no such folder" in capsys.readouterr().err
    run = crafted_run(tmp_path / "hynea", "hynea", 2, 0)
    assert main(["report", str(run), "--ratings", str(tmp_path / "ratings.jsonl")]) == 2
    assert "ratings file not found" in capsys.readouterr().err and not (tmp_path / "report").exists()


def test_report_reuses_each_runs_metrics_json_unless_asked_to_rescore(tmp_path, monkeypatch):
    import os

    from hynea_pl.report import compare

    runs = [crafted_run(tmp_path / "hynea", "hynea", 4, 0), crafted_run(tmp_path / "gift", "giftbench-low-1e-4", 4, 1)]
    assert main(["report", *map(str, runs), "--out", str(tmp_path / "first"), "--embedder", "none"]) == 0
    scored = {run: (run / "metrics.json").read_text() for run in runs}  # a run without metrics.json is scored
    for run in runs:  # mark each metrics.json: a reused one shows the mark, a re-scored one loses it
        metrics = json.loads(scored[run])
        metrics["n_cases"] = 99
        (run / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    marked = {run: (run / "metrics.json").read_text() for run in runs}

    def never(run_dir, **_):
        raise AssertionError(f"{run_dir} was re-scored")

    monkeypatch.setattr(compare, "evaluate_run", never)
    assert main(["report", *map(str, runs), "--out", str(tmp_path / "reused"), "--embedder", "none"]) == 0
    assert {run: (run / "metrics.json").read_text() for run in runs} == marked, "report rewrote a metrics.json"
    assert list(pd.read_csv(tmp_path / "reused" / "compare.csv")["n_cases"]) == [99, 99]
    assert "| 99 |" in (tmp_path / "reused" / "report.md").read_text()
    monkeypatch.undo()

    later = (runs[0] / "metrics.json").stat().st_mtime_ns + 10**9  # a resumed run: records newer than its metrics
    os.utime(runs[0] / "records.jsonl", ns=(later, later))
    build_report(runs, tmp_path / "stale", embedder="none")
    assert (runs[0] / "metrics.json").read_text() == scored[runs[0]], "a stale metrics.json is scored again"
    assert (runs[1] / "metrics.json").read_text() == marked[runs[1]]

    assert main(["report", *map(str, runs), "--out", str(tmp_path / "rescored"), "--embedder", "none",
                 "--rescore"]) == 0
    assert {run: (run / "metrics.json").read_text() for run in runs} == scored
    assert (tmp_path / "rescored" / "report.md").read_text() == (tmp_path / "first" / "report.md").read_text()


# ---------------------------------------------------------------------------------------------- tiny zoo runs
@pytest.fixture(scope="module")
def report_runs(tiny_zoo_cache, tmp_path_factory) -> Path:
    """HyNeA at two learning rates and GIFTbench (low) on classes 1 and 7 of the tiny zoo."""
    root = tmp_path_factory.mktemp("report_runs")
    fit_runs(tiny_zoo_cache, root, [
        ("hynea", ()),
        ("hynea", ("--model.init_args.search.lr_min", "1e-3", "--model.init_args.search.lr_max", "1e-2",
                   "--output.name", "mnist_hynea_lr1e-3")),
        ("giftbench-low-1e-4", ()),
    ], budget=40)
    return root


@pytest.mark.slow
def test_report_of_tiny_runs_has_every_table_and_image(report_runs, tiny_zoo_cache, monkeypatch, capsys):
    monkeypatch.setenv("HYNEA_PL_CACHE", tiny_zoo_cache)
    runs = [report_runs / name for name in ("mnist_hynea", "mnist_hynea_lr1e-3", "mnist_giftbench-low-1e-4")]
    out = report_runs / "report_out"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    page = check_page(out)
    assert {"rq1", "rq2", "statistics", "galleries", "confusion", "rq4"} <= set(page.sections)
    assert {"rq1-table", "rq2-table", "stats-table", "rq4-table"} <= set(page.tables)
    sources = set(page.images)
    for index, run in enumerate(runs):
        assert f"figures/{index:02d}_{run.name}_cases.png" in sources
        assert f"figures/{index:02d}_{run.name}_confusion.png" in sources
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["n_cases"] == 2 and "std_sut_evals_all" in metrics
    text = " ".join(page.text)
    assert "Origins: identical in every run" in text and "n/a (n<6)" in text  # 2 pairs only
    assert (out / "compare.csv").is_file()
    assert math.isclose(float(pd.read_csv(out / "compare.csv")["n_cases"].iloc[2]), 2)


@pytest.mark.slow
def test_report_notebook_runs_on_tiny_runs(report_runs, tiny_zoo_cache, monkeypatch, tmp_path):
    """Every code cell of notebooks/report.ipynb, in order, on the tiny runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("HYNEA_PL_CACHE", tiny_zoo_cache)
    monkeypatch.setenv("HYNEA_PL_RUNS", str(report_runs))
    monkeypatch.setenv("HYNEA_PL_REPORT_OUT", str(tmp_path / "nb_report"))
    notebook = json.loads(Path("notebooks/report.ipynb").read_text())
    namespace: dict = {}
    try:
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code":
                exec(compile("".join(cell["source"]), "report.ipynb", "exec"), namespace)
    finally:
        plt.close("all")
    assert len(namespace["run_dirs"]) == 3 and len(namespace["report"].tables["rq1"]) == 3
    assert "rq4" in namespace["report"].figures and (tmp_path / "nb_report" / "report.html").is_file()
