"""Classifiers by torchvision / timm name: local state dicts, the torch hub cache, clear errors, never silent
random weights."""

from __future__ import annotations

import pytest
import torch
import torchvision

from hynea_pl.suts import PretrainedClassifierSUT, imagenet_preprocess, pretrained_classifier


def test_local_state_dict_round_trip(tmp_path):
    torch.manual_seed(0)
    original = torchvision.models.resnet18(num_classes=10).eval()
    torch.save(original.state_dict(), tmp_path / "resnet18.pt")
    model = pretrained_classifier("resnet18", weights=str(tmp_path / "resnet18.pt"), num_classes=10)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in original.state_dict().items())
    sut = PretrainedClassifierSUT("resnet18", weights=str(tmp_path / "resnet18.pt"), num_classes=10, image_size=64)
    sut.train()
    assert not sut.model.training and not any(p.requires_grad for p in sut.parameters())
    images = torch.rand(2, 3, 48, 48)
    expected = original(imagenet_preprocess(64)(images))
    torch.testing.assert_close(sut(images), expected)
    assert sut.task == "multiclass" and sut.default_target(expected).shape == (2,)


def test_missing_weights_are_one_line_errors(tmp_path, monkeypatch, no_network):
    with pytest.raises(FileNotFoundError, match="SUT checkpoint not found: .*nothing.pt"):
        pretrained_classifier("resnet18", weights=str(tmp_path / "nothing.pt"), num_classes=10)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    with pytest.raises(FileNotFoundError) as error:
        PretrainedClassifierSUT()  # wide_resnet50_2 from an empty hub cache
    message = str(error.value)
    assert "\n" not in message and "wide_resnet50_2" in message
    assert str(tmp_path / "torch" / "hub" / "checkpoints" / "wide_resnet50_2-9ba9bcbe.pth") in message
    assert "pretrained: false" in message


def test_hub_cache_is_used_without_network(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    cache = tmp_path / "torch" / "hub" / "checkpoints"
    cache.mkdir(parents=True)
    torch.manual_seed(1)
    original = torchvision.models.resnet18()
    torch.save(original.state_dict(), cache / "resnet18-f37072fd.pth")  # the file name of the default weights' url
    model = pretrained_classifier("resnet18")
    assert torch.equal(model.fc.weight, original.fc.weight)
    with pytest.raises(ValueError, match="1000 classes, not num_classes=10"):
        pretrained_classifier("resnet18", num_classes=10)


def test_random_weights_only_when_asked_and_timm_names(tmp_path):
    model = pretrained_classifier("resnet18", pretrained=False, num_classes=3)
    assert model(torch.rand(1, 3, 32, 32)).shape == (1, 3)
    timm_model = pretrained_classifier("resnet10t", pretrained=False, num_classes=5)  # timm only
    assert type(timm_model).__module__.startswith("timm")
    torch.save(timm_model.state_dict(), tmp_path / "timm.pt")
    again = pretrained_classifier("resnet10t", source="timm", weights=str(tmp_path / "timm.pt"), num_classes=5)
    assert torch.equal(again.fc.weight, timm_model.fc.weight)
    with pytest.raises(ValueError, match="do not fit"):
        pretrained_classifier("resnet18", weights=str(tmp_path / "timm.pt"), num_classes=5)
    with pytest.raises(ValueError, match="unknown classifier 'no_such_net'"):
        pretrained_classifier("no_such_net")


def test_timm_missing_cache_error(tmp_path, monkeypatch, no_network):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    with pytest.raises(FileNotFoundError, match=r"timm 'resnet10t' not found: no model.safetensors of timm/resnet10t"):
        pretrained_classifier("resnet10t")


def test_suts_build_from_yaml():
    import yaml
    from jsonargparse import ArgumentParser

    from hynea_pl.suts import SUT, BinaryAttributeSUT

    parser = ArgumentParser()
    parser.add_argument("--sut", type=SUT)
    config = yaml.safe_load("""
    sut:
      class_path: hynea_pl.suts.PretrainedClassifierSUT
      init_args: {name: resnet18, pretrained: false, num_classes: 10, image_size: 64}
    """)
    sut = parser.instantiate(parser.parse_object(config)).sut
    assert isinstance(sut, PretrainedClassifierSUT) and sut.model.fc.out_features == 10
    config = yaml.safe_load("""
    sut:
      class_path: hynea_pl.suts.BinaryAttributeSUT
      init_args:
        model: {class_path: torchvision.models.resnet18, init_args: {num_classes: 40}}
        attribute: Smiling
    """)
    sut = parser.instantiate(parser.parse_object(config)).sut
    assert isinstance(sut, BinaryAttributeSUT) and sut.attribute == 31 and sut.model.fc.out_features == 40
