"""DiTGenerator + TransformerHyperNet: equality with DiTPipeline, zero-init, where gradients go, HyNeA, loading."""

from __future__ import annotations

import shutil

import lightning as L
import pytest
import torch
from diffusers import DDIMScheduler, DiTPipeline, EulerDiscreteScheduler
from hub_cache import fake_hub_cache
from tiny_dit import (
    IMAGE_SHAPE,
    LATENT_SHAPE,
    NUM_LAYERS,
    dit_scheduler,
    save_dit_folder,
    tiny_dit,
    tiny_rgb_sut,
    tiny_rgb_vae,
)
from tiny_families import perturb_zero_layers as perturb

from hynea_pl.generators.dit import DiTGenerator
from hynea_pl.methods import HyNeACase, PaperSearch

LABEL = 207


def make_generator(**settings) -> DiTGenerator:
    settings = {"num_inference_steps": 3, "guidance_scale": 4.0, "hypernet_blocks": 2, **settings}
    return DiTGenerator.from_components(tiny_dit(), tiny_rgb_vae(), dit_scheduler(), **settings)


@torch.no_grad()
def pipeline_images(seed: int, label: int, steps: int, guidance: float) -> torch.Tensor:
    """diffusers' own DiTPipeline on fresh copies of the same tiny components (the oracle), in eval mode as
    ``from_pretrained`` leaves them (in training mode DiT's label embedding drops class labels at random)."""
    pipe = DiTPipeline(transformer=tiny_dit().eval(), vae=tiny_rgb_vae().eval(), scheduler=dit_scheduler())
    pipe.set_progress_bar_config(disable=True)
    out = pipe(class_labels=[label], guidance_scale=guidance, generator=torch.Generator("cpu").manual_seed(seed),
               num_inference_steps=steps, output_type="pt")
    return out.images


def control_for(batch: int = 1) -> torch.Tensor:
    return torch.rand(batch, *LATENT_SHAPE, generator=torch.Generator().manual_seed(2))


# ---------------------------------------------------------------------- the HyperNet
def test_hypernet_copies_first_blocks_with_zero_outputs_and_stays_deterministic():
    gen = make_generator(hypernet_blocks=8)
    hypernet = gen.make_hypernet()
    assert hypernet.num_blocks == NUM_LAYERS  # K = 8 capped at the depth
    assert make_generator(hypernet_blocks=2).make_hypernet().num_blocks == 2
    assert all(p.requires_grad for p in hypernet.parameters())
    assert all(not p.requires_grad for p in gen.parameters())
    for layer in [*hypernet.zero_layers, hypernet.control_zero]:
        assert all(torch.count_nonzero(p) == 0 for p in layer.parameters())
    frozen = gen.transformer.transformer_blocks[0].attn1.to_q.weight
    copied = hypernet.blocks[0].attn1.to_q.weight
    torch.testing.assert_close(copied, frozen, atol=0, rtol=0)
    assert copied.data_ptr() != frozen.data_ptr()
    hypernet.train()  # the copies never drop class labels (DiT's label embedding does in training mode)
    assert hypernet.training and not any(m.training for m in hypernet.blocks.modules())

    perturb(hypernet)
    tokens = torch.randn(4, 16, 16)  # doubled CFG batch of 2, (8/2)^2 tokens, width 16
    context = (torch.full((4,), 500), torch.tensor([1, 2, 1000, 1000]))
    control = control_for(2)
    residuals = hypernet(tokens, context, control)
    assert len(residuals) == NUM_LAYERS and all(r.shape == tokens.shape for r in residuals)
    repeated = hypernet(tokens, context, control.repeat(2, 1, 1, 1))
    torch.testing.assert_close(residuals[-1], repeated[-1], atol=1e-6, rtol=1e-5)  # same values, other layout
    with pytest.raises(ValueError, match="does not divide"):
        hypernet(tokens, context, control_for(3))


