"""ControlProjector: the three branches of Algorithm 1, boundedness, gradients, errors, save / load."""

import json

import pytest
import torch

from hynea_pl.hypernets import ControlProjector

LATENT = (4, 8, 8)


@pytest.mark.parametrize(
    ("signal_shape", "mode"),
    [
        ((10,), "flat"),  # MNIST logits / one-hot
        ((1000,), "flat"),  # ImageNet
        ((40,), "flat"),  # CelebA attributes
        ((80, 5), "sequence"),  # detections: classes x top-5
        ((80, 100), "sequence"),
        ((3, 7), "sequence"),
        ((4, 8, 8), "spatial"),  # same spatial size
        ((21, 16, 16), "spatial"),  # segmentation map, larger
        ((3, 5, 6), "spatial"),  # smaller, non-square
    ],
)
def test_branches_shapes_bounded_and_gradients(signal_shape, mode):
    torch.manual_seed(0)
    projector = ControlProjector(signal_shape, LATENT)
    assert projector.mode == mode
    assert projector(100 * torch.randn(3, *signal_shape)).abs().max() <= 1  # tanh bounds (float32 saturates)
    control = projector(torch.randn(3, *signal_shape))
    assert control.shape == (3, *LATENT)
    assert control.dtype == torch.float32
    assert control.abs().max() < 1
    assert control.std() > 0
    control.square().sum().backward()
    for name, param in projector.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_flat_branch_one_hot_targets_give_distinct_controls():
    torch.manual_seed(0)
    projector = ControlProjector((10,), LATENT)
    control = projector(torch.eye(10))
    assert not torch.allclose(control[0], control[1])


def test_other_latent_shapes():
    torch.manual_seed(0)
    assert ControlProjector((1000,), (4, 32, 32))(torch.randn(2, 1000)).shape == (2, 4, 32, 32)
    assert ControlProjector((80, 5), (16, 4, 6))(torch.randn(2, 80, 5)).shape == (2, 16, 4, 6)
    assert ControlProjector((3, 64, 64), (4, 32, 32))(torch.randn(2, 3, 64, 64)).shape == (2, 4, 32, 32)


@pytest.mark.parametrize("signal_shape", [(), (2, 3, 4, 5)])
def test_unsupported_signal_rank(signal_shape):
    with pytest.raises(ValueError, match="rank"):
        ControlProjector(signal_shape, LATENT)


def test_unsupported_latent_rank_and_wrong_input_shape():
    with pytest.raises(ValueError, match="latent_shape"):
        ControlProjector((10,), (4, 64))
    projector = ControlProjector((10,), LATENT)
    with pytest.raises(ValueError, match="signal of shape"):
        projector(torch.randn(2, 11))


@pytest.mark.parametrize("signal_shape", [(10,), (80, 5), (21, 16, 16)], ids=["flat", "sequence", "spatial"])
def test_save_pretrained_round_trip_is_bit_identical(signal_shape, tmp_path):
    torch.manual_seed(0)
    projector = ControlProjector(torch.Size(signal_shape), LATENT)  # HyNeACase passes a torch.Size
    projector.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["_class_name"] == "ControlProjector"
    assert config["signal_shape"] == list(signal_shape) and config["latent_shape"] == list(LATENT)
    assert (tmp_path / "diffusion_pytorch_model.safetensors").is_file()

    loaded = ControlProjector.from_pretrained(tmp_path)
    assert (loaded.signal_shape, loaded.latent_shape, loaded.mode) == (signal_shape, LATENT, projector.mode)
    saved, restored = projector.state_dict(), loaded.state_dict()
    assert list(saved) == list(restored) and all(torch.equal(saved[k], restored[k]) for k in saved)
    signal = torch.randn(2, *signal_shape)
    torch.testing.assert_close(loaded(signal), projector(signal), atol=1e-6, rtol=0)
    assert ControlProjector.from_pretrained(tmp_path, torch_dtype=torch.float64).mix.weight.dtype == torch.float64


def test_from_pretrained_is_strict_with_one_line_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"saved folder not found: {tmp_path / 'missing'}"):
        ControlProjector.from_pretrained(tmp_path / "missing")
    ControlProjector((10,), LATENT).save_pretrained(tmp_path / "p")
    config_file = tmp_path / "p" / "config.json"
    config_file.write_text(config_file.read_text().replace("10", "11"))  # a config the weights do not fit
    with pytest.raises(ValueError, match="safetensors does not fit this ControlProjector: shape mismatch") as error:
        ControlProjector.from_pretrained(tmp_path / "p")
    assert "\n" not in str(error.value)
    (tmp_path / "p" / "diffusion_pytorch_model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="diffusion_pytorch_model.safetensors not found"):
        ControlProjector.from_pretrained(tmp_path / "p")
