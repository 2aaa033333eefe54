"""HyperNets (trainable copies of a frozen denoiser's encoder with zero-initialised outputs) and the control
projector that turns SUT outputs into latent-shaped controls.

All of them save the diffusers way (``save_pretrained(directory)``: ``config.json`` + safetensors weights).
``ControlProjector.from_pretrained(directory)`` loads a projector; a HyperNet is rebuilt from the frozen denoiser it
copies, so its loader takes it (``UNetHyperNet.from_pretrained(directory, unet)``), or ask the generator:
``generator.load_hypernet(directory)``.
"""

from hynea_pl.hypernets.control import expand_control
from hynea_pl.hypernets.pretrained import PretrainedHyperNetMixin
from hynea_pl.hypernets.projector import ControlProjector
from hynea_pl.hypernets.transformer_hypernet import TransformerHyperNet
from hynea_pl.hypernets.unet2d_hypernet import UNet2DHyperNet
from hynea_pl.hypernets.unet_hypernet import UNetHyperNet

__all__ = [
    "ControlProjector",
    "PretrainedHyperNetMixin",
    "TransformerHyperNet",
    "UNet2DHyperNet",
    "UNetHyperNet",
    "expand_control",
]
