"""A SUT's preprocessing: the ``Preprocess`` dict form, torchvision v2 pipelines from YAML (differentiable, round
trip through the run's dumped config), timm's data config as the default of a timm model, one-line errors for a
transform that cannot run on a tensor batch, and a 28 px third-party MNIST model tested through a centre crop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from jsonargparse import Namespace
from PIL import Image
from third_party_mnist import MNIST_MEAN, MNIST_STD, Digit28CNN, crop28, train_digit28
from torch import nn
from torchvision.transforms import v2

from hynea_pl.campaign.config import fit_parser, parse_config
from hynea_pl.suts import (
    SUT,
    ClassifierSUT,
    Preprocess,
    PretrainedClassifierSUT,
    imagenet_preprocess,
)
from hynea_pl.suts.preprocess import TensorTransform, timm_preprocess

REPO = Path(__file__).resolve().parents[1]

#: the 28 px model's preprocessing, as a user writes it in the ``sut:`` section
CROP_PIPELINE = f"""
class_path: torchvision.transforms.v2.Compose
init_args:
  transforms:
    - class_path: torchvision.transforms.v2.CenterCrop
      init_args: {{size: 28}}
    - class_path: torchvision.transforms.v2.Normalize
      init_args: {{mean: [{MNIST_MEAN}], std: [{MNIST_STD}]}}
