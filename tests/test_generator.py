"""LatentDiffusionGenerator: frozen chain, noise, conditions, equality with a plain diffusers loop, loading."""

import pytest
import torch
from diffusers import DDIMScheduler, DPMSolverMultistepScheduler, EulerDiscreteScheduler
from tiny_components import (
    IMAGE_SHAPE,
    LATENT_SHAPE,
    reference_sample,
    save_tiny_ldm,
    tiny_class_embedding,
    tiny_generator,
    tiny_scheduler,
    tiny_unet,
    tiny_vae,
)

from hynea_pl.generators import ClassEmbedding, LatentDiffusionGenerator


def test_frozen_and_stays_in_eval_mode():
    gen = tiny_generator()
    assert all(not p.requires_grad for p in gen.parameters())
    gen.train()
    assert not gen.training
    assert not any(m.training for m in gen.modules())


def test_initial_noise_is_seeded_float32_on_cpu_generator():
    gen = tiny_generator()
    assert gen.latent_shape == LATENT_SHAPE
    a, b, c = gen.initial_noise(7), gen.initial_noise(7), gen.initial_noise(8)
    assert a.shape == (1, *LATENT_SHAPE) and a.dtype == torch.float32
    assert torch.equal(a, b) and not torch.equal(a, c)
    expected = torch.randn((1, *LATENT_SHAPE), generator=torch.Generator("cpu").manual_seed(7))
    assert torch.equal(a, expected)


def test_encode_condition():
    gen = tiny_generator()
    cond, uncond = gen.encode_condition(3, batch=2)
    assert cond.shape == uncond.shape == (2, 1, 32)
    emb = gen.condition_encoder
    assert torch.equal(cond, emb(torch.tensor([3, 3])))
    assert torch.equal(uncond, emb(torch.tensor([10, 10])))
    cond, _ = gen.encode_condition(torch.tensor([1, 2]), batch=2)
    assert torch.equal(cond, emb(torch.tensor([1, 2])))
    cond, _ = gen.encode_condition(torch.tensor([4]), batch=3)
    assert torch.equal(cond, emb(torch.tensor([4, 4, 4])))
    cond, uncond = gen.encode_condition(None, batch=1)  # unconditional: the null class, no guidance
    assert uncond is None and torch.equal(cond, emb(torch.tensor([10])))
    with pytest.raises(ValueError, match="does not match"):
        gen.encode_condition(torch.tensor([1, 2]), batch=3)


def test_encode_condition_without_encoder_takes_hidden_states():
    gen = LatentDiffusionGenerator(tiny_unet(), tiny_vae(), tiny_scheduler(), None, num_inference_steps=2)
    cond, uncond = torch.randn(1, 1, 32), torch.zeros(1, 1, 32)
    c, u = gen.encode_condition((cond, uncond), batch=2)
    assert c.shape == (2, 1, 32) and torch.equal(u[1], uncond[0])
    with pytest.raises(ValueError, match="guidance"):
        gen.encode_condition(cond, batch=1)
    assert gen.sample(gen.initial_noise(0), (cond, uncond)).shape == (1, *IMAGE_SHAPE)


@pytest.mark.parametrize(
    "scheduler_cls", [DDIMScheduler, DPMSolverMultistepScheduler, EulerDiscreteScheduler], ids=lambda c: c.__name__
)
@pytest.mark.parametrize(("label", "guidance"), [(3, 3.0), (5, 1.0), (None, 3.0)])
def test_sample_matches_plain_diffusers_loop(scheduler_cls, label, guidance):
    scheduler = scheduler_cls.from_config(tiny_scheduler().config)
    gen = tiny_generator(guidance_scale=guidance, num_inference_steps=4)
    gen.scheduler = scheduler
    noise = gen.initial_noise(1)
    images = gen.sample(noise, label)
    assert images.shape == (1, *IMAGE_SHAPE)
    assert 0 <= images.min() and images.max() <= 1 and images.std() > 0.01
    oracle = reference_sample(
        tiny_unet(), tiny_vae(), scheduler_cls.from_config(scheduler.config), tiny_class_embedding(),
        noise, label, 4, guidance,
    )
    torch.testing.assert_close(images, oracle, atol=1e-5, rtol=1e-5)
    # stateful schedulers are reset by every call: the chain is a function of the noise
    torch.testing.assert_close(gen.sample(noise, label), images, atol=0, rtol=0)


def test_batch_of_noises_and_labels():
    gen = tiny_generator()
    noise = torch.cat([gen.initial_noise(0), gen.initial_noise(1)])
    batch = gen.sample(noise, torch.tensor([2, 7]))
    single = gen.sample(noise[1:], 7)
    assert batch.shape == (2, *IMAGE_SHAPE)
    torch.testing.assert_close(batch[1:], single, atol=1e-5, rtol=1e-5)


def test_stochastic_ddim_is_deterministic_per_call():
    gen = tiny_generator(eta=1.0)
    noise = gen.initial_noise(0)
    a, b = gen.sample(noise, 1), gen.sample(noise, 1)
    assert torch.equal(a, b)
    assert not torch.allclose(a, tiny_generator(eta=0.0).sample(noise, 1))


def test_from_pretrained_round_trip(tmp_path):
    save_tiny_ldm(tmp_path)
    loaded = LatentDiffusionGenerator.from_pretrained(tmp_path, num_inference_steps=3, guidance_scale=2.0)
    assert isinstance(loaded.scheduler, DDIMScheduler)
    assert isinstance(loaded.condition_encoder, ClassEmbedding)
    assert loaded.num_inference_steps == 3 and loaded.guidance_scale == 2.0
    assert all(not p.requires_grad for p in loaded.parameters())
    reference = tiny_generator(num_inference_steps=3, guidance_scale=2.0)
    noise = reference.initial_noise(0)
    torch.testing.assert_close(loaded.sample(noise, 4), reference.sample(noise, 4), atol=0, rtol=0)


@pytest.mark.parametrize("missing", ["unet", "vae", "scheduler", "class_embedding"])
def test_from_pretrained_missing_folder(tmp_path, missing):
    for sub in ("unet", "vae", "scheduler", "class_embedding"):
        if sub != missing:
            (tmp_path / sub).mkdir()
    with pytest.raises(FileNotFoundError, match=f"missing folder .*{missing}") as err:
        LatentDiffusionGenerator.from_pretrained(tmp_path)
    assert "\n" not in str(err.value)
