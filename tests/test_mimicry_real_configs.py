"""Mimicry's two real setups and its binary task.

- ``configs/imagenet_mimicry_styleganxl.yaml`` and ``configs/ffhq_mimicry_stylegan2.yaml`` run two generations of
  ``fit`` with their checkpoints swapped for tiny random ones of the same kind (an NVIDIA pickle + code directory,
  class-conditional with StyleGAN-XL's per-class ``w_avg`` / unconditional; a torchvision ResNet SUT), and a missing
  checkpoint exits 2 with one line naming it;
- binary Mimicry on a crafted unconditional GAN and attribute SUT: ``wn``'s draw, the flip found with the shared
  meaning (``SUT.is_flipped``), and the budget counted exactly, the SUT reads of the ``wn`` choice included.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import pytest
import torch
from test_config_celeba import tiny_resnet_weights
from test_config_imagenet import random_resnet18
from tiny_stylegan import (NVIDIA_MODULE, CraftedGAN, CraftedUnconditionalGAN, attribute_sut, threshold_sut,
                           write_nvidia_pickle)

from hynea_pl.baselines.mimicry import MimicryCase
from hynea_pl.baselines.search import attribute_margin
from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.cli import main
from hynea_pl.generators.stylegan import StyleGANGenerator

IMAGENET = "configs/imagenet_mimicry_styleganxl.yaml"
FFHQ = "configs/ffhq_mimicry_stylegan2.yaml"


@pytest.fixture
def nvidia_code(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Undo what loading a pickle through ``code_path`` leaves behind (``sys.path`` entries, the imported module)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    previous = sys.modules.pop(NVIDIA_MODULE, None)
    yield
    sys.modules.pop(NVIDIA_MODULE, None)
    if previous is not None:
        sys.modules[NVIDIA_MODULE] = previous


def common_args(tmp_path: Path, pkl: Path | str, code: Path | str) -> list[str]:
    """Both configs: the generator pickle and its code, 8 individuals in chunks of 4, 2 generations on CPU."""
    return ["--generator.init_args.network_pkl", str(pkl), "--generator.init_args.code_path", f"[{code}]",
            "--model.init_args.population_size", "8", "--model.init_args.chunk_size", "4",
            "--cases.n_per_class", "1", "--cases.validate_origins", "false",  # random models recognise nothing
            "--trainer.max_steps", "2", "--trainer.accelerator", "cpu",
            "--output.root", str(tmp_path / "runs"), "--output.name", "mimicry"]


def imagenet_args(tmp_path: Path, pkl: Path | str, code: Path | str, sut_weights: str) -> list[str]:
    """The ImageNet config on a tiny class-conditional pickle and a random ResNet-18 (as test_config_imagenet)."""
    return ["fit", "--config", IMAGENET, *common_args(tmp_path, pkl, code),
            "--sut.init_args.name", "resnet18", "--sut.init_args.weights", sut_weights,
            "--sut.init_args.image_size", "64", "--cases.classes", "[963]"]


def ffhq_args(tmp_path: Path, pkl: Path | str, code: Path | str, sut_weights: Path | str) -> list[str]:
    """The FFHQ config on a tiny unconditional pickle and a tiny 40-logit ResNet (as test_config_celeba)."""
    return ["fit", "--config", FFHQ, *common_args(tmp_path, pkl, code),
            "--sut.init_args.model", "torchvision.models.resnet.ResNet",
            "--sut.init_args.model.init_args.block", "torchvision.models.resnet.BasicBlock",
            "--sut.init_args.model.init_args.layers", "[1, 1, 1, 1]",
            "--sut.init_args.model.init_args.num_classes", "40",
            "--sut.init_args.weights", str(sut_weights), "--sut.init_args.preprocess.size", "32"]


def only_record(tmp_path: Path) -> dict:
    lines = (tmp_path / "runs" / "mimicry" / "records.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["error"] is None, record["error"]
    return record


def tiny_imagenet_gan(tmp_path: Path) -> tuple[Path, Path]:
    """StyleGAN-XL's kind: class-conditional over 1000 classes, per-class ``w_avg``, RGB."""
    return write_nvidia_pickle(tmp_path / "gan", "TinyClassGenerator", c_dim=1000, img_channels=3, img_resolution=32)


def tiny_ffhq_gan(tmp_path: Path) -> tuple[Path, Path]:
    """StyleGAN2 FFHQ's kind: unconditional (``c_dim == 0``), RGB."""
    return write_nvidia_pickle(tmp_path / "gan", "TinyGenerator", c_dim=0, img_channels=3, img_resolution=32)


