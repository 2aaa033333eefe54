"""``python -m hynea_pl fit`` end to end on the tiny zoo, and its errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hynea_pl.cli import main

RECORD_KEYS = {"method", "task", "case_id", "seed", "origin_class", "target", "flipped", "sut_evals", "steps",
               "runtime_s", "origin_pred", "result_pred", "ms_ssim", "origin_image", "result_image", "error"}
SUMMARY_KEYS = {"n_cases", "misclassification_rate", "escape_ratio", "median_sut_evals_flipped", "mean_sut_evals_all",
                "ended_before_budget_rate", "mean_runtime_s", "median_ms_ssim"}


def tiny_args(root: Path, name: str, *extra: str) -> list[str]:
    """configs/mnist.yaml pointed at the tiny zoo: 2 classes x 1 case, one run of 3 steps of one SUT evaluation (the
    budget pays for no second run), 4 sampling steps."""
    return [
        "fit", "--config", "configs/mnist.yaml",
        "--generator.init_args.pretrained", "zoo://tiny/ldm",
        "--generator.init_args.num_inference_steps", "4",
        "--sut.init_args.weights", "zoo://tiny/sut",
        "--sut.init_args.model.init_args.channels", "[8, 16]",
        "--sut.init_args.model.init_args.hidden", "32",
        "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
        "--model.init_args.steering.model.init_args.profile", "tiny",
        "--model.init_args.acceptance.test.init_args.profile", "tiny",
        "--cases.classes", "[1, 7]", "--cases.n_per_class", "1",
        "--cases.validate_origins", "false",  # the tiny zoo's random digits are not recognisable
        "--trainer.max_steps", "3", "--budget.max_evals", "3",
        "--output.root", str(root), "--output.name", name, *extra,
    ]


def read_records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def comparable(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("runtime_s", "run")} for r in records]


@pytest.mark.slow
def test_fit_end_to_end_writes_records_images_and_summary(tiny_zoo, tmp_path, no_network, capsys):
    assert main(tiny_args(tmp_path, "a")) == 0
    run = tmp_path / "a"
    records = read_records(run)
    assert [r["case_id"] for r in records] == ["c1-0", "c7-0"]
    assert records[0]["origin_pred"] != records[1]["origin_pred"], "each case has its own origin"
    for record in records:
        assert RECORD_KEYS <= record.keys()
        assert record["method"] == "hynea" and record["task"] == "multiclass" and record["error"] is None
        assert 1 <= record["steps"] <= 3 and record["sut_evals"] == record["steps"]
        assert len(record["origin_pred"]) == 10 and len(record["result_pred"]) == 10
        assert 0.0 <= record["ms_ssim"] <= 1.0
        for key in ("origin_image", "result_image", "diff_image"):
            assert (run / record[key]).is_file()
    summary = json.loads((run / "summary.json").read_text())
    assert SUMMARY_KEYS <= summary.keys() and summary["n_cases"] == 2
    assert summary["misclassification_rate"] == sum(r["flipped"] for r in records) / 2
    assert (run / "grid.png").is_file()
    assert not list(tmp_path.rglob("*.ckpt")) and not list(Path.cwd().glob("lightning_logs/*/checkpoints")), "no ckpt"
    out = capsys.readouterr().out
    assert "misclassification_rate" in out and "[2/2] c7-0" in out
    peak = re.search(r"peak memory: (\d+\.\d) GB \(this process\)", out)
    assert peak and 0.1 < float(peak.group(1)) < 64, out[-300:]  # the closing lines show the process's peak

    # re-scoring the run gives the figures the run printed
    assert main(["evaluate", str(run), "--embedder", "zoo://tiny"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    for key in ("n_cases", "misclassification_rate", "escape_ratio", "median_sut_evals_flipped", "median_ms_ssim"):
        assert metrics[key] == pytest.approx(summary[key]), key
    assert isinstance(metrics["diversity"], float) and isinstance(metrics["trace_difference"], float)
    lpips = metrics["lpips"]  # VGG weights are not in this machine's torch cache: reported unavailable, no number
    assert isinstance(lpips, float) or (lpips["value"] is None and lpips["unavailable"])

    # same config and seed: identical records
    assert main(tiny_args(tmp_path, "b")) == 0
    assert comparable(read_records(tmp_path / "b")) == comparable(records)

    # an existing run is resumed: finished cases are kept, not run again
    assert main(tiny_args(tmp_path, "a", "--cases.classes", "[1, 7, 2]")) == 0
    again = read_records(run)
    assert [r["case_id"] for r in again] == ["c1-0", "c7-0", "c2-0"]
    assert comparable(again[:2]) == comparable(records)


@pytest.mark.slow
def test_non_finite_loss_is_recorded_and_the_campaign_goes_on(tiny_zoo, tmp_path, capsys):
    args = tiny_args(tmp_path, "nan", "--sut.class_path", "tiny_components.NaNAfterOriginSUT",
                     "--sut.init_args.model.init_args.channels", "[8, 16]",
                     "--sut.init_args.model.init_args.hidden", "32")
    assert main(args) == 1  # every case failed: the campaign exits 1, after writing what it has
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "every case failed (2/2)" in err and "NonFiniteLossError" in err
    records = read_records(tmp_path / "nan")
    assert len(records) == 2
    assert all(r["error"].startswith("NonFiniteLossError") and not r["flipped"] for r in records)
    summary = json.loads((tmp_path / "nan" / "summary.json").read_text())
    assert summary["n_errors"] == 2 and summary["misclassification_rate"] == 0.0


@pytest.mark.slow
def test_each_case_gets_its_own_class_and_seed(tiny_zoo, tmp_path):
    from hynea_pl.campaign import Campaign
    from hynea_pl.campaign.case_types import TestCase
    from hynea_pl.campaign.config import parse_config

    campaign = Campaign.from_config(parse_config(tiny_args(tmp_path, "cfg")[1:]))
    assert not (tmp_path / "cfg").exists(), "building a campaign writes nothing"
    models = []
    for case in (TestCase("c1-0", 1, 100000, 0), TestCase("c7-2", 7, 700005, 3)):
        model, trainer_kwargs = campaign.build_case(case)
        assert (model.hparams.origin_class, model.hparams.seed) == (case.origin_class, case.seed)
        assert model.generator is campaign.generator and model.sut is campaign.sut, "frozen parts built once"
        assert trainer_kwargs["devices"] == 1 and trainer_kwargs["accelerator"] == "cpu"
        models.append(model)
    assert models[0] is not models[1] and models[0].hypernet is not models[1].hypernet, "per-case parts are fresh"
    assert [type(c).__name__ for c in campaign.case_callbacks()] == [
        "FlipEarlyStopping", "SUTEvaluationBudget", "CaseImageLogger"], "the callbacks every case runs under"
    assert campaign.case_callbacks()[0] is not campaign.case_callbacks()[0], "each case gets fresh callbacks"


def test_wrong_config_key_is_a_one_line_error_naming_it(tmp_path, capsys):
    assert main(["fit", "--config", "configs/mnist.yaml", "--model.learning_rate", "0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "learning_rate" in err


def test_wrong_key_inside_a_config_file_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path("configs/sections/hynea.yaml").read_text().replace("lr_max:", "lr_maxx:"))
    assert main(["fit", "--config", "configs/mnist.yaml", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "lr_maxx" in err


def test_a_copied_config_without_the_file_it_reads_says_what_to_do(tmp_path, capsys):
    """configs/mnist.yaml reads sections/hynea.yaml beside it: a copy elsewhere without it is one line that says so."""
    copy = tmp_path / "my_mnist.yaml"
    copy.write_text(Path("configs/mnist.yaml").read_text())
    assert main(["fit", "--config", str(copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sections/hynea.yaml" in err and "relative to" in err


def test_missing_sut_checkpoint_is_a_one_line_error_naming_it(tmp_path, capsys, tiny_zoo):
    missing = tmp_path / "nowhere" / "digits.pt"
    args = tiny_args(tmp_path, "x", "--sut.init_args.weights", str(missing))
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err and "SUT checkpoint" in err


def test_help_documents_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--model", "--trainer.max_steps", "--cases.n_per_class", "--budget.max_evals",
                   "--output.name", "--generator", "--sut"):
        assert option in out
    with pytest.raises(SystemExit):  # a method's own options
        main(["fit", "--model.help", "hynea_pl.methods.HyNeACase"])
    out = capsys.readouterr().out
    assert all(f"--model.{group}" in out for group in ("search", "steering", "acceptance", "retries", "prior", "views"))


def test_sigterm_during_a_command_exits_143_not_0(monkeypatch, capsys):
    """Lightning raises SIGTERMException (a SystemExit without a code, i.e. exit 0) when a fit is terminated: a killed
    `zoo build` or campaign must not report success to `make` or a scheduler."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    import hynea_pl.cli as cli

    def terminated(args):
        raise SIGTERMException

    monkeypatch.setitem(cli.COMMANDS, "fit", terminated)
    assert main(["fit"]) == 143
    assert "SIGTERM" in capsys.readouterr().err

    def plain_exit(args):
        raise SystemExit(3)

    monkeypatch.setitem(cli.COMMANDS, "fit", plain_exit)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit"])
    assert exit_info.value.code == 3


def test_debug_prints_the_traceback_of_a_failing_command_and_plain_runs_print_one_line(tmp_path, capsys):
    from hynea_pl import errors

    assert main(["evaluate", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {tmp_path / 'nothing'}: no such folder (a run folder, as fit writes it)"]
    assert main(["--debug", "evaluate", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)") and "in _evaluate" in err
    missing = f"error: {tmp_path / 'nothing'}: no such folder (a run folder, as fit writes it)"
    assert err.rstrip().splitlines()[-1] == missing
    assert main(["evaluate", str(tmp_path / "nothing")]) == 2 and not errors.DEBUG  # one call's flag only
    assert "Traceback" not in capsys.readouterr().err
