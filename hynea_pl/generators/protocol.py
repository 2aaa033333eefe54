"""What every test-generation method needs from a frozen generator, and the optional points some methods adapt.

:class:`Generator` is the common surface, read off the methods and the campaign: a case's origin is
``generator.sample(generator.initial_noise(seed), generator.case_condition(origin_class, seed))``
(``hynea_pl.methods.origin``, the campaign's origin validation), population searches render their genomes with
:meth:`Generator.sample` in the shape :attr:`Generator.latent_shape` (GIFTbench), and the campaign moves the
generator to a :attr:`Generator.device`.
Diffusion families extend it (:class:`~hynea_pl.generators.base.DiffusionGenerator`); the style-based GAN
(:class:`~hynea_pl.generators.stylegan.StyleGANGenerator`) implements it directly.

What only some methods use is an optional :class:`Capability`, checked with :func:`require` when a method's case is
built (a one-line ``TypeError`` naming the method, the generator class and what it lacks):

- :data:`HYPERNET_ADAPTER`: a denoising chain a HyperNet adapts (HyNeA) -- every diffusion family;
- :data:`AUTOENCODER`: ``encode`` / ``decode`` between images and latents (SINVAD);
- :data:`GUIDANCE`: classifier-free guidance (cfg-first-flip).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn


class Generator(nn.Module, metaclass=ABCMeta):
    """A frozen generative model: seeded initial noise + condition -> images in [0, 1].

    A subclass defines :attr:`latent_shape`, :attr:`device` and :meth:`sample`; it stays frozen (no gradients to its
    weights, eval mode whatever a caller asks). ``condition`` is whatever the family conditions on (a class index,
    ``(B,)`` labels, ``None`` for an unconditional generator or one whose condition is its own configuration).
    """

    @property
    @abstractmethod
    def latent_shape(self) -> tuple[int, ...]:
        """Shape of one initial noise without the batch dimension (a diffusion model's ``(C, h, w)``, a GAN's
        ``(z_dim,)``)."""

    @property
    @abstractmethod
    def device(self) -> torch.device:
        """Where the generator's weights are."""

    @abstractmethod
    def sample(self, noise: Tensor, condition: Any = None) -> Tensor:
        """``noise (B, *latent_shape)`` -> images ``(B, C, H, W)`` in [0, 1], without gradients."""

    def case_condition(self, origin_class: int | None, seed: int) -> Any:
        """What a case of ``origin_class`` whose noise comes from ``seed`` conditions on: its class (a scene generator:
        the layout its seed draws, :class:`~hynea_pl.generators.layout.LayoutSceneGenerator`)."""
        return origin_class

    def describe_condition(self, condition: Any, noise: Tensor) -> dict | None:
        """What a record keeps of a case's condition beyond its class (a scene's layout), or ``None``."""
        return None

    def initial_noise(self, seed: int) -> Tensor:
        """``(1, *latent_shape)`` float32 standard normal noise, drawn on CPU (identical on every device)."""
        gen = torch.Generator("cpu").manual_seed(seed)
        return torch.randn((1, *self.latent_shape), generator=gen, dtype=torch.float32).to(self.device)

    def forward(self, noise: Tensor, condition: Any = None) -> Tensor:
        """Images of ``noise`` for ``condition`` (:meth:`sample` unless the family has a differentiable path)."""
        return self.sample(noise, condition)

    def train(self, mode: bool = True) -> Generator:
        """The generator is frozen: it stays in eval mode whatever the caller (e.g. Lightning) asks for."""
        return super().train(False)

    @staticmethod
    def expand_batch(x: Tensor, batch: int) -> Tensor:
        """``(1, ...)`` -> ``(batch, ...)``; a tensor already of ``batch`` rows is returned as is."""
        if x.shape[0] == batch:
            return x
        if x.shape[0] == 1:
            return x.expand(batch, *x.shape[1:])
        raise ValueError(f"condition batch {x.shape[0]} does not match noise batch {batch}")


@dataclass(frozen=True)
class Capability:
    """An optional point of a generator that some methods use beyond :class:`Generator`: the members they call."""

    description: str
    members: tuple[str, ...]

    def missing(self, generator: Any) -> list[str]:
        """The members ``generator`` lacks or sets to ``None`` (empty: it has the capability)."""
        return [name for name in self.members if getattr(generator, name, None) is None]

    def __call__(self, generator: Any) -> bool:
        """Whether ``generator`` has the capability."""
        return not self.missing(generator)


#: HyNeA: a fresh / saved HyperNet for the denoiser, the differentiable chain it steers, the decoder and the
#: denoising prior (every :class:`~hynea_pl.generators.base.DiffusionGenerator` has it).
HYPERNET_ADAPTER = Capability("a diffusion model whose denoising chain a HyperNet adapts",
                              ("make_hypernet", "load_hypernet", "denoise", "decode", "denoising_loss", "scheduler"))
#: SINVAD: an autoencoder between images and the generator's latents.
AUTOENCODER = Capability("an autoencoder", ("encode", "decode"))
#: cfg-first-flip: classifier-free guidance (its scale and a condition's null counterpart).
GUIDANCE = Capability("classifier-free guidance", ("guidance_scale", "encode_condition"))


def conditions_beyond_class(generator: Any) -> bool:
    """Whether ``generator`` conditions a case on more than its class (its own :meth:`Generator.case_condition`,
    e.g. a scene's layout): such cases cannot share a batch or start from an inverted image."""
    return type(generator).case_condition is not Generator.case_condition


def require(generator: Any, capability: Capability, method: str) -> None:
    """A one-line ``TypeError`` when ``generator`` lacks ``capability``, naming ``method``, the generator's class and
    the missing members."""
    missing = capability.missing(generator)
    if missing:
        raise TypeError(f"{method} needs {capability.description}: {type(generator).__name__} has no "
                        f"{', '.join(missing)}")


__all__ = ["AUTOENCODER", "GUIDANCE", "HYPERNET_ADAPTER", "Capability", "Generator", "conditions_beyond_class",
           "require"]
