"""The common ``Generator`` surface, its optional capabilities, and the memory options declared once.

- every generator is a :class:`Generator`; the diffusion families extend it as :class:`DiffusionGenerator`, the
  style-based GAN implements it directly (no autoencoder, no scheduler, no stubs);
- a method that needs an optional point refuses a generator without it in one line naming the method and the class;
- :class:`MemoryOptions` is the one declaration of the four memory / speed levers: every YAML-facing diffusion
  generator takes them as flat keys under ``generator.init_args`` (the configs' and saved runs' spelling).
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

import pytest
import torch
from jsonargparse import ArgumentParser
from tiny_components import tiny_generator
from tiny_stylegan import CraftedGAN, threshold_sut
from torch import Tensor, nn

from hynea_pl.baselines.cfg_first_flip import CFGFirstFlipCase
from hynea_pl.baselines.giftbench import GIFTbenchCase
from hynea_pl.baselines.sinvad import SINVADCase
from hynea_pl.generators import (
    AUTOENCODER,
    GUIDANCE,
    HYPERNET_ADAPTER,
    ClassConditionalLDM,
    DiffusionGenerator,
    DiTGenerator,
    Generator,
    MemoryOptions,
    StableDiffusionGenerator,
    UnconditionalLDM,
    require,
)
from hynea_pl.generators.stylegan import StyleGANGenerator
from hynea_pl.methods import HyNeACase

MEMORY = [f.name for f in fields(MemoryOptions)]


class _Constant(Generator):
    """The smallest generator: the image is the noise's mean as a grey level."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()), requires_grad=False)

    @property
    def latent_shape(self) -> tuple[int, ...]:
        return (3,)

    @property
    def device(self) -> torch.device:
        return self.scale.device

    @torch.no_grad()
    def sample(self, noise: Tensor, condition: Any = None) -> Tensor:
        return torch.sigmoid(noise.mean(1)).reshape(-1, 1, 1, 1).expand(-1, 1, 4, 4) * self.scale


# ---------------------------------------------------------------------- the common surface
def test_a_generator_needs_only_latent_shape_device_and_sample():
    gen = _Constant()
    noise = gen.initial_noise(7)
    assert noise.shape == (1, 3) and noise.dtype == torch.float32
    assert torch.equal(noise, torch.randn((1, 3), generator=torch.Generator("cpu").manual_seed(7)))
    assert torch.equal(gen(noise), gen.sample(noise))
    assert not gen.train().training  # frozen: eval whatever the caller asks

    class _NoSample(Generator):
        latent_shape = (1,)
        device = torch.device("cpu")

    with pytest.raises(TypeError, match="abstract"):
        _NoSample()


def test_the_gan_implements_the_common_surface_directly():
    gan = StyleGANGenerator(network=CraftedGAN())
    assert isinstance(gan, Generator) and not isinstance(gan, DiffusionGenerator)
    for absent in ("vae", "scheduler", "denoiser", "denoise", "decode", "encode", "make_hypernet", "guidance_scale"):
        assert not hasattr(gan, absent), absent
    assert [name for name, _ in gan.named_children()] == ["network"]
    z = gan.initial_noise(3)
    assert z.shape == (1, gan.z_dim) and torch.equal(z, torch.randn((1, gan.z_dim),
                                                                    generator=torch.Generator("cpu").manual_seed(3)))
    assert torch.equal(gan(z, 0), gan.sample(z, 0))
    assert not gan.train().training


def test_capabilities_of_the_diffusion_families_and_the_gan():
    ldm, gan = tiny_generator(), StyleGANGenerator(network=CraftedGAN())
    for capability in (HYPERNET_ADAPTER, AUTOENCODER, GUIDANCE):
        assert capability(ldm) and not capability(gan)
    require(ldm, HYPERNET_ADAPTER, "HyNeA")  # no error
    assert AUTOENCODER.missing(gan) == ["encode", "decode"]


# ---------------------------------------------------------------------- methods refuse what they cannot use
@pytest.mark.parametrize(("build", "error", "message"), [
    (lambda gen: HyNeACase(gen, threshold_sut(0.5)), TypeError,
     r"^HyNeA needs a diffusion model whose denoising chain a HyperNet adapts: StyleGANGenerator has no "
     r"make_hypernet, load_hypernet, denoise, decode, denoising_loss, scheduler$"),
    (lambda gen: SINVADCase(gen, threshold_sut(0.5)), TypeError,
     r"^SINVAD needs an autoencoder: StyleGANGenerator has no encode, decode$"),
    (lambda gen: CFGFirstFlipCase(gen, threshold_sut(0.5)), ValueError,
     r"^cfg-first-flip .* samples without guidance \(StyleGANGenerator has none\)$"),
])
def test_diffusion_methods_refuse_the_gan_in_one_line(build, error, message):
    with pytest.raises(error, match=message):
        build(StyleGANGenerator(network=CraftedGAN()))


def test_giftbench_uses_only_the_common_surface_and_still_takes_the_gan():
    case = GIFTbenchCase(StyleGANGenerator(network=CraftedGAN()), threshold_sut(0.5))
    assert case.generator.latent_shape == (case.generator.z_dim,)


# ---------------------------------------------------------------------- the memory options, declared once
def test_memory_options_defaults_validation_and_the_generator_attributes():
    assert asdict(MemoryOptions()) == {"gradient_checkpointing": False, "grad_steps": None, "autocast_dtype": None,
                                       "channels_last": False}
    with pytest.raises(ValueError, match="grad_steps must be >= 1"):
        MemoryOptions(grad_steps=0)
    with pytest.raises(ValueError, match="grad_steps must be >= 1"):
        MemoryOptions(grad_steps=True)
    with pytest.raises(ValueError, match="autocast_dtype must be one of"):
        MemoryOptions(autocast_dtype="float64")
    gen = tiny_generator(gradient_checkpointing=True, grad_steps=2)
    assert gen.memory == MemoryOptions(gradient_checkpointing=True, grad_steps=2)
    assert (gen.gradient_checkpointing, gen.grad_steps, gen.autocast_dtype, gen.channels_last) == (True, 2, None, False)
    gen.grad_steps = None  # the attributes stay the levers in force (benchmarks flip them)
    assert gen.memory.grad_steps is None
    with pytest.raises(TypeError, match=r"^LatentDiffusionGenerator\(\) got unexpected keyword argument\(s\) "
                                        r"grad_step \(its memory options: gradient_checkpointing, grad_steps, "
                                        r"autocast_dtype, channels_last\)$"):
        tiny_generator(grad_step=2)


@pytest.mark.parametrize("cls", [ClassConditionalLDM, UnconditionalLDM, DiTGenerator, StableDiffusionGenerator])
def test_every_yaml_generator_takes_the_memory_options_as_flat_init_args(cls):
    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(Generator, "generator")
    config = parser.parse_object({"generator": {"class_path": f"{cls.__module__}.{cls.__name__}",
                                                "init_args": {"grad_steps": 2, "autocast_dtype": "bfloat16"}}})
    init_args = config.generator.init_args
    assert {name: init_args[name] for name in MEMORY} == {"gradient_checkpointing": False, "grad_steps": 2,
                                                          "autocast_dtype": "bfloat16", "channels_last": False}
    assert "memory" not in init_args


def test_the_gan_takes_no_memory_options():
    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(Generator, "generator")
    with pytest.raises(Exception, match="gradient_checkpointing"):
        parser.parse_object({"generator": {"class_path": "hynea_pl.generators.stylegan.StyleGANGenerator",
                                           "init_args": {"pretrained": "x", "gradient_checkpointing": True}}})