"""


def third_party_config(tmp_path: Path, weights: str | None, preprocess: str = CROP_PIPELINE) -> Path:
    """configs/mnist.yaml with its SUT replaced by the 28 px third-party model and ``preprocess`` (YAML)."""
    config = yaml.safe_load(parse_config(["--config", str(REPO / "configs" / "mnist.yaml")]).dump())
    config["sut"] = {"class_path": "hynea_pl.suts.ClassifierSUT",
                     "init_args": {"model": {"class_path": "third_party_mnist.Digit28CNN"}, "weights": weights,
                                   "preprocess": yaml.safe_load(preprocess)}}
    path = tmp_path / "third_party.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def build_sut(config) -> SUT:
    """The config's SUT alone, instantiated by the config's parser as the campaign does, without the generator."""
    return fit_parser().instantiate(Namespace(sut=config.sut)).sut


def test_v2_pipeline_from_yaml_round_trips_and_back_propagates(tmp_path):
    cli = parse_config(["--config", str(third_party_config(tmp_path, weights=None))])
    dumped = tmp_path / "config.yaml"  # as a run writes it, and parses it again on resume
    dumped.write_text(cli.parser.dump(cli.config, skip_none=False))
    again = parse_config(["--config", str(dumped)])
    assert again.config.sut == cli.config.sut
    pipeline = again.config.sut.init_args.preprocess
    assert [t.class_path for t in pipeline.init_args.transforms] == [
        "torchvision.transforms.v2.CenterCrop", "torchvision.transforms.v2.Normalize"]

    sut = build_sut(again.config)
    assert isinstance(sut.preprocess, TensorTransform) and isinstance(sut.preprocess.transform, v2.Compose)
    images = torch.rand(2, 1, 32, 32, requires_grad=True)
    logits = sut(images)
    torch.testing.assert_close(logits, sut.model(crop28(images)))
    logits[:, 3].sum().backward()
    assert images.grad is not None and images.grad[..., 2:30, 2:30].abs().sum() > 0
    border = images.grad.clone()
    border[..., 2:30, 2:30] = 0
    assert border.abs().sum() == 0  # the 2 px border is cropped away


@pytest.mark.parametrize("transform, shape", [
    (v2.Resize(40, antialias=True), (2, 3, 40, 40)),
    (v2.CenterCrop(20), (2, 3, 20, 20)),
    (v2.Pad(2), (2, 3, 36, 36)),
    (v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.2, 0.2]), (2, 3, 32, 32)),
    (v2.Grayscale(1), (2, 1, 32, 32)),
    (v2.Compose([v2.Grayscale(3), v2.Resize((24, 24), antialias=True), v2.Normalize([0.5], [0.5])]),
     (2, 3, 24, 24)),
])
def test_tensor_transforms_run_on_batches_with_gradients(transform, shape):
    sut = ClassifierSUT(nn.Flatten(), preprocess=transform)
    images = torch.rand(2, 3, 32, 32, requires_grad=True)
    assert tuple(sut.preprocess(images).shape) == shape
    sut(images).square().sum().backward()
    assert images.grad is not None and images.grad.abs().sum() > 0


def test_dict_form_is_unchanged(tmp_path):
    dict_form = "{size: 32, channels: 1, mean: [0.5], std: [0.5]}"
    cli = parse_config(["--config", str(third_party_config(tmp_path, weights=None, preprocess=dict_form))])
    dumped = yaml.safe_load(cli.dump())["sut"]["init_args"]["preprocess"]  # as the run's config.yaml keeps it
    assert dumped == {"class_path": "hynea_pl.suts.Preprocess",
                      "init_args": {"size": 32, "channels": 1, "mean": [0.5], "std": [0.5]}}
    sut = build_sut(cli.config)
    assert sut.preprocess == Preprocess(size=32, channels=1, mean=[0.5], std=[0.5])

    images = torch.rand(2, 3, 48, 48)  # RGB at another size: luma, then resize, then normalise (the old code)
    luma = (images * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True)
    expected = (F.interpolate(luma, size=(32, 32), mode="bilinear", antialias=True, align_corners=False) - 0.5) / 0.5
    torch.testing.assert_close(sut.preprocess(images), expected)
    assert ClassifierSUT(nn.Flatten()).preprocess == Preprocess()  # none given: the images as they are


def test_timm_model_defaults_to_its_data_config():
    sut = PretrainedClassifierSUT("resnet10t", pretrained=False, num_classes=10)  # timm: 176 px, crop 0.875
    steps = sut.preprocess.transform.transforms
    assert [type(t).__name__ for t in steps] == ["RGB", "Resize", "CenterCrop", "Normalize"]
    assert steps[1].size == [201] and steps[1].interpolation == v2.InterpolationMode.BICUBIC
    assert list(steps[2].size) == [176, 176]
    assert steps[3].mean == pytest.approx([0.485, 0.456, 0.406])
    assert steps[3].std == pytest.approx([0.229, 0.224, 0.225])
    images = torch.rand(2, 1, 64, 64, requires_grad=True)
    assert tuple(sut.preprocess(images).shape) == (2, 3, 176, 176)
    sut(images).sum().backward()
    assert images.grad.abs().sum() > 0
    sized = PretrainedClassifierSUT("resnet10t", pretrained=False, num_classes=10, image_size=64)
    assert list(sized.preprocess.transform.transforms[2].size) == [64, 64]

    # torchvision models keep the ImageNet resize (no crop)
    assert PretrainedClassifierSUT("resnet18", pretrained=False, num_classes=10).preprocess == imagenet_preprocess()


def test_timm_preprocess_numbers_follow_a_custom_pretrained_cfg():
    import timm

    model = timm.create_model("resnet10t", pretrained=False, num_classes=10, pretrained_cfg_overlay=dict(
        input_size=(3, 96, 96), crop_pct=0.75, interpolation="bilinear", mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.5)))
    preprocess = timm_preprocess(model)
    images = torch.rand(1, 3, 150, 150)
    # timm eval: resize the shorter side to 96 / 0.75 = 128, centre crop 96, normalise
    resized = F.interpolate(images, size=(128, 128), mode="bilinear", antialias=True, align_corners=False)
    mean, std = torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1), torch.tensor([0.2, 0.25, 0.5]).view(1, 3, 1, 1)
    expected = (resized[..., 16:112, 16:112] - mean) / std
    torch.testing.assert_close(preprocess(images), expected, atol=1e-4, rtol=1e-4)
    gray = torch.full((1, 1, 100, 100), 0.6)  # grayscale repeated to RGB
    torch.testing.assert_close(preprocess(gray)[0, :, 48, 48], (torch.full((3,), 0.6) - mean.flatten()) / std.flatten())


def one_line_error(sut: SUT, images: torch.Tensor) -> str:
    with pytest.raises(ValueError) as error:
        sut(images)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_transform_that_cannot_run_on_a_tensor_batch_is_one_line(tmp_path):
    pil = "{class_path: torchvision.transforms.v2.ToPILImage}"
    cli = parse_config(["--config", str(third_party_config(tmp_path, weights=None, preprocess=pil))])
    message = one_line_error(build_sut(cli.config), torch.rand(2, 1, 32, 32))
    assert message.startswith("SUT preprocess ToPILImage() cannot run on a tensor batch (2, 1, 32, 32)")

    uint8 = ClassifierSUT(nn.Flatten(), preprocess=v2.ToDtype(torch.uint8, scale=True))
    assert "cuts the gradient" in one_line_error(uint8, torch.rand(1, 1, 8, 8, requires_grad=True))
    with torch.no_grad():  # no gradient asked for: nothing to cut
        ClassifierSUT(nn.Flatten(), preprocess=v2.CenterCrop(4))(torch.rand(1, 1, 8, 8, requires_grad=True))
    flat = ClassifierSUT(nn.Flatten(), preprocess=nn.Flatten())
    assert "must map a tensor batch" in one_line_error(flat, torch.rand(1, 1, 8, 8))
    with pytest.raises(TypeError, match="SUT preprocess must be"):
        ClassifierSUT(nn.Flatten(), preprocess=3)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def digit28_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The third-party 28 px MNIST model, trained once per session (a few seconds)."""
    path, accuracy = train_digit28(tmp_path_factory.mktemp("third_party") / "digit28.pt")
    assert accuracy > 0.85, f"the 28 px model reached only {accuracy:.2f} held-out accuracy"
    return path


