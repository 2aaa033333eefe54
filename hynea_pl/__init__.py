"""hynea_pl: failure-inducing test inputs for vision models by per-test-case HyperNet adaptation of a
latent diffusion model, built on PyTorch Lightning and diffusers."""

from hynea_pl._offline import apply_offline_defaults

apply_offline_defaults()

__version__ = "0.1.0"
