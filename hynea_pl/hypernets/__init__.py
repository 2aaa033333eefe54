"""HyperNets (trainable copies of a frozen denoiser's encoder with zero-initialised outputs) and the control
projector that turns SUT outputs into latent-shaped controls."""

from hynea_pl.hypernets.projector import ControlProjector
from hynea_pl.hypernets.transformer_hypernet import TransformerHyperNet
from hynea_pl.hypernets.unet2d_hypernet import UNet2DHyperNet
from hynea_pl.hypernets.unet_hypernet import UNetHyperNet

__all__ = ["ControlProjector", "TransformerHyperNet", "UNet2DHyperNet", "UNetHyperNet"]
