"""HyNeA, GIFTbench and SINVAD through ``python -m hynea_pl fit`` on the tiny zoo: the same origins, the same
budget callback, the same records; and ``python -m hynea_pl compare`` over their runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from method_runs import CONFIGS, fit_runs, records, tiny_fit_args
from PIL import Image

from hynea_pl.cli import main


@pytest.fixture(scope="module")
def method_runs(tiny_zoo_cache, tmp_path_factory) -> Path:
    """Every method's run (budget 60: GIFTbench scores 25 + 15 + 15 new images, SINVAD one generation of 50)."""
    root = tmp_path_factory.mktemp("methods")
    fit_runs(tiny_zoo_cache, root, [(method, ()) for method in CONFIGS], budget=60)
    return root


@pytest.mark.slow
def test_every_method_writes_its_named_records_from_identical_origins(method_runs):
    runs = {method: records(method_runs / f"mnist_{method}") for method in CONFIGS}
    reference = runs["hynea"]
    for method, recs in runs.items():
        assert [r["method"] for r in recs] == [method, method]
        assert [(r["case_id"], r["seed"], r["origin_class"]) for r in recs] == [
            (r["case_id"], r["seed"], r["origin_class"]) for r in reference]
        for rec, ref in zip(recs, reference):
            assert rec["error"] is None
            assert rec["origin_pred"] == ref["origin_pred"], f"{method} read a different origin"
            origin = Image.open(method_runs / f"mnist_{method}" / rec["origin_image"])
            assert list(origin.getdata()) == list(
                Image.open(method_runs / "mnist_hynea" / ref["origin_image"]).getdata())
        assert json.loads((method_runs / f"mnist_{method}" / "summary.json").read_text())["n_cases"] == 2


@pytest.mark.slow
def test_the_budget_stops_every_method_at_its_limit(method_runs):
    """Budget 60, counting only images the SUT has not scored: GIFTbench pays for 25 + 15 + 15 (survivors keep
    their fitness; a fourth generation would overrun), SINVAD for its first 50 (a second needs 30 more)."""
    expected = {"giftbench-low-1e-4": [25, 40, 55], "giftbench-high-1e-3": [25, 40, 55], "sinvad": [50]}
    for method, cumulative in expected.items():
        for rec in records(method_runs / f"mnist_{method}"):
            if rec["flipped"]:  # a flip stops earlier, never later
                assert rec["sut_evals"] in cumulative
            else:
                assert (rec["sut_evals"], rec["steps"]) == (cumulative[-1], len(cumulative)), method
            assert rec["sut_evals"] == cumulative[rec["steps"] - 1]
            assert rec["diagnostics"]["generations"] == rec["steps"]
    for rec in records(method_runs / "mnist_giftbench-low-1e-4"):
        assert {"ood_fraction", "anderson_statistic", "pert"} <= rec["diagnostics"]["last"].keys()


@pytest.mark.slow
def test_budget_is_exact_when_the_generations_fill_it(tiny_zoo, tmp_path):
    assert main(tiny_fit_args("giftbench-high-1e-3", tmp_path, budget=70) + ["--cases.classes", "[1]"]) == 0
    (rec,) = records(tmp_path / "mnist_giftbench-high-1e-3")  # 25 + 15 + 15 + 15
    assert rec["sut_evals"] == 70 or (rec["flipped"] and rec["sut_evals"] < 70)


@pytest.mark.slow
def test_compare_writes_one_row_per_method_with_hynea_ratios(method_runs, capsys):
    out = method_runs / "table"
    runs = [str(method_runs / f"mnist_{method}") for method in CONFIGS]
    assert main(["compare", *runs, "--out", str(out), "--embedder", "zoo://tiny"]) == 0
    printed = capsys.readouterr().out
    assert "Origins: identical" in printed
    rows = list(csv.DictReader((out / "compare.csv").open()))
    assert [row["method"] for row in rows] == list(CONFIGS)
    by_method = {row["method"]: row for row in rows}
    assert float(by_method["hynea"]["hynea_eval_ratio"]) == 1.0
    hynea_cost = sum(r["sut_evals"] for r in records(method_runs / "mnist_hynea")) / 2
    for method in ("giftbench-low-1e-4", "sinvad"):
        cost = sum(r["sut_evals"] for r in records(method_runs / f"mnist_{method}")) / 2
        assert float(by_method[method]["hynea_eval_ratio"]) == pytest.approx(hynea_cost / cost)
        assert float(by_method[method]["mean_sut_evals_all"]) == pytest.approx(cost)
    markdown = (out / "compare.md").read_text()
    assert markdown.count("\n| ") == len(CONFIGS) and "trace_difference" in markdown
    assert all(float(row["diversity"]) >= 0 for row in rows)


def test_compare_names_a_missing_run(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "nope")]) == 2
    assert "nope: no such folder" in capsys.readouterr().err


@pytest.mark.slow
def test_compare_notebook_runs_on_the_method_runs(method_runs, monkeypatch):
    """Every code cell of notebooks/compare_methods.ipynb, in order, on the tiny runs."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setenv("HYNEA_PL_RUNS", str(method_runs))
    monkeypatch.setenv("HYNEA_PL_EMBEDDER", "zoo://tiny")
    notebook = json.loads(Path("notebooks/compare_methods.ipynb").read_text())
    namespace: dict = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), "compare_methods.ipynb", "exec"), namespace)
    assert len(namespace["run_dirs"]) == 4 and len(namespace["table"]) == 4
    assert set(namespace["records"]["method"]) == set(CONFIGS)
