"""Generators: frozen generative models whose output can be steered by a trainable HyperNet."""

from hynea_pl.generators.base import DiffusionGenerator
from hynea_pl.generators.class_conditional import ClassConditionalLDM
from hynea_pl.generators.conditioning import ClassEmbedding
from hynea_pl.generators.dit import DiTGenerator, TransformerGenerator
from hynea_pl.generators.ldm import LatentDiffusionGenerator
from hynea_pl.generators.text_conditional import StableDiffusionGenerator, TextConditionalLDM
from hynea_pl.generators.unconditional import UnconditionalLatentDiffusion, UnconditionalLDM

__all__ = [
    "ClassConditionalLDM",
    "ClassEmbedding",
    "DiTGenerator",
    "DiffusionGenerator",
    "LatentDiffusionGenerator",
    "StableDiffusionGenerator",
    "TextConditionalLDM",
    "TransformerGenerator",
    "UnconditionalLDM",
    "UnconditionalLatentDiffusion",
]
