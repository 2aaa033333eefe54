"""Bad input gets one clear line, before any work starts (issue 28): a test per class of fault.

Each asserts the exit code, that stderr is one line naming the key or file and the reason, and, where a run folder
could be created, that none was. The table of what each bad input gets is docs/guide.md's "Bad input".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from method_runs import tiny_fit_args
from PIL import Image

from hynea_pl.cli import main


def fit_args(root: Path, name: str, *extra: str) -> list[str]:
    """HyNeA on the tiny zoo (classes 1 and 7, one case each, one run of 3 steps of one evaluation) into ``root/name``."""
    return [*tiny_fit_args("hynea", root, budget=3, max_steps=3), "--model.init_args.steering.model.init_args.profile",
            "tiny", "--model.init_args.save_adapters", "true", "--output.name", name, *extra]


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------------- values out of range: refused before work
@pytest.mark.parametrize(("extra", "expected"), [
    (["--cases.classes", "[10]"], ["cases.classes", "class 10 is out of range", "0-9"]),
    (["--cases.classes", "[-1]"], ["cases.classes", "class -1 is out of range"]),
    (["--cases.classes", "[]"], ["cases.classes", "at least one class"]),
    (["--cases.n_per_class", "0"], ["cases.n_per_class = 0", ">= 1"]),
    (["--cases.max_seed_tries", "0"], ["cases.max_seed_tries = 0", ">= 1"]),
    (["--budget.max_evals", "-5"], ["budget.max_evals = -5", ">= 1"]),
    (["--trainer.max_steps", "0"], ["trainer.max_steps = 0", ">= 1"]),
    (["--cases.case_ids", "[c1-1]"], ["cases.case_ids", "'c1-1'", "did you mean 'c1-0'"]),
    (["--trainer.devices", "0"], ["trainer.devices = '0'", "count >= 1"]),
    (["--trainer.devices", "[]"], ["trainer.devices = []", "list of device indices"]),
    (["--stability.shift", "-1"], ["stability.shift = -1", ">= 0"]),
    (["--stability.brightness", "[0]"], ["stability.brightness", "> 0"]),
])
def test_out_of_range_values_are_refused_before_any_folder(extra, expected, tiny_zoo, tmp_path, capsys):
    assert main(fit_args(tmp_path, "bad", *extra)) == 2
    err = one_line_error(capsys)
    for part in expected:
        assert part in err, err
    assert not (tmp_path / "bad").exists(), "nothing is created before validation"


@pytest.mark.parametrize("command", [["evaluate"], ["compare"], ["report"], ["replay", "c1-0"]])
@pytest.mark.parametrize("folder", ["missing", "empty", "no-config", "no-record"])
def test_a_folder_that_is_no_run_folder_is_one_line(command, folder, tmp_path, capsys):
    run = tmp_path / "run"
    if folder != "missing":
        run.mkdir()
    if folder in ("no-config", "no-record"):
        (run / "records.jsonl").write_text("" if folder == "no-record" else '{"case_id": "c1-0"}\n')
    if folder == "no-record":
        (run / "config.yaml").write_text("seed_everything: 0\n")
    expected = {"missing": "no such folder", "empty": "it has no records.jsonl",
                "no-config": "it has no config.yaml", "no-record": "its records.jsonl holds no record"}[folder]
    assert main([command[0], str(run), *command[1:]]) == 2
    err = one_line_error(capsys)
    assert str(run) in err and expected in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if folder == "missing" else ["run"])
    assert folder == "missing" or not (run / "metrics.json").exists()


def test_rate_port_out_of_range_is_one_line(tmp_path, capsys):
    assert main(["rate", str(tmp_path), "--port", "99999"]) == 2
    err = one_line_error(capsys)
    assert "--port = 99999" in err and "65535" in err


# ---------------------------------------------------------------------- the parser's reason is kept
@pytest.mark.parametrize(("args", "expected"), [
    (["--trainer.max_steps", "abc"], ['"trainer.max_steps"', "Expected a <class 'int'>", "abc"]),
    (["--sut", "/nonexistent/sut.yaml"], ['"sut"', "/nonexistent/sut.yaml", "does not exist"]),
    (["--model.init_args.lr_maxx", "0.1"], ["lr_maxx", "not accepted", "did you mean 'search.lr_max'"]),
    (["--trainer.max_stepz", "1"], ["max_stepz", "did you mean 'trainer.max_steps'"]),
    (["--generator.init_args.num_inference_steps", "0"], ['"num_inference_steps"', "PositiveInt", "0"]),
    (["--model.init_args.search.lr_max", "-1"], ['"lr_max"', "PositiveFloat", "-1"]),
    (["--model.init_args.search.pct_start", "2"], ['"pct_start"', "OpenUnitInterval", "2"]),
    (["--model.init_args.retries.attempts", "0"], ['"attempts"', "PositiveInt"]),
    (["--oracle.class_path", "hynea_pl.zoo.mnist.oracle_sut.ZooOracle"],  # a config of the layout before
     ["hynea_pl.zoo.mnist.oracle_sut.ZooOracle is now hynea_pl.zoo.labelled.oracle_sut.ZooOracle"]),
])
def test_the_parser_reason_is_kept(args, expected, tmp_path, capsys):
    assert main(["fit", "--config", "configs/mnist.yaml", "--output.root", str(tmp_path), *args]) == 2
    err = one_line_error(capsys)
    for part in expected:
        assert part in err, err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("content", "expected"), [("", "is empty"), ("- a\n- b\n", "is a list"),
                                                   ("a: [b\n", "not valid YAML")])
def test_an_empty_or_malformed_config_file_is_named(content, expected, tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(content)
    assert main(["fit", "--config", str(config)]) == 2
    err = one_line_error(capsys)
    assert str(config) in err and expected in err


def test_a_missing_config_file_is_named(tmp_path, capsys):
    assert main(["fit", "--config", str(tmp_path / "nope.yaml")]) == 2
    err = one_line_error(capsys)
    assert "config file not found" in err and "nope.yaml" in err


def test_garbage_weights_name_the_file(tiny_zoo, tmp_path, capsys):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(os.urandom(300))
    assert main(fit_args(tmp_path, "bad", "--sut.init_args.weights", str(garbage))) == 2
    err = one_line_error(capsys)
    assert str(garbage) in err and "not a loadable state dict" in err and "weights_only" not in err
    assert not (tmp_path / "bad").exists()


# ---------------------------------------------------------------------- an unusable cache
def test_help_works_whatever_the_cache(tmp_path):
    cache = tmp_path / "a_file"
    cache.write_text("not a folder")
    for value in (cache, cache / "below"):
        done = subprocess.run([sys.executable, "-m", "hynea_pl", "--help"], capture_output=True, text=True,
                              env={**os.environ, "HYNEA_PL_CACHE": str(value)}, timeout=120)
        assert done.returncode == 0 and "usage" in done.stdout and not done.stderr.strip()


def test_an_unusable_cache_is_one_line_from_the_command_that_needs_it(tmp_path, monkeypatch, capsys):
    import tempfile

    cache = tmp_path / "a_file"
    cache.write_text("not a folder")
    monkeypatch.setenv("HYNEA_PL_CACHE", str(cache))
    assert main(["zoo", "build", "--profile", "tiny", "--extras", "none"]) == 2
    err = one_line_error(capsys)
    assert f"HYNEA_PL_CACHE={cache}" in err and "not a folder" in err

    monkeypatch.setenv("HYNEA_PL_CACHE", str(cache / "below"))  # a parent that is a file
    assert main(["zoo", "build", "--profile", "tiny", "--extras", "none"]) == 2
    assert "cannot be written" in one_line_error(capsys)

    def read_only(*args, **kwargs):  # a read-only file system (chmod does not stop root)
        raise OSError(30, "Read-only file system")

    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path / "ro"))
    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    assert main(["zoo", "build", "--profile", "tiny", "--extras", "none"]) == 2
    err = one_line_error(capsys)
    assert "cannot be written (Read-only file system)" in err and str(tmp_path / "ro") in err


# ---------------------------------------------------------------------- resume, mismatch, run-folder images
def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_resume_retries_failed_cases_refuses_another_config_and_checks_image_sizes(tiny_zoo, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(fit_args(tmp_path, "run")) == 0
    first = _records(run)
    assert [r["case_id"] for r in first] == ["c1-0", "c7-0"] and not any(r["error"] for r in first)

    # a failed case is run again on resume, its failed record superseded (not duplicated)
    failed = dict(first[0], error="RuntimeError: failed on purpose", flipped=False)
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [failed, first[1]]))
    capsys.readouterr()
    assert main(fit_args(tmp_path, "run")) == 0
    assert "1 failed case(s) are run again" in capsys.readouterr().out
    again = _records(run)
    assert [r["case_id"] for r in again] == ["c1-0", "c7-0"] and not any(r["error"] for r in again)

    # another config: refused naming the keys, nothing written; --output.resume force continues and keeps it
    before = (run / "records.jsonl").read_text()
    assert main(fit_args(tmp_path, "run", "--budget.max_evals", "28")) == 1
    err = one_line_error(capsys)
    assert "budget.max_evals" in err and "--output.resume force" in err and str(run) in err
    assert (run / "records.jsonl").read_text() == before
    assert main(fit_args(tmp_path, "run", "--budget.max_evals", "28", "--output.resume", "force")) == 0
    assert "max_evals: 28" in (run / "config.yaml").read_text()
    assert (run / "records.jsonl").read_text() == before, "finished cases are kept"

    # a PNG of another size in the run folder: one line naming it and both sizes (evaluate; replay: test_replay.py)
    result = run / _records(run)[1]["result_image"]
    Image.new("L", (5, 7)).save(result)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--embedder", "none"]) == 2
    err = one_line_error(capsys)
    assert str(result) in err and "7x5, 1 channel" in err and "32x32" in err


# ---------------------------------------------------------------------- interrupts and empty outputs
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_an_interrupt_says_how_many_records_are_kept(signal_name, tmp_path, monkeypatch, capsys):
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    import hynea_pl.cli as cli
    from hynea_pl.campaign.records import RunFolder
    from hynea_pl.schema import CaseRecord

    def interrupted(args):
        folder = RunFolder(tmp_path, "run")
        folder.append(CaseRecord(method="hynea", run="run", task="multiclass", case_id="c1-0", seed=1,
                                  origin_class=1))
        raise KeyboardInterrupt if signal_name == "SIGINT" else SIGTERMException

    monkeypatch.setitem(cli.COMMANDS, "fit", interrupted)
    assert main(["fit"]) == (130 if signal_name == "SIGINT" else 143)
    err = one_line_error(capsys)
    assert err == f"interrupted ({signal_name}); 1 records kept in {tmp_path / 'run'}"


def test_a_run_without_records_claims_no_files(tmp_path, capsys):
    from hynea_pl.campaign import console

    (tmp_path / "cases").mkdir()
    console.finished("hynea", "run", {}, tmp_path)
    out = capsys.readouterr().out
    assert "no case was recorded" in out and "grid.png" not in out


def test_replay_refuses_a_stored_png_of_another_size(tmp_path):
    """What replay runs on the stored PNG: checked against the regenerated image's shape."""
    import torch

    from hynea_pl.images import check_run_image, load_image

    path = tmp_path / "c1-0_result.png"
    Image.new("L", (5, 7)).save(path)
    with pytest.raises(ValueError, match=r"c1-0_result\.png is 7x5, 1 channel, the run's images are 32x32, 3 channels"):
        check_run_image(path, load_image(path), tuple(torch.zeros(3, 32, 32).shape))


def test_sweep_with_a_missing_config_names_it(tmp_path, capsys):
    assert main(["sweep", "--config", str(tmp_path / "nope.yaml"), "--grid", "lr"]) == 2
    err = one_line_error(capsys)
    assert "config file not found" in err and "nope.yaml" in err
