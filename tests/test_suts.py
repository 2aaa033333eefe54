"""SUT wrapper: preprocessing, checkpoint loading, task semantics, a user's own classifier from YAML."""

from __future__ import annotations

import json

import pytest
import torch
import torchvision
from safetensors.torch import save_file

from hynea_pl.cli import main
from hynea_pl.suts import ClassifierSUT, Preprocess, load_state_dict
from hynea_pl.zoo.labelled.classifier import SmallCNN


def test_preprocess_resizes_converts_channels_and_normalises():
    images = torch.rand(2, 3, 64, 64)
    out = Preprocess(size=32, channels=1, mean=[0.5], std=[0.25])(images)
    assert out.shape == (2, 1, 32, 32)
    gray = Preprocess(channels=1)(images)
    expected = 0.299 * images[:, 0] + 0.587 * images[:, 1] + 0.114 * images[:, 2]
    torch.testing.assert_close(gray[:, 0], expected)
    rgb = Preprocess(channels=3, mean=[0.1, 0.2, 0.3], std=[1.0, 2.0, 4.0])(torch.ones(1, 1, 4, 4))
    torch.testing.assert_close(rgb[0, :, 0, 0], torch.tensor([0.9, 0.4, 0.175]))


def test_preprocess_rejects_wrong_shapes():
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        Preprocess()(torch.rand(3, 32, 32))
    with pytest.raises(ValueError, match="expects 3 channels"):
        Preprocess(channels=3)(torch.rand(1, 2, 8, 8))


@pytest.mark.parametrize("suffix", [".safetensors", ".pt", ".ckpt"])
def test_checkpoint_formats_load_the_same_weights(tmp_path, suffix):
    model = SmallCNN(channels=(4, 8), hidden=16)
    state = model.state_dict()
    path = tmp_path / f"weights{suffix}"
    if suffix == ".safetensors":
        save_file(state, str(path))
    elif suffix == ".pt":
        torch.save(state, path)
    else:  # a Lightning checkpoint wraps the state dict
        torch.save({"state_dict": state, "epoch": 3}, path)
    loaded = load_state_dict(path)
    assert all(torch.equal(loaded[k], state[k]) for k in state)
    sut = ClassifierSUT(SmallCNN(channels=(4, 8), hidden=16), weights=str(path))
    assert all(torch.equal(sut.model.state_dict()[k], state[k]) for k in state)
    assert not any(p.requires_grad for p in sut.parameters())


def test_checkpoint_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="SUT checkpoint not found: .*missing.pt"):
        ClassifierSUT(SmallCNN(), weights=str(tmp_path / "missing.pt"))
    path = tmp_path / "other.pt"
    torch.save(SmallCNN(channels=(4, 8), hidden=16).state_dict(), path)
    with pytest.raises(ValueError, match="does not fit SmallCNN"):
        ClassifierSUT(SmallCNN(channels=(16, 32)), weights=str(path))


def test_multiclass_semantics_on_hand_made_logits():
    sut = ClassifierSUT(SmallCNN(channels=(4, 8), hidden=16))
    logits = torch.tensor([[0.1, 3.0, 2.0, -1.0], [5.0, 0.0, 1.0, 4.0]])
    assert sut.default_target(logits).tolist() == [2, 3]
    assert sut.target_candidates(logits).tolist() == [[2, 0, 3], [3, 2, 1]]  # every other class, most likely first
    target = torch.tensor([2, 3])
    moved = torch.tensor([[0.1, 1.0, 2.0, -1.0], [0.0, 0.0, 1.0, 0.5]])  # argmax 2 (the target), 2 (a third class)
    assert sut.is_flipped(moved, logits, target).tolist() == [True, True]  # both left the origin's class
    assert sut.reaches_target(moved, logits, target).tolist() == [True, False]  # only the first is the target
    assert sut.is_flipped(logits, logits, target).tolist() == [False, False]
    assert sut.is_valid_origin(logits, 1).tolist() == [True, False]
    assert sut.control_signal(logits, torch.tensor([2, 0])).tolist() == [[0, 0, 1, 0], [1, 0, 0, 0]]
    labels = sut.objective_labels(logits, target)
    assert labels.tolist() == [2, 3]
    expected = torch.nn.functional.cross_entropy(logits, target)
    torch.testing.assert_close(sut.behaviour_loss(logits, labels, target), expected)


