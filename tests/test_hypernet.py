"""UNetHyperNet + ControlProjector on the frozen chain: zero-init invariance, where gradients go, checkpointing,
the shared control path, save / load."""

import pytest
import torch
from tiny_components import (
    LATENT_SHAPE,
    NUM_CLASSES,
    reference_sample,
    tiny_class_embedding,
    tiny_generator,
    tiny_scheduler,
    tiny_unet,
    tiny_vae,
)
from tiny_families import perturb_zero_layers

from hynea_pl.hypernets import ControlProjector, UNetHyperNet
from hynea_pl.hypernets.control import expand_control

LABEL = 3
TARGET = 5


def _adapted(gen, seed=0):
    torch.manual_seed(seed)
    hypernet = UNetHyperNet(gen.unet)
    projector = ControlProjector((NUM_CLASSES,), gen.latent_shape)
    return hypernet, projector


def _control(projector):
    return projector(torch.nn.functional.one_hot(torch.tensor([TARGET]), NUM_CLASSES).float())


def _generator_state(gen):
    return {k: v.clone() for k, v in gen.state_dict().items()}


def test_hypernet_is_a_trainable_copy_with_zero_outputs():
    unet = tiny_unet()
    unet.requires_grad_(False)
    hypernet = UNetHyperNet(unet)
    assert all(p.requires_grad for p in hypernet.parameters())
    assert all(not p.requires_grad for p in unet.parameters())
    for layer in hypernet.zero_layers:
        assert all(torch.count_nonzero(p) == 0 for p in layer.parameters())
    # copied, not shared
    torch.testing.assert_close(hypernet.controlnet.conv_in.weight, unet.conv_in.weight, atol=0, rtol=0)
    assert hypernet.controlnet.conv_in.weight.data_ptr() != unet.conv_in.weight.data_ptr()
    # the control stays at latent resolution
    assert hypernet.conditioning_channels == LATENT_SHAPE[0]


def test_hypernet_residuals_match_unet_skips_and_repeat_control():
    unet = tiny_unet()
    hypernet = UNetHyperNet(unet)
    perturb_zero_layers(hypernet, scale=1e-2)
    sample = torch.randn(4, *LATENT_SHAPE)  # doubled CFG batch of 2
    states = torch.randn(4, 1, 32)
    control = torch.rand(2, *LATENT_SHAPE)
    down, mid = hypernet(sample, torch.tensor(500), states, control)
    assert isinstance(down, tuple) and len(down) == len(hypernet.controlnet.controlnet_down_blocks)
    assert all(r.shape[0] == 4 for r in down) and mid.shape[0] == 4
    explicit, _ = hypernet(sample, torch.tensor(500), states, control.repeat(2, 1, 1, 1))
    for a, b in zip(down, explicit, strict=True):  # the same values, possibly another memory layout
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    unet(sample, 500, encoder_hidden_states=states, down_block_additional_residuals=down,
         mid_block_additional_residual=mid)  # shapes fit the frozen UNet
    no_control, _ = hypernet(sample, torch.tensor(500), states, None)
    zeros, _ = hypernet(sample, torch.tensor(500), states, torch.zeros(4, *LATENT_SHAPE))
    torch.testing.assert_close(no_control[0], zeros[0], atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="does not divide"):
        hypernet(sample, torch.tensor(500), states, torch.rand(3, *LATENT_SHAPE))


