"""docs/own_method.md's method of your own (docs/examples/noise_walk.py), run by ``fit`` on the tiny zoo as a user
runs it: its option on the command line, its records in the shared schema, a misspelt option named."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from hynea_pl.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def noise_walk_args(root: Path, *extra: str) -> list[str]:
    return ["fit", "--config", "configs/mnist.yaml", "--model", "noise_walk.NoiseWalkCase",
            "--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "2",
            "--sut.init_args.weights", "zoo://tiny/sut", "--sut.init_args.model.init_args.channels", "[8, 16]",
            "--sut.init_args.model.init_args.hidden", "32", "--oracle.init_args.profile", "tiny",
            "--realism.init_args.profile", "tiny", "--cases.classes", "[1, 7]", "--cases.n_per_class", "1",
            "--cases.validate_origins", "false", "--trainer.max_steps", "4", "--budget.max_evals", "3",
            "--output.root", str(root), "--output.name", "walk", *extra]


@pytest.fixture
def examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    sys.modules.pop("noise_walk", None)


def test_a_method_of_your_own_runs_under_the_campaign(examples_importable, tiny_zoo, tmp_path):
    assert main(noise_walk_args(tmp_path, "--model.init_args.step_size", "0.5")) == 0
    run = tmp_path / "walk"
    config = yaml.safe_load((run / "config.yaml").read_text())["model"]
    assert config == {"class_path": "noise_walk.NoiseWalkCase", "init_args": {"step_size": 0.5}}
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert [r["case_id"] for r in records] == ["c1-0", "c7-0"]
    for record in records:
        assert record["method"] == "noise-walk" and record["error"] is None
        assert 1 <= record["sut_evals"] <= 3  # the campaign's budget stops the walk: 3 of its 4 steps at most
        assert record["result_image"] and record["verdict"] is not None
    assert json.loads((run / "summary.json").read_text())["n_cases"] == 2


def test_a_misspelt_option_of_your_method_is_named(examples_importable, tmp_path, capsys):
    assert main(noise_walk_args(tmp_path, "--model.init_args.step_sise", "0.5")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "step_sise" in err and "did you mean 'step_size'" in err
    assert not (tmp_path / "walk").exists()
