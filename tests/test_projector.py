"""ControlProjector: the three branches of Algorithm 1, boundedness, gradients, errors."""

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
