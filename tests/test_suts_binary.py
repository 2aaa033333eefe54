"""Multi-label binary SUT (CelebA-style attributes): BCE objective, sign-flip criterion, control signal."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hynea_pl.suts import CELEBA_ATTRIBUTES, BinaryAttributeSUT

ORIGIN = torch.tensor([[2.0, -1.0, 0.5, -3.0], [-0.5, 1.5, 0.0, 2.0]])


def make_sut(**kwargs) -> BinaryAttributeSUT:
    return BinaryAttributeSUT(nn.Linear(3, 4), **{"attribute": 1, **kwargs})


def test_celeba_attribute_names():
    assert len(CELEBA_ATTRIBUTES) == 40 and CELEBA_ATTRIBUTES[31] == "Smiling"
    assert BinaryAttributeSUT(nn.Linear(3, 40), attribute="Smiling").attribute == 31
    with pytest.raises(ValueError, match="unknown attribute 'Smile'"):
        BinaryAttributeSUT(nn.Linear(3, 40), attribute="Smile")


def test_target_control_and_prediction_on_hand_made_logits():
    sut = make_sut()
    target = sut.default_target(ORIGIN)
    assert target.tolist() == [1, 1]
    # origin decisions (logit > 0; 0.0 counts negative): [1, 0, 1, 0] and [0, 1, 0, 1]; attribute 1 inverted
    assert sut.control_signal(ORIGIN, target).tolist() == [[1, 1, 1, 0], [0, 0, 0, 1]]
    signed = make_sut(control="signed").control_signal(ORIGIN, target)
    assert signed.tolist() == [[1, 1, 1, -1], [-1, -1, -1, 1]]
    assert sut.prediction(ORIGIN).tolist() == [0, 1]
    # a per-item target attribute is honoured
    assert sut.control_signal(ORIGIN, torch.tensor([0, 3])).tolist() == [[0, 0, 1, 0], [0, 1, 0, 0]]


def test_bce_objective_on_hand_made_logits():
    sut = make_sut()
    target = sut.default_target(ORIGIN)
    labels = sut.objective_labels(ORIGIN, target)  # fixed once from the origin
    assert labels.tolist() == [[1, 1, 1, 0], [0, 0, 0, 1]]
    # all logits 0: every element costs log 2 whatever its target
    torch.testing.assert_close(sut.behaviour_loss(torch.zeros(2, 4), labels, target), torch.tensor(math.log(2)))
    # tested logit only: item 0 x=-1 toward 1 -> log(1 + e^-1) + 1; item 1 x=1.5 toward 0 -> log(1 + e^1.5)
    only = make_sut(all_attributes=False)
    expected = (math.log(1 + math.exp(-1)) + 1 + math.log(1 + math.exp(1.5))) / 2
    torch.testing.assert_close(only.behaviour_loss(ORIGIN, labels, target), torch.tensor(expected))
    # all attributes at the origin: only the tested attribute disagrees with its target
    agree = [math.log(1 + math.exp(-2)), math.log(1 + math.exp(-0.5)), math.log(1 + math.exp(-3)),
             math.log(1 + math.exp(-0.5)), math.log(2), math.log(1 + math.exp(-2))]
    expected_all = (sum(agree) + math.log(1 + math.exp(-1)) + 1 + math.log(1 + math.exp(1.5))) / 8
    torch.testing.assert_close(sut.behaviour_loss(ORIGIN, labels, target), torch.tensor(expected_all))


def test_flip_is_a_sign_change_of_the_tested_logit():
    sut = make_sut()
    target = sut.default_target(ORIGIN)
    assert sut.is_flipped(ORIGIN, ORIGIN, target).tolist() == [False, False]
    moved = torch.tensor([[-2.0, 0.3, -0.5, 3.0], [0.5, 0.0, 1.0, -2.0]])  # other attributes changing do not count
    assert sut.is_flipped(moved, ORIGIN, target).tolist() == [True, True]  # 1.5 -> 0.0 counts: 0 is negative
    assert sut.is_flipped(moved, ORIGIN, torch.tensor([0, 3])).tolist() == [True, True]
    assert sut.is_flipped(ORIGIN.clone() * 2, ORIGIN, target).tolist() == [False, False]
    only_first = ORIGIN.clone()
    only_first[0, 2] = -1.0  # item 0's attribute 2 changes sign, item 1's does not
    assert sut.is_flipped(only_first, ORIGIN, torch.tensor([2, 2])).tolist() == [True, False]
    # the target of a binary case is the change itself: it is reached exactly when the attribute flips
    assert sut.reaches_target(only_first, ORIGIN, torch.tensor([2, 2])).tolist() == [True, False]
    # one case's target (1,) against a population of its images (one origin): every row is tested on that attribute
    population = ORIGIN[:1].repeat(3, 1)
    population[1, 2] = -population[1, 2]
    assert sut.is_flipped(population, ORIGIN[:1], torch.tensor([2])).tolist() == [False, True, False]


def test_the_origin_is_explicit_and_must_match():
    sut = make_sut()
    other = -ORIGIN
    assert sut.is_flipped(other, ORIGIN, torch.tensor([1, 1])).tolist() == [True, True]
    assert sut.is_flipped(other, other, torch.tensor([1, 1])).tolist() == [False, False]
    with pytest.raises(ValueError, match="does not match"):
        sut.is_flipped(other, ORIGIN[:, :3], torch.tensor([1, 1]))


def test_valid_origin_condition():
    sut = make_sut()
    assert sut.is_valid_origin(ORIGIN, None).tolist() == [True, True]
    assert sut.is_valid_origin(ORIGIN, 1).tolist() == [False, True]
    assert sut.is_valid_origin(ORIGIN, 0).tolist() == [True, False]
    with pytest.raises(ValueError, match="0 or 1"):
        sut.is_valid_origin(ORIGIN, 2)


def test_resnet_with_40_logits_from_a_state_dict(tmp_path):
    import torchvision

    model = torchvision.models.resnet18(num_classes=40)
    torch.save(model.state_dict(), tmp_path / "celeba.pt")
    sut = BinaryAttributeSUT(torchvision.models.resnet18(num_classes=40), attribute="Smiling",
                             weights=str(tmp_path / "celeba.pt"))
    sut.train()
    assert not sut.model.training and not any(p.requires_grad for p in sut.parameters())
    images = torch.rand(1, 3, 32, 32, requires_grad=True)
    output = sut(images)
    assert output.shape == (1, 40)
    target = sut.default_target(output.detach())
    sut.behaviour_loss(output, sut.objective_labels(output.detach(), target), target).backward()
    assert images.grad is not None and images.grad.abs().sum() > 0


def test_two_hynea_steps_with_a_binary_sut():
    import lightning as L
    from tiny_components import tiny_generator

    from hynea_pl.methods import HyNeACase, PaperSearch
    from hynea_pl.suts import Preprocess

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.Flatten(), nn.Linear(4 * 15 * 15, 6))
    sut = BinaryAttributeSUT(net, attribute=2, preprocess=Preprocess(size=32, channels=3))
    case = HyNeACase(tiny_generator(num_inference_steps=2), sut, origin_class=3, seed=5,
                     search=PaperSearch(lr_min=1e-3, lr_max=1e-2))
    L.Trainer(max_steps=2, max_epochs=-1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
              enable_model_summary=False, enable_progress_bar=False).fit(case)
    assert case.control.shape == (1, 6) and case.target.tolist() == [2]
    assert set(case.control.flatten().tolist()) <= {0.0, 1.0} and len(case.result.history) == 2
