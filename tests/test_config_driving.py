"""configs/driving_sd15_yolov8.yaml end to end with every checkpoint swapped for a tiny random one, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_sd import save_stable_diffusion, tiny_controlnet, write_control_image

import hynea_pl  # noqa: F401  (offline defaults before ultralytics)
from hynea_pl.cli import main
from hynea_pl.generators.hub import hub_reachable

CONFIG = "configs/driving_sd15_yolov8.yaml"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    """A tiny SD folder, a tiny ControlNet folder and a control-image PNG (same classes as the real ones)."""
    root = tmp_path_factory.mktemp("driving")
    save_stable_diffusion(root / "sd", root / "tokenizer_files")
    tiny_controlnet().save_pretrained(root / "controlnet")
    return {"sd": str(root / "sd"), "controlnet": str(root / "controlnet"),
            "control_image": str(write_control_image(root / "segmentation.png"))}


def tiny_args(checkpoints: dict[str, str], out: Path, **overrides: str) -> list[str]:
    """The driving config with tiny checkpoints, an untrained YOLOv8n at 64 px, 1 case of 2 steps on CPU."""
    options = {
        "generator.init_args.pretrained": checkpoints["sd"],
        "generator.init_args.controlnet": checkpoints["controlnet"],
        "generator.init_args.control_image": checkpoints["control_image"],
        "generator.init_args.num_inference_steps": "2",
        "sut.init_args.model": "yolov8n.yaml",
        "sut.init_args.imgsz": "64",
        "trainer.max_steps": "2",
        "trainer.accelerator": "cpu",
        "cases.n_per_class": "1",
        "cases.validate_origins": "false",
        "output.root": str(out),
        "output.name": "drv",
        **overrides,
    }
    return ["fit", "--config", CONFIG, *(item for key, value in options.items() for item in (f"--{key}", value))]


def test_two_steps_of_the_driving_config(checkpoints, tmp_path, no_network):
    assert main(tiny_args(checkpoints, tmp_path)) == 0
    lines = (tmp_path / "drv" / "records.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["error"] is None, record["error"]
    assert record["case_id"] == "u-0" and record["task"] == "detection" and record["method"] == "hynea"
    assert record["sut_evals"] == 2 and record["steps"] == 2


def test_missing_generator_checkpoint_exits_2_naming_it(checkpoints, tmp_path, no_network, capsys):
    hub_reachable.cache_clear()
    missing = str(tmp_path / "nowhere" / "sd15")
    assert main(tiny_args(checkpoints, tmp_path, **{"generator.init_args.pretrained": missing})) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and missing in err and "generator checkpoint not found" in err
