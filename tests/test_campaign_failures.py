"""The campaign on the tiny zoo: one meaning of ``flipped`` for every method, refused method x task pairs, and
per-case failures that are recorded while the campaign goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from hynea_pl.cli import main
from hynea_pl.schema import read_records

CONFIGS = {"hynea": "configs/mnist.yaml", "giftbench-low-1e-4": "configs/mnist_giftbench.yaml",
           "sinvad": "configs/mnist_sinvad.yaml"}
#: HyNeA's steering reference, pointed at the tiny zoo
TINY_REFERENCE = ["--model.init_args.steering.model.init_args.profile", "tiny", "--model.init_args.acceptance.test.init_args.profile", "tiny"]


def tiny(config: str, root: Path, name: str, *extra: str) -> list[str]:
    """A shipped config on the tiny zoo: class 1, one case, 2 sampling steps."""
    return ["fit", "--config", config,
            "--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "2",
            "--sut.init_args.weights", "zoo://tiny/sut", "--sut.init_args.model.init_args.channels", "[8, 16]",
            "--sut.init_args.model.init_args.hidden", "32", "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
            "--cases.classes", "[1]", "--cases.n_per_class", "1", "--cases.validate_origins", "false",
            "--trainer.max_steps", "3", "--budget.max_evals", "100",
            "--output.root", str(root), "--output.name", name, *extra]


@pytest.mark.slow
@pytest.mark.parametrize("method", list(CONFIGS))
def test_flipped_means_the_decision_left_the_origin_for_every_method(method, tiny_zoo, tmp_path):
    """The crafted SUT reads the origin as 0 (target: 1, its runner-up) and every other image as 2."""
    extra = TINY_REFERENCE if method == "hynea" else []
    args = tiny(CONFIGS[method], tmp_path, "third", *extra, "--sut.class_path", "tiny_components.ThirdClassSUT",
                "--sut.init_args.model.init_args.channels", "[8, 16]", "--sut.init_args.model.init_args.hidden", "32")
    assert main(args) == 0
    (record,) = read_records(tmp_path / "third" / "records.jsonl")
    assert record.method == method and record.error is None
    assert (record.origin_label, record.target, record.result_label) == (0, 1, 2)
    assert record.flipped and not record.target_reached
    if method == "hynea":  # HyNeA searches for its target: a flip to a third class does not stop it, nor end its
        attempts = record.diagnostics["attempts"]  # runs (one at each other class), and the kept result is a flip
        assert record.steps == 27 and [a["steps"] for a in attempts] == [3] * 9
        assert attempts[0]["target"] == 1 and len({a["target"] for a in attempts}) > 1
    else:  # the untargeted searches stop at their first flip
        assert record.steps == 1


def test_a_truncation_probe_on_a_detection_config_is_refused_before_any_case(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path / "cache"))
    args = ["fit", "--config", "configs/mnist_truncation.yaml",
            "--sut", "hynea_pl.suts.YOLODetectorSUT", "--sut.init_args.model", "yolov8n.yaml",
            "--sut.init_args.nc", "10", "--sut.init_args.imgsz", "32", "--oracle", "null",
            "--output.root", str(tmp_path / "runs")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "is implemented for multiclass SUTs, not 'detection'" in err
    assert not (tmp_path / "runs").exists(), "no run folder: nothing ran"
    assert not (tmp_path / "cache").exists(), "refused from the config alone: no model was built"


@pytest.mark.slow
def test_a_case_whose_module_build_raises_is_recorded_and_the_next_case_runs(tiny_zoo, tmp_path, capsys):
    args = tiny("configs/mnist.yaml", tmp_path, "flaky", *TINY_REFERENCE, "--cases.classes", "[1, 7]",
                "--model", "tiny_components.FailingBuildHyNeA", "--model.init_args.token", str(tmp_path),
                "--output.method", "hynea")
    assert main(args) == 1  # one case failed, the other ran: everything is written, and the exit code says so
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("error: 1 of 2 cases failed; first error: RuntimeError: module build 2 failed"), last
    assert (tmp_path / "flaky" / "summary.json").is_file()
    first, second = read_records(tmp_path / "flaky" / "records.jsonl")
    assert first.case_id == "c1-0" and "module build 2 failed on purpose" in first.error
    assert first.sut_evals == 0 and first.result_image is None
    # the record names the file that keeps the full traceback, down to the line that raised
    assert first.error.endswith("(traceback: errors/c1-0.txt)")
    kept = (tmp_path / "flaky" / "errors" / "c1-0.txt").read_text()
    assert kept.startswith("Traceback (most recent call last)") and "tiny_components.py" in kept
    assert kept.rstrip().endswith("RuntimeError: module build 2 failed on purpose")
    assert not (tmp_path / "flaky" / "errors" / "c7-0.txt").exists()
    assert second.case_id == "c7-0" and second.error is None and second.sut_evals >= 1