# ---------------------------------------------------------------------- the chain
@pytest.mark.parametrize(("guidance", "gradient_checkpointing"), [(4.0, True), (1.0, False)])
def test_fresh_hypernet_matches_dit_pipeline(guidance, gradient_checkpointing):
    gen = make_generator(guidance_scale=guidance, gradient_checkpointing=gradient_checkpointing, num_inference_steps=4)
    assert gen.latent_shape == LATENT_SHAPE and gen.null_class == 1000
    noise = gen.initial_noise(3)
    oracle = pipeline_images(seed=3, label=LABEL, steps=4, guidance=guidance)
    assert oracle.shape == (1, *IMAGE_SHAPE) and oracle.std() > 0.01
    frozen = gen.sample(noise, LABEL)
    torch.testing.assert_close(frozen, oracle, atol=1e-5, rtol=1e-5)
    torch.manual_seed(0)
    adapted = gen(noise, LABEL, hypernet=gen.make_hypernet(), control=control_for())
    assert adapted.requires_grad
    torch.testing.assert_close(adapted.detach(), oracle, atol=1e-5, rtol=1e-5)


def test_unconditional_and_batched_labels():
    gen = make_generator()
    cond, null = gen.encode_condition(5, batch=2)
    assert cond.tolist() == [5, 5] and null.tolist() == [1000, 1000]
    labels, none = gen.encode_condition(None, batch=1)
    assert labels.tolist() == [1000] and none is None
    noise = torch.cat([gen.initial_noise(0), gen.initial_noise(1)])
    batch = gen.sample(noise, torch.tensor([3, 9]))
    torch.testing.assert_close(batch[1:], gen.sample(noise[1:], 9), atol=1e-5, rtol=1e-5)
    assert gen.sample(noise[:1], None).shape == (1, *IMAGE_SHAPE)


