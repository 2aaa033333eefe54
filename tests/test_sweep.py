"""``python -m hynea_pl sweep``: the paper's lr grids, the fit arguments per setting, and a real 2-point sweep on the
tiny zoo (run folders whose config.yaml carries the setting, resumed on a second start)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from method_runs import tiny_fit_args

from hynea_pl.campaign.config import parse_config
from hynea_pl.errors import CampaignFailed
from hynea_pl.campaign.sweep import LR_GRIDS, LRSetting, parse_grid, run_sweep, task_of_config
from hynea_pl.cli import main


def test_the_imagenet_grid_is_the_papers_formula_with_lr_max_100_lr_min():
    grid = LR_GRIDS["imagenet"]
    assert [s.lr_min for s in grid] == [1e-8, 3e-8, 1e-7, 3e-7, 1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4]
    assert all(s.lr_max == pytest.approx(100 * s.lr_min) for s in grid)
    assert LRSetting(1e-6, 1e-4) in grid  # the schedule the paper picked for ImageNet


@pytest.mark.parametrize(("task", "picked"), [("celeba", LRSetting(1e-5, 4e-4)), ("driving", LRSetting(1e-4, 4e-3))])
def test_celeba_and_driving_grids_have_nine_increasing_settings_with_the_picked_one(task, picked):
    grid = LR_GRIDS[task]
    assert len(grid) == 9 and picked in grid
    assert [s.lr_min for s in grid] == sorted(s.lr_min for s in grid)
    assert all(s.lr_max > s.lr_min for s in grid)


def test_the_mnist_grid_holds_the_configs_default_and_names_its_run_folders():
    grid = parse_grid("lr", "configs/mnist.yaml")
    default = parse_config(["--config", "configs/mnist.yaml"]).config.model.init_args
    assert LRSetting(default.search.lr_min, default.search.lr_max) in grid
    assert [s.name for s in grid] == ["lr_0.0001_0.001", "lr_0.0003_0.003", "lr_0.001_0.01"]
    assert LRSetting(3e-8, 3e-6).name == "lr_3e-08_3e-06"


def test_the_task_comes_from_the_config_name_or_task():
    assert task_of_config("configs/mnist_giftbench.yaml") == "mnist"
    assert task_of_config("configs/imagenet_dit_wrn50.yaml") == "imagenet"
    assert task_of_config("configs/driving_sd15_yolov8.yaml") == "driving"
    assert parse_grid("lr", "my.yaml", task="celeba") == list(LR_GRIDS["celeba"])
    with pytest.raises(ValueError, match="--task"):
        parse_grid("lr", "my.yaml")
    assert parse_grid("1e-4:1e-3, 2e-4:5e-3", "my.yaml") == [LRSetting(1e-4, 1e-3), LRSetting(2e-4, 5e-3)]
    with pytest.raises(ValueError, match="--grid"):
        parse_grid("1e-4", "my.yaml")


def test_each_setting_is_one_fit_into_its_folder_and_a_failed_one_does_not_stop_the_sweep(tmp_path):
    calls = []

    def fit(args: list[str]) -> dict:
        calls.append(args)
        name = args[args.index("--output.name") + 1]
        if name == "lr_0.001_0.01":
            (tmp_path / name).mkdir()
            (tmp_path / name / "summary.json").write_text(json.dumps({"n_cases": 2, "flip_rate": 0.0}))
            raise CampaignFailed("every case failed (2/2); first error: NaN")
        return {"n_cases": 2, "flip_rate": 1.0, "median_ms_ssim": 0.7}

    rows = run_sweep("configs/mnist.yaml", [LRSetting(1e-4, 1e-3), LRSetting(1e-3, 1e-2)], tmp_path,
                     ["--trainer.max_steps", "2"], fit=fit)
    assert calls[0] == ["--config", "configs/mnist.yaml", "--trainer.max_steps", "2", "--model.init_args.search.lr_min",
                        "0.0001", "--model.init_args.search.lr_max", "0.001", "--output.root", str(tmp_path),
                        "--output.name", "lr_0.0001_0.001"]
    assert [(r["lr_min"], r["flip_rate"], r["error"]) for r in rows] == [
        (1e-4, 1.0, None), (1e-3, 0.0, "every case failed (2/2); first error: NaN")]
    with pytest.raises(ValueError, match="set by the sweep"):
        run_sweep("configs/mnist.yaml", [LRSetting(1e-4, 1e-3)], tmp_path, ["--output.name=x"], fit=fit)


def test_sweep_command_errors_are_one_line(tmp_path, capsys):
    assert main(["sweep", "--config", "configs/mnist.yaml", "--grid", "lr", "--out", str(tmp_path),
                 "--model.init_args.search.lr_min", "1"]) == 2
    assert "error: --model.init_args.search.lr_min is set by the sweep" in capsys.readouterr().err


@pytest.mark.slow
def test_a_two_point_sweep_on_the_tiny_zoo_writes_and_resumes_a_run_per_setting(tiny_zoo, tmp_path, capsys):
    args = tiny_fit_args("hynea", tmp_path, budget=2, max_steps=2, classes=(1,))
    config = args[args.index("--config") + 1]
    root = args.index("--output.root")
    overrides = args[args.index("--config") + 2:root] + args[root + 2:]
    out = tmp_path / "sweep"
    command = ["sweep", "--config", config, "--grid", "1e-3:1e-2,3e-3:3e-2", "--out", str(out), *overrides]
    assert main(command) == 0
    printed = capsys.readouterr().out
    for lr_min, lr_max in ((1e-3, 1e-2), (3e-3, 3e-2)):
        run = out / f"lr_{lr_min:g}_{lr_max:g}"
        search = yaml.safe_load((run / "config.yaml").read_text())["model"]["init_args"]["search"]
        assert (search["lr_min"], search["lr_max"]) == (lr_min, lr_max)
        (record,) = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
        assert record["method"] == "hynea" and record["error"] is None and 1 <= record["steps"] <= 2
        assert json.loads((run / "summary.json").read_text())["n_cases"] == 1
        assert f"sweep {lr_min:g} -> {lr_max:g}: {run}: 1 cases" in printed
    assert sorted(p.name for p in out.iterdir()) == ["lr_0.001_0.01", "lr_0.003_0.03"]
    before = {p: p.read_text() for p in out.glob("*/records.jsonl")}
    assert main(command) == 0  # a second start resumes every folder: no case runs again
    printed = capsys.readouterr().out
    assert printed.count("1 case(s) already recorded are kept") == 2 and "(resumed)" in printed
    assert {p: p.read_text() for p in out.glob("*/records.jsonl")} == before
