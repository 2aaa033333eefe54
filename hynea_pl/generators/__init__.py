"""Generators: frozen generative models whose output can be steered by a trainable HyperNet."""

from hynea_pl.generators.base import DiffusionGenerator
from hynea_pl.generators.class_conditional import ClassConditionalLDM
from hynea_pl.generators.conditioning import ClassEmbedding
from hynea_pl.generators.ldm import LatentDiffusionGenerator

__all__ = ["ClassConditionalLDM", "ClassEmbedding", "DiffusionGenerator", "LatentDiffusionGenerator"]
