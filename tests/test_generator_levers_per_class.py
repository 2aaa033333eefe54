"""Every generator class (family classes and YAML loaders) accepts the four memory / speed levers and forwards them
to the chain: checkpointing recomputes model calls in backward, ``grad_steps`` records only the last steps,
``autocast_dtype`` runs the model calls under autocast, ``channels_last`` converts the frozen weights, and a
differentiable chain still gives the HyperNet gradients. 3 sampling steps on tiny random models (``tiny_families``).
"""

from __future__ import annotations

import pytest
import torch
from tiny_families import FAMILIES, LOADERS, STEPS, Family
from torch import nn

from hynea_pl.generators import DiffusionGenerator

LEVERS = {"gradient_checkpointing": True, "grad_steps": 1, "autocast_dtype": "bfloat16", "channels_last": True}
DEFAULTS = {"gradient_checkpointing": False, "grad_steps": None, "autocast_dtype": None, "channels_last": False}


def _hypernet_calls(gen: DiffusionGenerator, condition) -> tuple[list[tuple[bool, bool]], nn.Module]:
    """One differentiable chain + backward with a fresh HyperNet; ``(grad enabled, bf16 autocast on)`` at each
    HyperNet call (forward and checkpoint recomputations), and the HyperNet."""
    torch.manual_seed(0)
    hypernet = gen.make_hypernet()
    calls: list[tuple[bool, bool]] = []

    def record(*_: object) -> None:
        autocast = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        calls.append((torch.is_grad_enabled(), autocast))

    hypernet.register_forward_hook(record)
    control = torch.rand(1, *gen.latent_shape, generator=torch.Generator().manual_seed(0))
    image = gen(gen.initial_noise(0), condition, hypernet=hypernet, control=control)
    assert image.requires_grad and torch.isfinite(image).all()
    image.square().mean().backward()
    return calls, hypernet


def _spatial_convs(module: nn.Module) -> list[nn.Conv2d]:
    """Convs whose weight cannot be both contiguous and channels_last (kernel > 1x1, more than one input channel)."""
    return [m for m in module.modules()
            if isinstance(m, nn.Conv2d) and m.kernel_size != (1, 1) and m.in_channels > 1]


@pytest.mark.parametrize("family", FAMILIES + LOADERS, ids=repr)
def test_levers_set_in_the_constructor_reach_the_chain(family: Family, tmp_path):
    gen = family.build(tmp_path, **LEVERS)
    assert {name: getattr(gen, name) for name in LEVERS} == LEVERS
    calls, hypernet = _hypernet_calls(gen, family.condition)
    # grad_steps=1: the first steps run without autograd; checkpointing recomputes the last call in backward;
    # autocast covers every call, the recomputation included
    assert calls == [(False, True)] * (STEPS - 1) + [(True, True), (True, True)]
    grads = [p.grad for layer in hypernet.zero_layers for p in layer.parameters()]
    assert grads and all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)
    for module in (gen.denoiser, gen.vae):
        convs = _spatial_convs(module)
        assert convs and all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in convs)
        assert not any(m.weight.is_contiguous() for m in convs)
    assert all(not p.requires_grad for p in gen.parameters())


@pytest.mark.parametrize("family", FAMILIES + LOADERS, ids=repr)
def test_levers_are_off_by_default(family: Family, tmp_path):
    gen = family.build(tmp_path)
    assert {name: getattr(gen, name) for name in DEFAULTS} == DEFAULTS
    calls, hypernet = _hypernet_calls(gen, family.condition)
    assert calls == [(True, False)] * STEPS  # every step records, no recomputation, no autocast
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for layer in hypernet.zero_layers
               for p in layer.parameters())
    assert all(m.weight.is_contiguous() for m in _spatial_convs(gen.denoiser))
