"""configs/imagenet_dit_wrn50.yaml end to end, with its checkpoints swapped for tiny random ones."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torchvision
from tiny_dit import save_dit_folder

from hynea_pl.cli import main

CONFIG = "configs/imagenet_dit_wrn50.yaml"


def tiny_args(tmp_path: Path, dit: str, sut_weights: str) -> list[str]:
    """The ImageNet config on a tiny DiT folder and a random ResNet-18 state dict: 1 case (pizza), 2 steps."""
    return [
        "fit", "--config", CONFIG,
        "--generator.init_args.pretrained", dit,
        "--generator.init_args.num_inference_steps", "2",
        "--generator.init_args.gradient_checkpointing", "false",
        "--sut.init_args.name", "resnet18",  # same family as wide_resnet50_2, 1000 classes, fast at 64 px
        "--sut.init_args.weights", sut_weights,
        "--sut.init_args.image_size", "64",
        "--cases.classes", "[963]", "--cases.n_per_class", "1",
        "--cases.validate_origins", "false",  # random models do not recognise pizza
        "--trainer.max_steps", "2", "--trainer.accelerator", "cpu",
        "--output.root", str(tmp_path), "--output.name", "imagenet",
    ]


def random_resnet18(tmp_path: Path) -> str:
    torch.manual_seed(0)
    path = tmp_path / "resnet18.pt"
    torch.save(torchvision.models.resnet18().state_dict(), path)
    return str(path)


def test_config_runs_one_case_for_two_steps(tmp_path, no_network):
    dit = save_dit_folder(tmp_path / "dit")
    assert main(tiny_args(tmp_path, str(dit), random_resnet18(tmp_path))) == 0
    lines = (tmp_path / "imagenet" / "records.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["error"] is None and record["case_id"] == "c963-0" and record["origin_class"] == 963
    assert record["sut_evals"] == 2 and record["steps"] == 2
    assert len(record["origin_pred"]) == 1000


def test_missing_generator_checkpoint_exits_2_with_one_line(tmp_path, no_network, capsys):
    missing = tmp_path / "no_dit_here"
    assert main(tiny_args(tmp_path, str(missing), random_resnet18(tmp_path))) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err and "generator checkpoint not found" in err