def test_gradients_reach_only_hypernet_and_control():
    gen = make_generator()
    before = {k: v.clone() for k, v in gen.state_dict().items()}
    torch.manual_seed(0)
    hypernet = gen.make_hypernet()
    control = control_for().requires_grad_(True)
    image = gen(gen.initial_noise(0), LABEL, hypernet=hypernet, control=control)
    image.mean().backward()
    assert all(p.grad is None for p in gen.parameters())
    # at zero init only the zero layers receive gradient (as in ControlNet)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for layer in hypernet.zero_layers
               for p in layer.parameters())

    hypernet.zero_grad()
    perturb(hypernet)
    control.grad = None
    image = gen(gen.initial_noise(0), LABEL, hypernet=hypernet, control=control)
    image.mean().backward()
    assert all(p.grad is None for p in gen.parameters())
    assert control.grad is not None and control.grad.abs().sum() > 0
    for name in ("blocks.0.attn1.to_q.weight", "control_embed.proj.weight", "control_attention.in_proj_weight",
                 "control_zero.weight", "zero_layers.1.weight"):
        grad = dict(hypernet.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name
    after = gen.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_residual_i_enters_before_frozen_block_i():
    """The thin forward equals diffusers' own forward with residuals added by pre-hooks on blocks 0 and 2."""
    gen = make_generator()
    x, t, labels = torch.randn(2, *LATENT_SHAPE), torch.tensor(500), torch.tensor([LABEL, 1000])
    residuals = [torch.randn(2, 16, 16), torch.zeros(2, 16, 16), torch.randn(2, 16, 16)]
    ours = gen.model_output(x, t, labels, None, lambda tokens, context, control: residuals)
    hooks = [gen.transformer.transformer_blocks[i].register_forward_pre_hook(
        lambda module, args, kwargs, r=residuals[i]: ((args[0] + r, *args[1:]), kwargs), with_kwargs=True)
        for i in (0, 2)]
    try:
        reference = gen.transformer(x, timestep=t.expand(2), class_labels=labels).sample
    finally:
        for hook in hooks:
            hook.remove()
    assert reference.shape[1] == 2 * LATENT_SHAPE[0]  # learned sigma: the generator keeps epsilon only
    torch.testing.assert_close(ours, reference[:, :LATENT_SHAPE[0]], atol=1e-6, rtol=1e-6)


def test_nonzero_zero_layers_change_the_output():
    gen = make_generator()
    noise = gen.initial_noise(0)
    frozen = gen.sample(noise, LABEL)
    torch.manual_seed(0)
    hypernet = gen.make_hypernet()
    perturb(hypernet)
    adapted = gen.sample(noise, LABEL, hypernet, control_for())
    assert (adapted - frozen).abs().max() > 1e-3
    without_control = gen.sample(noise, LABEL, hypernet, None)
    assert (adapted - without_control).abs().max() > 1e-5, "the control enters through the attention"


def test_two_hynea_steps_change_the_image():
    torch.manual_seed(0)
    case = HyNeACase(make_generator(num_inference_steps=2), tiny_rgb_sut(), origin_class=LABEL, seed=4,
                     search=PaperSearch(lr_min=1e-3, lr_max=1e-2))
    frozen_before = {k: v.clone() for k, v in case.generator.state_dict().items()}
    trainer = L.Trainer(max_steps=2, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False)
    trainer.fit(case)
    assert case.sut_evals == 2 and trainer.global_step == 2
    trainable = {name.split(".")[0] for name, p in case.named_parameters() if p.requires_grad}
    assert trainable == {"hypernet", "projector"}
    with torch.no_grad():
        image = case.generate()
    assert image.shape == (1, *IMAGE_SHAPE)
    assert (image - case.origin_image).abs().max() > 1e-4
    assert all(torch.equal(frozen_before[k], v) for k, v in case.generator.state_dict().items())


# ---------------------------------------------------------------------- loading
def test_local_folder_loading_shares_frozen_components(tmp_path):
    folder = save_dit_folder(tmp_path / "dit")
    a = DiTGenerator(str(folder), num_inference_steps=3, guidance_scale=4.0, hypernet_blocks=2)
    b = DiTGenerator(str(folder), num_inference_steps=3, scheduler="EulerDiscreteScheduler")
    assert isinstance(a.scheduler, DDIMScheduler) and isinstance(b.scheduler, EulerDiscreteScheduler)
    assert a is not b and a.transformer is b.transformer and a.vae is b.vae, "loaded once, fresh wrapper per case"
    assert all(not p.requires_grad for p in a.parameters()) and not a.transformer.training
    noise = a.initial_noise(0)
    torch.testing.assert_close(a.sample(noise, LABEL), make_generator().sample(noise, LABEL), atol=0, rtol=0)
    with pytest.raises(ValueError, match="unknown diffusers scheduler"):
        DiTGenerator(str(folder), scheduler="NoSuchScheduler")


def test_hub_id_is_read_from_the_hugging_face_cache(tmp_path, monkeypatch, no_network):
    fake_hub_cache(monkeypatch, tmp_path / "hub", "acme/tiny-dit-cached", save_dit_folder)
    gen = DiTGenerator("acme/tiny-dit-cached", num_inference_steps=3, guidance_scale=4.0)
    noise = gen.initial_noise(0)
    torch.testing.assert_close(gen.sample(noise, LABEL), make_generator().sample(noise, LABEL), atol=0, rtol=0)


@pytest.mark.parametrize("location", ["{tmp}/nowhere", "acme/no-such-dit"])
def test_missing_checkpoint_is_a_one_line_error_naming_it(tmp_path, monkeypatch, no_network, location):
    fake_hub_cache(monkeypatch, tmp_path / "empty_hub")
    location = location.format(tmp=tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        DiTGenerator(location)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"generator checkpoint not found: {location} ")


def test_missing_component_folder_is_named(tmp_path):
    folder = save_dit_folder(tmp_path / "dit")
    shutil.rmtree(folder / "vae")
    with pytest.raises(FileNotFoundError, match=r"generator checkpoint incomplete: .*dit has no vae/ folder"):
        DiTGenerator(str(folder))
