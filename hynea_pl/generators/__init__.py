"""Generators: frozen generative models whose output can be steered by a trainable HyperNet.

Every generator is a :class:`Generator` (``latent_shape``, ``device``, ``initial_noise(seed)``,
``sample(noise, condition)``: what every method needs); the diffusion families extend it as
:class:`DiffusionGenerator`, the style-based GAN (:class:`~hynea_pl.generators.stylegan.StyleGANGenerator`)
implements it directly. What only some methods use (a HyperNet-adaptable chain, an autoencoder, guidance) is an
optional capability (:mod:`hynea_pl.generators.protocol`).

Naming rule. Every generator comes as two classes:

- a *family class*, built from in-memory diffusers components (tests, notebooks, new checkpoints), ends in
  ``Generator`` and is named after the architecture it implements, never after a published model:
  ``LatentDiffusionGenerator`` (cross-attention ``UNet2DConditionModel`` LDM, class tokens or hidden states),
  ``TextConditionalGenerator`` (the same UNet driven by a CLIP prompt, plus an optional task ControlNet),
  ``UNet2DGenerator`` (unconditional ``UNet2DModel`` + ``VQModel``) and ``TransformerGenerator`` (patch
  transformers, the extension point for SiT and others);
- ``LayoutSceneGenerator`` is both: a class-conditional LDM's folder plus the layout settings of the scenes it draws
  (a digit per square of a seeded layout, :mod:`hynea_pl.generators.layout`);
- a *loader*, its YAML-facing subclass, built from a checkpoint location (``pretrained: <folder or hub id>``) and
  named after the model it loads: ``ClassConditionalLDM`` (the zoo's MNIST LDM), ``UnconditionalLDM``
  (``CompVis/ldm-celebahq-256``), ``DiTGenerator`` (``facebook/DiT-XL-2-256``), ``StableDiffusionGenerator``
  (Stable Diffusion 1.x).

Every diffusion class accepts the memory / speed levers, one :class:`MemoryOptions` given as keywords
(``gradient_checkpointing``, ``grad_steps``, ``autocast_dtype``, ``channels_last``); ``make_hypernet()`` /
``load_hypernet(directory)`` give the HyperNet that fits the family.
"""

from hynea_pl.generators.base import DiffusionGenerator, MemoryOptions
from hynea_pl.generators.class_conditional import ClassConditionalLDM
from hynea_pl.generators.conditioning import ClassEmbedding
from hynea_pl.generators.dit import DiTGenerator, TransformerGenerator
from hynea_pl.generators.layout import LayoutSceneGenerator
from hynea_pl.generators.ldm import LatentDiffusionGenerator
from hynea_pl.generators.protocol import AUTOENCODER, GUIDANCE, HYPERNET_ADAPTER, Capability, Generator, require
from hynea_pl.generators.text_conditional import StableDiffusionGenerator, TextConditionalGenerator
from hynea_pl.generators.unconditional import UNet2DGenerator, UnconditionalLDM

__all__ = [
    "AUTOENCODER",
    "GUIDANCE",
    "HYPERNET_ADAPTER",
    "Capability",
    "ClassConditionalLDM",
    "ClassEmbedding",
    "DiTGenerator",
    "DiffusionGenerator",
    "Generator",
    "LatentDiffusionGenerator",
    "LayoutSceneGenerator",
    "MemoryOptions",
    "StableDiffusionGenerator",
    "TextConditionalGenerator",
    "TransformerGenerator",
    "UNet2DGenerator",
    "UnconditionalLDM",
    "require",
]
