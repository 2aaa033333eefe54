"""DiffusionGenerator's memory/speed levers: checkpointing, truncated back-propagation, bf16 autocast, channels_last.

Every lever must leave the image unchanged (exactly, or within bf16 precision) and keep gradients flowing into the
HyperNet and the control; truncated back-propagation must record only the last K steps. Shapes: noise / latents
``(1, 4, 8, 8)``, images ``(1, 1, 32, 32)`` (see ``tiny_components``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tiny_components import IMAGE_SHAPE, NUM_CLASSES, tiny_generator, tiny_scheduler, tiny_unet, tiny_vae
from tiny_families import perturb_zero_layers
from torch import Tensor, nn

from hynea_pl.generators import DiffusionGenerator, LatentDiffusionGenerator
from hynea_pl.hypernets import ControlProjector, UNetHyperNet

LABEL = 3
TARGET = 5
STEPS = 4


# ---------------------------------------------------------------------- helpers
def _adapted(gen: LatentDiffusionGenerator, seed: int = 0) -> tuple[UNetHyperNet, ControlProjector]:
    """A seeded HyperNet whose zero layers are perturbed (as after a few optimiser steps), so that every HyperNet
    parameter receives gradient, and a seeded control projector."""
    torch.manual_seed(seed)
    hypernet = UNetHyperNet(gen.unet)
    projector = ControlProjector((NUM_CLASSES,), gen.latent_shape)
    perturb_zero_layers(hypernet, scale=1e-2, seed=seed + 1)
    return hypernet, projector


def _signal() -> Tensor:
    """One-hot target ``(1, NUM_CLASSES)``."""
    return nn.functional.one_hot(torch.tensor([TARGET]), NUM_CLASSES).float()


def _image_and_grads(gen: DiffusionGenerator, hypernet: nn.Module, projector: nn.Module) -> tuple[Tensor, dict]:
    """One differentiable chain + decode from seed-0 noise; a fixed random linear loss on the image ``(1, 1, 32, 32)``.

    Returns the detached image and ``{name: grad}`` for every HyperNet and projector parameter (zeros if None).
    """
    hypernet.zero_grad(set_to_none=True)
    projector.zero_grad(set_to_none=True)
    image = gen(gen.initial_noise(0), LABEL, hypernet, projector(_signal()))
    weights = torch.randn(image.shape, generator=torch.Generator().manual_seed(123))
    (image * weights).sum().backward()
    named = [*hypernet.named_parameters(prefix="hypernet"), *projector.named_parameters(prefix="projector")]
    grads = {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p)) for n, p in named}
    return image.detach(), grads


def _total_grad(grads: dict) -> float:
    return float(sum(g.abs().sum() for g in grads.values()))


def _saved_bytes(fn: Any) -> int:
    """Bytes of tensors autograd saves for backward while ``fn()`` runs (outside checkpointed regions), deduplicated
    by storage; the frozen parameters are not counted."""
    seen: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


# ---------------------------------------------------------------------- checkpointing
def test_checkpointing_on_off_same_image_same_gradients_less_saved_memory():
    gen = tiny_generator(num_inference_steps=STEPS, gradient_checkpointing=False)
    hypernet, projector = _adapted(gen)
    image_off, grads_off = _image_and_grads(gen, hypernet, projector)
    gen.gradient_checkpointing = True
    image_on, grads_on = _image_and_grads(gen, hypernet, projector)

    torch.testing.assert_close(image_on, image_off, atol=1e-6, rtol=1e-6)
    assert grads_on.keys() == grads_off.keys()
    for name in grads_off:
        torch.testing.assert_close(grads_on[name], grads_off[name], atol=1e-6, rtol=1e-4, msg=name)
    assert _total_grad(grads_on) > 0
    assert grads_on["hypernet.controlnet.controlnet_mid_block.weight"].abs().sum() > 0

    # the lever does something: far fewer activations are held for backward
    def run() -> None:
        gen(gen.initial_noise(0), LABEL, hypernet, projector(_signal()))

    saved_on = _saved_bytes(run)
    gen.gradient_checkpointing = False
    saved_off = _saved_bytes(run)
    assert saved_on < saved_off / 5, (saved_on, saved_off)


# ---------------------------------------------------------------------- truncated back-propagation
def _grad_mode_of_hypernet_calls(gen: DiffusionGenerator, hypernet: nn.Module, projector: nn.Module) -> list[bool]:
    """``torch.is_grad_enabled()`` at each HyperNet forward of one chain (forward pass only, no backward)."""
    modes: list[bool] = []
    handle = hypernet.register_forward_hook(lambda *_: modes.append(torch.is_grad_enabled()))
    try:
        gen(gen.initial_noise(0), LABEL, hypernet, projector(_signal()))
    finally:
        handle.remove()
    return modes


@pytest.mark.parametrize("gradient_checkpointing", [True, False])
def test_grad_steps_records_only_the_last_k_steps(gradient_checkpointing):
    gen = tiny_generator(num_inference_steps=STEPS, gradient_checkpointing=gradient_checkpointing)
    hypernet, projector = _adapted(gen)
    assert _grad_mode_of_hypernet_calls(gen, hypernet, projector) == [True] * STEPS
    gen.grad_steps = 2
    assert _grad_mode_of_hypernet_calls(gen, hypernet, projector) == [False, False, True, True]
    gen.grad_steps = 1
    assert _grad_mode_of_hypernet_calls(gen, hypernet, projector) == [False] * (STEPS - 1) + [True]
    # under no_grad nothing records, whatever grad_steps says
    with torch.no_grad():
        assert _grad_mode_of_hypernet_calls(gen, hypernet, projector) == [False] * STEPS


def test_grad_steps_same_image_truncated_but_nonzero_gradients():
    gen = tiny_generator(num_inference_steps=STEPS)
    hypernet, projector = _adapted(gen)
    image_full, grads_full = _image_and_grads(gen, hypernet, projector)
    gen.grad_steps = 2
    image_k, grads_k = _image_and_grads(gen, hypernet, projector)

    torch.testing.assert_close(image_k, image_full, atol=1e-6, rtol=1e-6)
    assert _total_grad(grads_k) > 0
    assert grads_k["hypernet.controlnet.controlnet_mid_block.weight"].abs().sum() > 0
    assert all(g.abs().sum() > 0 for n, g in grads_k.items() if n.startswith("projector"))
    differs = [n for n in grads_full if not torch.allclose(grads_k[n], grads_full[n], atol=1e-7, rtol=1e-3)]
    assert len(differs) > len(grads_full) // 2, "truncation should change most gradients"

    # fewer steps on the tape -> less saved activation memory
    def run() -> None:
        gen(gen.initial_noise(0), LABEL, hypernet, projector(_signal()))

    gen.gradient_checkpointing = False
    saved_k = _saved_bytes(run)
    gen.grad_steps = None
    saved_full = _saved_bytes(run)
    assert saved_k < saved_full * 0.75, (saved_k, saved_full)


@pytest.mark.parametrize("grad_steps", [STEPS, STEPS + 1, 1000])
def test_grad_steps_at_least_the_chain_length_is_the_full_chain(grad_steps):
    gen = tiny_generator(num_inference_steps=STEPS)
    hypernet, projector = _adapted(gen)
    image_full, grads_full = _image_and_grads(gen, hypernet, projector)
    gen.grad_steps = grad_steps
    image_k, grads_k = _image_and_grads(gen, hypernet, projector)
    torch.testing.assert_close(image_k, image_full, atol=0, rtol=0)
    for name in grads_full:
        torch.testing.assert_close(grads_k[name], grads_full[name], atol=0, rtol=0, msg=name)


@pytest.mark.parametrize("grad_steps", [0, -1])
def test_invalid_grad_steps_raise(grad_steps):
    with pytest.raises(ValueError, match="grad_steps"):
        tiny_generator(grad_steps=grad_steps)


# ---------------------------------------------------------------------- bf16 autocast
def test_bfloat16_autocast_on_cpu_close_image_and_gradients():
    gen = tiny_generator(num_inference_steps=STEPS)
    hypernet, projector = _adapted(gen)
    image_fp32, _ = _image_and_grads(gen, hypernet, projector)
    gen_bf16 = tiny_generator(num_inference_steps=STEPS, autocast_dtype="bfloat16")
    assert gen_bf16.autocast_dtype == "bfloat16"
    image_bf16, grads = _image_and_grads(gen_bf16, hypernet, projector)

    assert image_bf16.dtype == torch.float32 and image_bf16.shape == (1, *IMAGE_SHAPE)
    assert 0 <= image_bf16.min() and image_bf16.max() <= 1
    assert not torch.equal(image_bf16, image_fp32)  # autocast really ran in bf16
    torch.testing.assert_close(image_bf16, image_fp32, atol=0.1, rtol=0)
    assert (image_bf16 - image_fp32).abs().mean() < 0.02
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert grads["hypernet.controlnet.controlnet_mid_block.weight"].abs().sum() > 0
    assert all(p.dtype == torch.float32 for p in hypernet.parameters())  # weights stay fp32 (autocast, not .to)
    # the frozen weights are unchanged too
    assert gen_bf16.dtype == torch.float32


@pytest.mark.parametrize("dtype", ["bf16", "float32", "torch.bfloat16", "int8"])
def test_bad_autocast_dtype_raises(dtype):
    with pytest.raises(ValueError, match="autocast_dtype"):
        tiny_generator(autocast_dtype=dtype)


# ---------------------------------------------------------------------- channels_last
def test_channels_last_same_image_and_converted_weights():
    gen = tiny_generator(num_inference_steps=STEPS)
    hypernet, projector = _adapted(gen)
    image, grads = _image_and_grads(gen, hypernet, projector)
    gen_cl = tiny_generator(num_inference_steps=STEPS, channels_last=True)
    image_cl, grads_cl = _image_and_grads(gen_cl, hypernet, projector)

    torch.testing.assert_close(image_cl, image, atol=1e-5, rtol=1e-5)
    for name in grads:
        torch.testing.assert_close(grads_cl[name], grads[name], atol=1e-5, rtol=1e-3, msg=name)
    for module in (gen_cl.unet, gen_cl.vae):
        convs = [m for m in module.modules() if isinstance(m, nn.Conv2d)]
        assert convs and all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in convs)
        # a 3x3 kernel is not both layouts at once: it really was converted
        spatial = [m for m in convs if m.kernel_size != (1, 1) and m.in_channels > 1]
        assert spatial and not any(m.weight.is_contiguous() for m in spatial)
    assert all(not p.requires_grad for p in gen_cl.parameters())  # still frozen after the conversion


# ---------------------------------------------------------------------- the family contract
class _NoModelOutput(DiffusionGenerator):
    """A family that forgot :meth:`model_output` (and :meth:`make_hypernet`, :meth:`load_hypernet`)."""

    def __init__(self) -> None:
        unet = tiny_unet()
        super().__init__(unet, tiny_vae(), tiny_scheduler(), num_inference_steps=2)
        self.unet = unet

    @property
    def denoiser(self) -> nn.Module:
        return self.unet

    def encode_condition(self, condition: Any, batch: int) -> tuple[Tensor, None]:
        return torch.zeros(batch, 1, 32), None


def test_family_without_model_output_raises_not_implemented():
    gen = _NoModelOutput()
    noise = gen.initial_noise(0)  # the shared parts work
    assert noise.shape == (1, 4, 8, 8)
    with pytest.raises(NotImplementedError):
        gen.sample(noise)
    with pytest.raises(NotImplementedError):
        gen(noise)
    with pytest.raises(NotImplementedError):
        gen.make_hypernet()
    with pytest.raises(NotImplementedError, match="load_hypernet"):
        gen.load_hypernet("anywhere")


def test_base_class_alone_has_no_denoiser():
    with pytest.raises(NotImplementedError):
        DiffusionGenerator(tiny_unet(), tiny_vae()).device  # noqa: B018
