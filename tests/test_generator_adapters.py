"""Saving and loading trained adapters: ``hypernet.save_pretrained`` / ``generator.load_hypernet`` and
``ControlProjector.save_pretrained`` / ``from_pretrained``, for every generator family on tiny random models.

A saved-and-loaded HyperNet + projector, used by a fresh generator object, must give the original image (1e-6) with
bit-identical weights; missing or mismatched folders are one-line errors naming the folder or file.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from tiny_families import FAMILIES, Family, perturb_hypernet
from torch import Tensor, nn

from hynea_pl.hypernets import ControlProjector

NUM_CLASSES = 10


def _signal() -> Tensor:
    """A one-hot target ``(1, NUM_CLASSES)``."""
    return nn.functional.one_hot(torch.tensor([4]), NUM_CLASSES).float()


def _assert_bit_identical(saved: nn.Module, loaded: nn.Module) -> None:
    a, b = saved.state_dict(), loaded.state_dict()
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name
        assert a[name].data_ptr() != b[name].data_ptr(), f"{name}: a copy, not shared"


@pytest.fixture(params=FAMILIES, ids=repr)
def trained(request, tmp_path):
    """A family's generator with a perturbed ('trained') HyperNet and projector, both saved under ``tmp_path``."""
    family: Family = request.param
    gen = family.build(tmp_path / "original")
    torch.manual_seed(0)
    hypernet = gen.make_hypernet()
    perturb_hypernet(hypernet)
    projector = ControlProjector((NUM_CLASSES,), gen.latent_shape)
    hypernet.save_pretrained(tmp_path / "hypernet")
    projector.save_pretrained(tmp_path / "projector")
    return family, gen, hypernet, projector


def test_loaded_adapters_give_the_same_image_with_bit_identical_weights(trained, tmp_path):
    family, gen, hypernet, projector = trained
    noise = gen.initial_noise(0)
    original = gen.sample(noise, family.condition, hypernet, projector(_signal()))
    assert (original - gen.sample(noise, family.condition)).abs().max() > 1e-3, "the HyperNet must matter"

    fresh = family.build(tmp_path / "fresh")  # another generator object around fresh copies of the components
    loaded = fresh.load_hypernet(tmp_path / "hypernet")
    loaded_projector = ControlProjector.from_pretrained(tmp_path / "projector")
    assert type(loaded) is type(hypernet) and type(loaded_projector) is ControlProjector
    _assert_bit_identical(hypernet, loaded)
    _assert_bit_identical(projector, loaded_projector)
    assert all(p.requires_grad for p in loaded.parameters()), "a loaded HyperNet can be trained further"
    image = fresh.sample(noise, family.condition, loaded, loaded_projector(_signal()))
    torch.testing.assert_close(image, original, atol=1e-6, rtol=0)


def test_missing_folder_or_weights_file_is_a_one_line_file_not_found_error(trained, tmp_path):
    _, gen, _, _ = trained
    for load, missing in ((gen.load_hypernet, tmp_path / "nowhere"),
                          (ControlProjector.from_pretrained, tmp_path / "no_projector")):
        with pytest.raises(FileNotFoundError) as error:
            load(missing)
        assert str(missing) in str(error.value) and "\n" not in str(error.value)
    weights = tmp_path / "hypernet" / "diffusion_pytorch_model.safetensors"
    weights.unlink()
    with pytest.raises(FileNotFoundError, match=str(weights)):
        gen.load_hypernet(tmp_path / "hypernet")


def test_mismatched_saved_hypernet_is_a_one_line_error_naming_the_file(trained, tmp_path):
    _, gen, hypernet, _ = trained
    # settings that build a HyperNet of other shapes than the saved weights
    config_file = tmp_path / "hypernet" / "config.json"
    config = json.loads(config_file.read_text())
    setting = next(k for k in ("conditioning_channels", "control_channels", "hidden_dim") if k in config)
    config[setting] *= 2  # control channels (UNets) or the width of the zero linears (transformer)
    config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="diffusion_pytorch_model.safetensors does not fit") as error:
        gen.load_hypernet(tmp_path / "hypernet")
    assert "shape mismatch" in str(error.value) and "\n" not in str(error.value)

    # another HyperNet class's folder
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "hypernet", other)
    (other / "config.json").write_text(json.dumps({**config, "_class_name": "SomeOtherHyperNet"}))
    with pytest.raises(ValueError, match=f"holds a SomeOtherHyperNet, not a {type(hypernet).__name__}"):
        gen.load_hypernet(other)


def test_a_channels_last_hypernet_saves_and_loads_bit_identical(tmp_path):
    family = FAMILIES[0]
    gen = family.build(tmp_path, channels_last=True)
    hypernet = gen.make_hypernet().to(memory_format=torch.channels_last)  # as HyNeACase does under channels_last
    perturb_hypernet(hypernet)
    weight = hypernet.controlnet.conv_in.weight
    assert weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous()
    hypernet.save_pretrained(tmp_path / "hypernet")
    loaded = gen.load_hypernet(tmp_path / "hypernet")
    _assert_bit_identical(hypernet, loaded)