# ---------------------------------------------------------------------- (a) the configs run on tiny checkpoints
def test_imagenet_config_runs_two_generations(tmp_path, no_network, nvidia_code):
    pkl, code = tiny_imagenet_gan(tmp_path)
    assert main(imagenet_args(tmp_path, pkl, code, random_resnet18(tmp_path))) == 0
    record = only_record(tmp_path)
    assert record["method"] == "mimicry" and record["task"] == "multiclass"
    assert record["case_id"] == "c963-0" and record["origin_class"] == 963 and len(record["origin_pred"]) == 1000
    assert record["steps"] == 2 and record["sut_evals"] == 16  # no flip by these random models: 2 generations of 8
    info = record["diagnostics"]
    assert info["rival"] == record["target"] and info["layers"] == list(range(8))
    assert "rival_draw" not in info  # the multiclass record is unchanged


def test_ffhq_config_runs_two_generations(tmp_path, no_network, nvidia_code):
    pkl, code = tiny_ffhq_gan(tmp_path)
    assert main(ffhq_args(tmp_path, pkl, code, tiny_resnet_weights(tmp_path / "resnet.pt"))) == 0
    record = only_record(tmp_path)
    assert record["method"] == "mimicry" and record["task"] == "binary"
    assert record["case_id"] == "u-0" and record["origin_class"] is None and len(record["origin_pred"]) == 40
    assert record["target"] == 31, "Smiling, the config's attribute"
    assert record["steps"] == 2 and record["sut_evals"] == 16  # rival_draws 1: wn costs no read
    info = record["diagnostics"]
    assert info["rival"] is None and info["rival_draw"] == 0 and info["rival_flipped"] is None
    assert info["rival_evals"] == 0 and record["distance"] > 1e-4, "wn must not be the origin's own latent"


# ---------------------------------------------------------------------- (b) a missing checkpoint: one line, exit 2
def test_imagenet_missing_generator_pickle_exits_2_with_one_line(tmp_path, no_network, nvidia_code, capsys):
    missing = tmp_path / "imagenet256.pkl"
    assert main(imagenet_args(tmp_path, missing, tmp_path / "stylegan-xl", random_resnet18(tmp_path))) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err and "not found" in err


@pytest.mark.parametrize("which", ["generator", "sut", "code"])
def test_ffhq_missing_checkpoint_exits_2_with_one_line(tmp_path, no_network, nvidia_code, capsys, which):
    pkl, code = tiny_ffhq_gan(tmp_path)
    weights = tiny_resnet_weights(tmp_path / "resnet.pt")
    missing = {"generator": tmp_path / "stylegan2-ffhq-1024x1024.pkl", "sut": tmp_path / "no_resnet.pt",
               "code": tmp_path / "no_stylegan3"}[which]
    args = ffhq_args(tmp_path, missing if which == "generator" else pkl, missing if which == "code" else code,
                     missing if which == "sut" else weights)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    if which == "code":  # the pickle is named, with the fix (its code directory)
        assert str(pkl) in err and NVIDIA_MODULE in err and "code_path" in err
    else:
        assert str(missing) in err and "not found" in err


# ---------------------------------------------------------------------- (c) binary Mimicry on crafted models
def grey(z: torch.Tensor) -> float:
    """The crafted unconditional GAN's grey level of ``z (1, z_dim)``, in [0, 1]."""
    return (float(torch.tanh(z[0, 0])) + 1) / 2


def stream_greys(search_seed: int, n: int) -> list[float]:
    """Grey levels of the first ``n`` draws ``(1, 4)`` of a search seed's stream, as the case draws them."""
    rng = torch.Generator("cpu").manual_seed(search_seed)
    return [grey(torch.randn((1, 4), generator=rng)) for _ in range(n)]


def binary_case(threshold: float, rival_draws: int, search_seed: int | None = 2, **kwargs) -> MimicryCase:
    """Origin: seed 1 (grey 0.79, the attribute present for thresholds below it); 10 individuals."""
    return MimicryCase(StyleGANGenerator(network=CraftedUnconditionalGAN()), attribute_sut(threshold),
                       origin_class=None, seed=1, search_seed=search_seed, population_size=10,
                       rival_draws=rival_draws, **kwargs)


def fit(case: MimicryCase, budget: int, max_steps: int = 100) -> L.Trainer:
    trainer = L.Trainer(max_steps=max_steps, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                        callbacks=[FlipEarlyStopping(), SUTEvaluationBudget(budget)])
    trainer.fit(case)
    return trainer


