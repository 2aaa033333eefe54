"""benchmarks/compare_methods.py: which cases a capped method runs, when a run counts as finished (a second call
starts nothing), and the printed tables on real records."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from hynea_pl.schema import read_records, write_records

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def bench():
    path = Path(__file__).parents[1] / "benchmarks" / "compare_methods.py"
    spec = importlib.util.spec_from_file_location("compare_methods", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_cap_takes_one_case_per_class_first(bench):
    assert bench.case_ids(3, None) == [f"c{k}-{i}" for i in range(3) for k in range(10)]
    assert bench.case_ids(3, 12) == [*(f"c{k}-0" for k in range(10)), "c0-1", "c1-1"]
    assert bench.case_ids(1, 5) == ["c0-0", "c1-0", "c2-0", "c3-0", "c4-0"]


def test_fit_commands_name_their_folder_cases_and_origins(bench, tmp_path):
    giftbench = next(m for m in bench.METHODS if m.name == "giftbench-high")
    command = bench.fit_command(giftbench, "mnist", tmp_path, seed=7, n_per_class=3, cap=2)
    assert command[command.index("--output.root") + 1] == str(tmp_path / "mnist")
    assert command[command.index("--output.name") + 1] == "giftbench-high"
    assert command[command.index("--cases.case_ids") + 1] == "[c0-0, c1-0]"
    assert command[command.index("--cases.seed") + 1] == "7"
    real = bench.fit_command(giftbench, "real", tmp_path, seed=0, n_per_class=3, cap=None)
    assert "--cases.case_ids" not in real
    assert real[real.index("--cases.images") + 1].startswith("zoo://full/held_out")
    hynea = next(m for m in bench.METHODS if m.name == "hynea")
    real_hynea = bench.fit_command(hynea, "real", tmp_path, seed=0, n_per_class=3, cap=None)
    assert real_hynea[real_hynea.index("--config") + 1] == "configs/mnist_real.yaml"
    # every method of every suite has a config that exists
    for method in bench.METHODS:
        for config in method.configs:
            assert (Path(__file__).parents[1] / config).is_file(), config


def _run_folder(root: Path, suite: str, name: str, golden: str, case_ids: list[str]) -> Path:
    """A run folder holding the golden records of ``golden``, renamed to ``case_ids`` (cycled)."""
    records = read_records(GOLDEN / f"{golden}.jsonl")
    folder = root / suite / name
    folder.mkdir(parents=True)
    write_records(folder / "records.jsonl",
                  [records[i % len(records)].model_copy(update={"case_id": cid}) for i, cid in enumerate(case_ids)])
    return folder


def test_a_finished_suite_starts_nothing_and_prints_both_tables(bench, tmp_path, monkeypatch, capsys):
    ids = bench.case_ids(1, None)
    _run_folder(tmp_path, "mnist", "hynea", "hynea", ids)
    _run_folder(tmp_path, "mnist", "sinvad", "sinvad", ids)

    def no_fit(*args, **kwargs):
        raise AssertionError("a finished run was started again")

    monkeypatch.setattr(subprocess, "run", no_fit)
    code = bench.main(["--suites", "mnist", "--methods", "hynea", "sinvad", "--n-per-class", "1", "--out",
                       str(tmp_path), "--no-report", "--markdown"])
    out = capsys.readouterr().out
    assert code == 0
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("| hynea") or line.startswith("| sinvad")}
    assert "rates over all cases of the row" in out
    hynea = bench.method_row("hynea", tmp_path / "mnist" / "hynea")
    assert hynea["n_cases"] == 10
    # the method table's row (first) and the ratio table's (second, keyed again by the method: the last one wins)
    method_lines = [line for line in out.splitlines() if line.startswith("| hynea |")]
    assert len(method_lines) == 2
    cells = [cell.strip() for cell in method_lines[0].split("|")[1:-1]]
    assert cells[1] == "10" and cells[2] == bench.fmt(hynea["flip_rate"])
    assert cells[3] == bench.fmt(hynea["valid_failure_rate"])
    ratio = [cell.strip() for cell in method_lines[1].split("|")[1:-1]]
    if hynea["sut_evals_per_valid_failure"]:
        assert ratio[2] == "1.00x"  # HyNeA against itself
    assert set(rows) == {"hynea", "sinvad"}


def test_an_unfinished_run_is_resumed(bench, tmp_path, monkeypatch, capsys):
    _run_folder(tmp_path, "mnist", "sinvad", "sinvad", ["c0-0"])  # 1 of 2 cases
    started = []

    class Done:
        returncode = 0

    def fake_fit(command, **kwargs):
        started.append(command)
        return Done()

    monkeypatch.setattr(subprocess, "run", fake_fit)
    bench.main(["--suites", "mnist", "--methods", "sinvad", "--n-per-class", "1", "--cap", "sinvad=2", "--out",
                str(tmp_path), "--no-report"])
    assert len(started) == 1 and started[0][started[0].index("--cases.case_ids") + 1] == "[c0-0, c1-0]"
    assert "not every case has run yet: sinvad" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "says"), [
    (["--cap", "nonsense=3"], "--cap takes METHOD=N"),
    (["--cap", "sinvad=x"], "--cap takes METHOD=N"),
    (["--suites", "nope"], "argument --suites: invalid choice: 'nope'"),
    (["--methods", "nope"], "argument --methods: invalid choice: 'nope'"),
    (["--jobs", "two"], "argument --jobs: invalid int value"),
])
def test_a_bad_argument_is_one_line(bench, args, says, capsys):
    assert bench.main([*args, "--no-run"]) == 2
    captured = capsys.readouterr()
    assert says in captured.err and len(captured.err.strip().splitlines()) == 1 and not captured.out