@pytest.mark.slow
def test_third_party_28px_model_through_a_centre_crop(tiny_zoo, digit28_weights, tmp_path):
    """The issue's acceptance: a 28 px MNIST classifier tested on the zoo's 32 px images with ``CenterCrop(28)``
    + ``Normalize`` from YAML; every flip, re-read from its saved PNG, is a flip of the model on its own crop.
    About 20 s with the session's tiny zoo and model."""
    from hynea_pl.cli import main

    config = third_party_config(tmp_path, weights=str(digit28_weights))
    args = ["fit", "--config", str(config), "--model.init_args.steering.model.init_args.profile", "tiny", "--model.init_args.acceptance.test.init_args.profile", "tiny",
            "--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "2",
            "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
            "--cases.classes", "[1, 7]", "--cases.n_per_class", "1", "--cases.validate_origins", "false",
            "--trainer.max_steps", "20", "--budget.max_evals", "60", "--output.root", str(tmp_path / "runs"),
            "--output.name", "third_party"]
    assert main(args) == 0
    run = tmp_path / "runs" / "third_party"
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    flipped = [r for r in records if r["flipped"]]
    assert flipped, "no case flipped the 28 px model"

    model = Digit28CNN()
    model.load_state_dict(torch.load(digit28_weights))
    model.eval()
    for record in flipped:
        pixels = np.asarray(Image.open(run / record["result_image"]).convert("L"), dtype=np.float32) / 255.0
        image = torch.from_numpy(pixels)[None, None]
        assert image.shape == (1, 1, 32, 32)
        with torch.no_grad():
            label = int(model(crop28(image)).argmax(-1))
        assert label == record["result_label"] != record["origin_label"], record["case_id"]

    assert main(args) == 0  # the run's dumped config.yaml parses again: the resume accepts it


#: the two ``preprocess`` forms of docs/guide.md, for the 28 px model: the dict form (resize) and a v2 pipeline (crop)
GUIDE_FORMS = {"dict": "{size: 28, channels: 1, mean: [0.1307], std: [0.3081]}", "pipeline": CROP_PIPELINE}


@pytest.mark.parametrize("form", sorted(GUIDE_FORMS))
@pytest.mark.parametrize("how", ["--sut", "--config"])
def test_a_sut_of_its_own_file_runs_on_the_demo_config(form, how, tiny_zoo, digit28_weights, tmp_path):
    """``fit --config configs/mnist.yaml --sut my_sut.yaml`` (the section's content) and a second ``--config`` with a
    ``sut:`` section: the SUT of the file replaces the demo's, whatever the form of its ``preprocess``."""
    from hynea_pl.cli import main

    sut = {"class_path": "hynea_pl.suts.ClassifierSUT",
           "init_args": {"model": {"class_path": "third_party_mnist.Digit28CNN",  # hidden: else the demo's 128 stays
                                   "init_args": {"channels": 8, "hidden": 32}},
                         "weights": str(digit28_weights), "preprocess": yaml.safe_load(GUIDE_FORMS[form])}}
    path = tmp_path / "my_sut.yaml"
    path.write_text(yaml.safe_dump(sut if how == "--sut" else {"sut": sut}))
    args = ["fit", "--config", "configs/mnist.yaml", how, str(path),
            "--model.init_args.steering.model.init_args.profile", "tiny", "--model.init_args.acceptance.test", "null",
            "--model.init_args.retries.attempts", "1", "--generator.init_args.pretrained", "zoo://tiny/ldm",
            "--generator.init_args.num_inference_steps", "2", "--oracle.init_args.profile", "tiny",
            "--realism.init_args.profile", "tiny", "--cases.classes", "[7]", "--cases.n_per_class", "1",
            "--cases.validate_origins", "false", "--trainer.max_steps", "2", "--budget.max_evals", "14",
            "--output.root", str(tmp_path), "--output.name", "own"]
    assert main(args) == 0
    config = yaml.safe_load((tmp_path / "own" / "config.yaml").read_text())["sut"]["init_args"]
    assert config["model"]["class_path"] == "third_party_mnist.Digit28CNN"
    expected = "torchvision.transforms.v2.Compose" if form == "pipeline" else "hynea_pl.suts.Preprocess"
    assert config["preprocess"]["class_path"] == expected
    record = json.loads((tmp_path / "own" / "records.jsonl").read_text())
    assert record["error"] is None and record["sut_evals"] >= 1