def test_the_crafted_premises():
    origin = grey(torch.randn((1, 4), generator=torch.Generator("cpu").manual_seed(1)))
    assert origin == pytest.approx(0.790, abs=1e-3)
    # search seed 2: the stream's first draw is skipped, the candidates are 0.890 (present), 0.313 (absent), 0.066
    assert stream_greys(2, 4)[1:] == pytest.approx([0.890, 0.313, 0.066], abs=1e-3)
    # search seed = seed (1): the stream's first draw is the origin's own z
    assert stream_greys(1, 2) == pytest.approx([0.790, 0.288], abs=1e-3)


def test_binary_flip_is_found_with_the_shared_meaning_and_the_choice_is_counted():
    case = binary_case(0.5, rival_draws=4)
    case.setup("fit")
    assert case.evals_per_step == 10 + 4  # the first generation pays at most every pending read
    trainer = fit(case, budget=2700)
    info = case.record_diagnostics()
    # wn = the first candidate read with the attribute flipped: the 2nd (0.313); 2 reads
    assert info["rival"] is None and info["rival_draw"] == 1 and info["rival_flipped"] is True
    assert info["rival_evals"] == 2
    result, sut = case.result, case.sut
    assert result.found and result.step == trainer.global_step
    assert next(h["step"] for h in result.history if h["found"]) == result.step  # stopped at the first flip
    assert bool(sut.is_flipped(result.output, case.origin_output, case.target)[0])
    assert int(sut.prediction(result.output)[0]) == 0 and int(sut.prediction(case.origin_output)[0]) == 1
    assert float(result.image.mean()) < 0.5
    expected = sut.behaviour_loss(result.output, case.objective, case.target)
    assert result.behaviour_loss == pytest.approx(float(expected))  # BCE toward the origin's decisions, 0 inverted
    # honest budget: every image the SUT read after the origin is one evaluation
    assert case.sut_evals == 2 + 10 * trainer.global_step == sut.model.images_seen - 1
    assert case.evals_per_step == 10


def test_binary_budget_is_exact_with_the_choice_reads():
    # threshold 0.05: the origin and every candidate read present, no mix can flip
    case = binary_case(0.05, rival_draws=3)
    trainer = fit(case, budget=3 + 10 * 3 + 9)  # 3 reads + 3 generations fit, a 4th would overrun by 1
    info = case.record_diagnostics()
    assert info["rival_draw"] == 0 and info["rival_flipped"] is False and info["rival_evals"] == 3
    assert not case.result.found and trainer.global_step == 3
    assert case.sut_evals == 33 == case.sut.model.images_seen - 1
    with pytest.raises(ValueError, match="cannot pay for one step"):  # 10 individuals + 3 pending reads > 12
        fit(binary_case(0.05, rival_draws=3), budget=12)


def test_binary_single_draw_is_free_and_skips_the_origins_own_z():
    case = binary_case(0.5, rival_draws=1, search_seed=None)  # search seed = seed
    case.setup("fit")
    assert case.evals_per_step == 10 and case.sut.model.images_seen == 1  # the origin only
    assert torch.equal(case.noise, torch.randn((1, 4), generator=torch.Generator("cpu").manual_seed(1)))
    # wn is the stream's second z (grey 0.288), not its first (the origin's own z, 0.790)
    assert float(case.generator.synthesis(case.wn).mean()) == pytest.approx(stream_greys(1, 2)[1], abs=1e-5)
    assert not torch.allclose(case.wn, case.w0)
    assert case.record_diagnostics()["rival_evals"] == 0
    trainer = fit(case, budget=2700)  # wn (0.288) lies across the threshold: the mix can flip
    assert case.result.found and case.sut_evals == 10 * trainer.global_step == case.sut.model.images_seen - 1


def test_binary_no_flip_with_a_single_draw_on_the_origins_side():
    case = binary_case(0.5, rival_draws=1)  # wn = 0.890: every mix stays above 0.5
    trainer = fit(case, budget=45)
    assert not case.result.found and trainer.global_step == 4 and case.sut_evals == 40
    info = case.record_diagnostics()
    assert info["rival_draw"] == 0 and info["rival_flipped"] is None and info["rival_evals"] == 0


def test_attribute_margin_is_signed_toward_the_origin():
    logits = torch.tensor([[2.0, 0.0], [-1.0, 0.0]])
    assert attribute_margin(logits, torch.tensor([[3.0, 0.0]]), 0).tolist() == [2.0, -1.0]
    assert attribute_margin(logits, torch.tensor([[-3.0, 0.0]]), 0).tolist() == [-2.0, 1.0]


def test_rival_draws_is_for_the_binary_task_only():
    with pytest.raises(ValueError, match="binary"):
        MimicryCase(StyleGANGenerator(network=CraftedGAN()), threshold_sut(0.5), rival_draws=2)
    with pytest.raises(ValueError, match=">= 1"):
        binary_case(0.5, rival_draws=0)