def test_sut_stays_in_eval_mode():
    sut = ClassifierSUT(SmallCNN(channels=(4, 8), hidden=16, dropout=0.5))
    sut.train()
    assert not sut.training and not sut.model.training
    x = torch.rand(2, 1, 32, 32)
    assert torch.equal(sut(x), sut(x))


@pytest.mark.slow
def test_users_own_classifier_plugs_in_with_yaml_alone(tiny_zoo, tmp_path):
    """A torchvision ResNet-18 trained elsewhere on RGB digits, given by class_path + state-dict path."""
    torch.manual_seed(0)
    weights = tmp_path / "my_mnist_resnet18.pt"
    torch.save(torchvision.models.resnet18(num_classes=10).state_dict(), weights)
    config = tmp_path / "my_sut.yaml"
    config.write_text(f"""
sut:
  class_path: hynea_pl.suts.ClassifierSUT
  init_args:
    model:
      class_path: torchvision.models.resnet18
      init_args: {{num_classes: 10}}
    weights: {weights}
    preprocess: {{size: 64, channels: 3, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}}
""")
    args = ["fit", "--config", "configs/mnist.yaml", "--config", str(config),
            "--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "2",
            "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny", "--model.init_args.steering.model.init_args.profile", "tiny",
            "--model.init_args.acceptance.test.init_args.profile", "tiny",
            "--cases.classes", "[4]", "--cases.n_per_class", "1", "--cases.validate_origins", "false",
            "--trainer.max_steps", "2", "--model.init_args.retries.attempts", "1",
            "--output.root", str(tmp_path), "--output.name", "mine"]
    assert main(args) == 0
    record = json.loads((tmp_path / "mine" / "records.jsonl").read_text().splitlines()[0])
    assert record["error"] is None and record["sut_evals"] == 2 and len(record["origin_pred"]) == 10  # 2 steps of one


def test_an_ensemble_votes_by_mean_probability():
    from hynea_pl.suts import EnsembleClassifierSUT

    class Fixed(torch.nn.Module):
        def __init__(self, logits):
            super().__init__()
            self.register_buffer("logits", torch.tensor(logits))

        def forward(self, x):
            return self.logits.expand(x.shape[0], -1)

    # member a is sure of class 0, member b leans to class 1: the mean probability decides
    a, b = ClassifierSUT(Fixed([4.0, 0.0, 0.0])), ClassifierSUT(Fixed([0.0, 1.0, 0.0]))
    ensemble = EnsembleClassifierSUT([a, b])
    out = ensemble(torch.rand(2, 1, 4, 4))
    pa, pb = torch.tensor([4.0, 0.0, 0.0]).softmax(0), torch.tensor([0.0, 1.0, 0.0]).softmax(0)
    torch.testing.assert_close(out.softmax(-1)[0], (pa + pb) / 2)
    assert ensemble.prediction(out).tolist() == [0, 0] and ensemble.task == "multiclass"
    with pytest.raises(ValueError, match="at least one member"):
        EnsembleClassifierSUT([])


def test_a_task_is_one_sut_class_found_by_its_name(monkeypatch):
    """Records name their task; its SUT class (registered when defined) reads them, and a method that supports every
    task accepts a new one without any list to extend."""
    from hynea_pl.evaluation.judge import judges_task
    from hynea_pl.methods.base import TestCaseModule
    from hynea_pl.suts import SUT, BinaryAttributeSUT, YOLODetectorSUT, base, task_class, task_classes

    assert task_classes() == {"multiclass": ClassifierSUT, "binary": BinaryAttributeSUT,
                              "detection": YOLODetectorSUT}
    assert task_class("detection").judged_by("binary") and not task_class("binary").judged_by("detection")
    monkeypatch.setattr(base, "TASK_CLASSES", dict(base.TASK_CLASSES))  # the new task lives in this test only

    class CountingSUT(SUT):
        task = "counting"

    class OtherCountingSUT(CountingSUT):  # a subclass of a task's class does not own the task
        pass

    assert task_class("counting") is CountingSUT and list(task_classes())[-1] == "counting"
    assert judges_task("counting", "counting") and not judges_task("multiclass", "counting")
    TestCaseModule.check_task("counting")
    with pytest.raises(ValueError, match="unknown task 'segmentation'; known: multiclass, binary, detection, counting"):
        task_class("segmentation")