@pytest.mark.parametrize("gradient_checkpointing", [True, False])
def test_fresh_hypernet_leaves_the_chain_unchanged(gradient_checkpointing):
    gen = tiny_generator(gradient_checkpointing=gradient_checkpointing)
    hypernet, projector = _adapted(gen)
    noise = gen.initial_noise(0)
    adapted = gen(noise, LABEL, hypernet, _control(projector))
    assert adapted.requires_grad
    frozen = gen.sample(noise, LABEL)
    oracle = reference_sample(
        tiny_unet(), tiny_vae(), tiny_scheduler(), tiny_class_embedding(), noise, LABEL,
        gen.num_inference_steps, gen.guidance_scale,
    )
    torch.testing.assert_close(adapted.detach(), frozen, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(adapted.detach(), oracle, atol=1e-5, rtol=1e-5)
    with_hypernet_no_grad = gen.sample(noise, LABEL, hypernet, _control(projector))
    torch.testing.assert_close(with_hypernet_no_grad, frozen, atol=1e-6, rtol=1e-6)


def test_gradients_reach_only_hypernet_and_projector_and_training_changes_the_image():
    gen = tiny_generator()
    hypernet, projector = _adapted(gen)
    before = _generator_state(gen)
    params = [*hypernet.parameters(), *projector.parameters()]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    noise = gen.initial_noise(0)
    origin = gen.sample(noise, LABEL)
    images = []
    for step in range(3):
        optimizer.zero_grad()
        image = gen(noise, LABEL, hypernet, _control(projector))
        images.append(image.detach())
        loss = (image - 1).square().mean()  # push towards white
        loss.backward()
        assert all(p.grad is None for p in gen.parameters())
        zero_layer_grads = [p.grad for layer in hypernet.zero_layers for p in layer.parameters()]
        assert all(g is not None and g.abs().sum() > 0 for g in zero_layer_grads)
        if step == 2:  # the zero layers and the zero conv of the control embedding have moved by now
            assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in projector.parameters())
        optimizer.step()
    torch.testing.assert_close(images[0], origin, atol=1e-6, rtol=1e-6)
    assert (images[2] - origin).abs().max() > 1e-3  # two AdamW steps changed the image
    assert (images[2] - 1).square().mean() < (origin - 1).square().mean()
    after = gen.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_checkpointing_gives_the_same_loss_and_gradients():
    results = []
    for gradient_checkpointing in (True, False):
        gen = tiny_generator(gradient_checkpointing=gradient_checkpointing)
        hypernet, projector = _adapted(gen)
        perturb_zero_layers(hypernet, scale=1e-2)
        image = gen(gen.initial_noise(0), LABEL, hypernet, _control(projector))
        loss = image.mean()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in [*hypernet.named_parameters(), *projector.named_parameters()]}
        results.append((loss.detach(), grads))
    (loss_a, grads_a), (loss_b, grads_b) = results
    torch.testing.assert_close(loss_a, loss_b, atol=1e-6, rtol=1e-6)
    assert grads_a.keys() == grads_b.keys()
    # Some gradients vanish mathematically, but kernels return them as 0.0 or as ~1e-12 depending on thread count
    # and machine; so "negligible" is relative: below 1e-6 of the largest gradient norm (real ones are >= 1e-4).
    norms = {n: float(g.norm()) for n, g in grads_a.items()}
    scale = max(norms.values())
    negligible = {n for n, v in norms.items() if v < 1e-6 * scale}
    # Attention over a single context token is softmax([s]) == 1 whatever the score: query and key get none.
    attention_qk = {n for n in norms if "attn2.to_q" in n or "attn2.to_k" in n}
    assert attention_qk and attention_qk <= negligible, {n: norms[n] / scale for n in attention_qk}
    # Nothing else may vanish except what provably must: the transformer's norm2 feeds only that query, and in
    # a block whose GroupNorm has one channel per group a per-channel constant (conv1's bias, the time
    # embedding's projection) is removed by the normalisation that follows it.
    structural = attention_qk | {n for n in norms if ("transformer_blocks" in n and ".norm2." in n)
                                 or (".resnets." in n and (".conv1.bias" in n or ".time_emb_proj." in n))}
    assert negligible <= structural, sorted(negligible - structural)
    assert len(negligible) < len(norms) // 4  # every other parameter (most of them) gets a real gradient
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], atol=1e-6, rtol=1e-4, msg=name)


@pytest.mark.parametrize(("gradient_checkpointing", "model_calls"), [(True, 2), (False, 1)])
def test_checkpointing_recomputes_model_calls_but_steps_the_scheduler_once(gradient_checkpointing, model_calls):
    gen = tiny_generator(gradient_checkpointing=gradient_checkpointing)
    hypernet, projector = _adapted(gen)
    counts = {"hypernet": 0, "step": 0}
    hypernet.register_forward_hook(lambda *_: counts.__setitem__("hypernet", counts["hypernet"] + 1))
    step = gen.scheduler.step

    def counting_step(*args, **kwargs):
        counts["step"] += 1
        return step(*args, **kwargs)

    gen.scheduler.step = counting_step
    gen(gen.initial_noise(0), LABEL, hypernet, _control(projector)).mean().backward()
    n = gen.num_inference_steps
    assert counts == {"hypernet": model_calls * n, "step": n}


def test_expand_control_repeats_the_batch_in_guidance_order_and_casts():
    control = torch.arange(2 * 3, dtype=torch.float32).reshape(2, 3, 1, 1)
    same = expand_control(control, 2)
    assert same is control  # nothing to do: no copy
    doubled = expand_control(control, 4, torch.float64)
    assert doubled.shape == (4, 3, 1, 1) and doubled.dtype == torch.float64
    assert torch.equal(doubled[:2], control.double()) and torch.equal(doubled[2:], control.double())
    assert expand_control(torch.ones(1, 5), 3).shape == (3, 5)  # any rank
    for batch in (3, 5):
        with pytest.raises(ValueError, match="control batch 2 does not divide model batch"):
            expand_control(control, batch)


def test_from_pretrained_rebuilds_from_the_frozen_unet_and_loads_the_saved_weights(tmp_path):
    unet = tiny_unet()
    before = {k: v.clone() for k, v in unet.state_dict().items()}
    hypernet = UNetHyperNet(unet, conditioning_embedding_out_channels=(8,))
    perturb_zero_layers(hypernet, scale=1e-2)
    hypernet.save_pretrained(tmp_path)
    loaded = UNetHyperNet.from_pretrained(tmp_path, unet)
    assert loaded.conditioning_embedding_out_channels == (8,)  # the saved settings, not the defaults
    saved, restored = hypernet.state_dict(), loaded.state_dict()
    assert list(saved) == list(restored) and all(torch.equal(saved[k], restored[k]) for k in saved)
    assert torch.count_nonzero(loaded.controlnet.controlnet_mid_block.weight) > 0
    assert all(torch.equal(before[k], v) for k, v in unet.state_dict().items())  # the frozen UNet is only read
    assert loaded.controlnet.conv_in.weight.data_ptr() != unet.conv_in.weight.data_ptr()
