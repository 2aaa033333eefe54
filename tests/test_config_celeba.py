"""configs/celeba_ldm_resnet50.yaml through ``python -m hynea_pl fit``, with tiny checkpoints of the same classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torchvision
from tiny_unconditional import save_tiny_checkpoint

from hynea_pl.cli import main

CONFIG = "configs/celeba_ldm_resnet50.yaml"


def tiny_resnet_weights(path: Path) -> Path:
    """A torchvision ResNet (BasicBlock, one block per stage) with 40 logits, saved as a state dict."""
    torch.manual_seed(0)
    model = torchvision.models.resnet.ResNet(torchvision.models.resnet.BasicBlock, [1, 1, 1, 1], num_classes=40)
    torch.save(model.state_dict(), path)
    return path


def celeba_args(tmp_path: Path, ldm: str, sut_weights: str) -> list[str]:
    """The CelebA config with its checkpoints swapped for tiny ones: 1 case, 2 steps, 2 sampling steps."""
    return [
        "fit", "--config", CONFIG,
        "--generator.init_args.pretrained", ldm,
        "--generator.init_args.num_inference_steps", "2",
        "--generator.init_args.gradient_checkpointing", "false",
        "--sut.init_args.model", "torchvision.models.resnet.ResNet",
        "--sut.init_args.model.init_args.block", "torchvision.models.resnet.BasicBlock",
        "--sut.init_args.model.init_args.layers", "[1, 1, 1, 1]",
        "--sut.init_args.model.init_args.num_classes", "40",
        "--sut.init_args.weights", sut_weights,
        "--sut.init_args.preprocess.size", "32",
        "--cases.n_per_class", "1", "--cases.validate_origins", "false",
        "--trainer.max_steps", "2", "--trainer.accelerator", "cpu",
        "--output.root", str(tmp_path / "runs"), "--output.name", "celeba",
    ]


def test_celeba_config_runs_one_case_for_two_steps(tmp_path, no_network):
    ldm = save_tiny_checkpoint(tmp_path / "ldm")
    weights = tiny_resnet_weights(tmp_path / "resnet.pt")
    assert main(celeba_args(tmp_path, str(ldm), str(weights))) == 0
    lines = (tmp_path / "runs" / "celeba" / "records.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["error"] is None, record["error"]
    assert record["case_id"] == "u-0" and record["origin_class"] is None and record["task"] == "binary"
    assert record["sut_evals"] == 2 and record["steps"] == 2  # step 1 renders the origin: no flip before step 2
    assert record["target"] == 31, "Smiling, the config's attribute"
    assert len(record["origin_pred"]) == 40


def test_evaluate_on_a_celeba_style_run_builds_no_mnist_zoo(tmp_path, monkeypatch, no_network, capsys):
    ldm = save_tiny_checkpoint(tmp_path / "ldm")
    weights = tiny_resnet_weights(tmp_path / "resnet.pt")
    assert main(celeba_args(tmp_path, str(ldm), str(weights))) == 0
    cache, torch_home = tmp_path / "empty_cache", tmp_path / "empty_torch_home"
    monkeypatch.setenv("HYNEA_PL_CACHE", str(cache))
    monkeypatch.setenv("TORCH_HOME", str(torch_home))
    run = tmp_path / "runs" / "celeba"
    assert main(["evaluate", str(run)]) == 0  # embedder "auto": the run's own config says it is no zoo run
    assert not (cache / "zoo").exists(), "evaluate built the MNIST zoo for a CelebA run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["task"] == "binary" and metrics["n_cases"] == 1
    assert metrics["diversity"]["value"] is None and "resnet50" in metrics["diversity"]["unavailable"].lower()


@pytest.mark.parametrize("which", ["generator", "sut"])
def test_missing_checkpoint_exits_2_with_one_line_naming_it(tmp_path, capsys, no_network, which):
    ldm, weights = str(tmp_path / "no_ldm"), str(tmp_path / "no_resnet.pt")
    if which == "generator":
        weights = str(tiny_resnet_weights(tmp_path / "resnet.pt"))
    else:
        ldm = str(save_tiny_checkpoint(tmp_path / "ldm"))
    assert main(celeba_args(tmp_path, ldm, weights)) == 2
    err = capsys.readouterr().err.strip()
    missing = ldm if which == "generator" else weights
    assert len(err.splitlines()) == 1 and missing in err and "not found" in err
