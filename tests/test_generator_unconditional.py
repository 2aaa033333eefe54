"""The unconditional LDM family (UNet2DModel + VQModel + DDIM) and its UNet2DHyperNet, on tiny random components."""

from __future__ import annotations

import json
import shutil

import lightning as L
import pytest
import torch
from diffusers import LDMPipeline
from hub_cache import fake_hub_cache
from tiny_families import perturb_zero_layers as perturb
from tiny_unconditional import (
    IMAGE_SHAPE,
    LATENT_SHAPE,
    SCALING_FACTOR,
    TinyAttributeNet,
    save_tiny_checkpoint,
    tiny_ddim,
    tiny_unet2d,
    tiny_vqvae,
)

from hynea_pl.generators.unconditional import UNet2DGenerator, UnconditionalLDM
from hynea_pl.hypernets.unet2d_hypernet import UNet2DHyperNet
from hynea_pl.methods import HyNeACase, PaperSearch
from hynea_pl.suts import BinaryAttributeSUT, Preprocess

STEPS = 3


def tiny_generator(**settings) -> UNet2DGenerator:
    return UNet2DGenerator(tiny_unet2d(), tiny_vqvae(), tiny_ddim(),
                                        **{"num_inference_steps": STEPS, **settings})


def pipeline_images(gen: UNet2DGenerator, seed: int) -> torch.Tensor:
    """diffusers' LDMPipeline on the same components: (1, 3, H, W) in [0, 1]."""
    pipe = LDMPipeline(vqvae=gen.vae, unet=gen.unet, scheduler=tiny_ddim())
    pipe.set_progress_bar_config(disable=True)
    out = pipe(batch_size=1, generator=torch.Generator("cpu").manual_seed(seed), eta=0.0,
               num_inference_steps=STEPS, output_type="np").images
    return torch.from_numpy(out).permute(0, 3, 1, 2)


# ---------------------------------------------------------------------- the HyperNet
def test_hypernet_is_a_trainable_copy_with_zero_outputs_of_the_skip_shapes():
    unet = tiny_unet2d().requires_grad_(False)
    hypernet = UNet2DHyperNet(unet)
    trainable = [n for n, p in hypernet.named_parameters() if p.requires_grad]
    assert trainable and len(trainable) == len(list(hypernet.parameters()))
    assert not any(p.requires_grad for p in unet.parameters())
    for layer in [*hypernet.zero_layers, hypernet.control_in]:
        assert all(torch.count_nonzero(p) == 0 for p in layer.parameters())
    torch.testing.assert_close(hypernet.conv_in.weight, unet.conv_in.weight, atol=0, rtol=0)
    assert hypernet.conv_in.weight.data_ptr() != unet.conv_in.weight.data_ptr(), "copied, not shared"

    # residual shapes = the frozen UNet's skips (collected by its own forward) and mid-block output
    seen: dict[str, list] = {"skips": [], "mid": []}
    handles = [b.register_forward_pre_hook(lambda _m, a: seen["skips"].insert(0, a[1])) for b in unet.up_blocks]
    handles.append(unet.mid_block.register_forward_hook(lambda _m, _a, out: seen["mid"].append(out)))
    x, t = torch.randn(2, *LATENT_SHAPE), torch.tensor(500)
    unet(x, t)
    for h in handles:
        h.remove()
    skips = [s for chunk in seen["skips"] for s in chunk]
    residuals, mid = hypernet(x, t, torch.rand(1, *LATENT_SHAPE))  # control batch 1 repeated to 2
    assert [r.shape for r in residuals] == [s.shape for s in skips]
    assert mid.shape == seen["mid"][0].shape
    assert all(torch.count_nonzero(r) == 0 for r in residuals) and torch.count_nonzero(mid) == 0
    with pytest.raises(ValueError, match="does not divide"):
        hypernet(torch.randn(3, *LATENT_SHAPE), t, torch.rand(2, *LATENT_SHAPE))


def test_every_residual_reaches_its_skip_and_the_mid_block():
    gen = tiny_generator()
    hypernet = gen.make_hypernet()
    perturb(hypernet)
    x, t = torch.randn(1, *LATENT_SHAPE), torch.tensor(600)
    skips, mid = hypernet(x, t, torch.rand(1, *LATENT_SHAPE))
    assert all(torch.count_nonzero(r) > 0 for r in skips) and torch.count_nonzero(mid) > 0

    def received() -> tuple[list[torch.Tensor], torch.Tensor]:
        """The skips each up block receives (in skip order) and the first up block's input (mid output)."""
        got: list = []
        # with_kwargs pre-hooks registered after ours (``prepend=False``) see the residuals already added
        handles = [b.register_forward_pre_hook(lambda _m, a, k: got.append(a), with_kwargs=True)
                   for b in gen.unet.up_blocks]
        try:
            gen.unet(x, t)
        finally:
            for h in handles:
                h.remove()
        return [s for args in reversed(got) for s in args[1]], got[0][0]

    plain_skips, plain_mid = received()
    with gen.residuals_added(skips, mid):
        added_skips, added_mid = received()
    assert len(added_skips) == len(skips) == 4
    for i, (plain, added, residual) in enumerate(zip(plain_skips, added_skips, skips, strict=True)):
        torch.testing.assert_close(added - plain, residual, msg=f"skip {i}")
    torch.testing.assert_close(added_mid - plain_mid, mid)
    assert all(not b._forward_pre_hooks for b in gen.unet.up_blocks) and not gen.unet.mid_block._forward_hooks
    # and the chain's image changes
    noise = gen.initial_noise(0)
    assert (gen.sample(noise, hypernet=hypernet) - gen.sample(noise)).abs().max() > 1e-3


# ---------------------------------------------------------------------- the generator
def test_zero_init_hypernet_matches_diffusers_ldm_pipeline():
    gen = tiny_generator()
    assert gen.scaling_factor == SCALING_FACTOR and gen.latent_shape == LATENT_SHAPE
    reference = pipeline_images(gen, seed=5)
    assert reference.shape == (1, *IMAGE_SHAPE) and reference.std() > 0.01
    noise = gen.initial_noise(5)
    torch.testing.assert_close(gen.sample(noise), reference)
    hypernet = gen.make_hypernet()
    control = torch.rand(1, *LATENT_SHAPE)
    torch.testing.assert_close(gen.sample(noise, condition=1, hypernet=hypernet, control=control), reference)
    torch.testing.assert_close(gen(noise, hypernet=hypernet, control=control).detach(), reference)
    # encode: the VQ model's pre-quantisation latents times the scaling factor (the inverse convention)
    expected = gen.vae.encode(reference * 2 - 1).latents * SCALING_FACTOR
    torch.testing.assert_close(gen.encode(reference), expected)
    assert expected.shape == (1, *LATENT_SHAPE)


def test_gradients_reach_only_the_hypernet_and_control_and_match_without_checkpointing():
    grads = {}
    for checkpoint in (True, False):
        gen = tiny_generator(gradient_checkpointing=checkpoint)
        torch.manual_seed(0)
        hypernet = gen.make_hypernet()
        perturb(hypernet)
        control = torch.rand(1, *LATENT_SHAPE, requires_grad=True)
        image = gen(gen.initial_noise(0), hypernet=hypernet, control=control)
        ((image - 0.5) ** 2).mean().backward()
        assert all(p.grad is None and not p.requires_grad for p in gen.parameters()), "frozen unet / vqvae"
        assert all(p.grad is not None for p in hypernet.parameters())
        assert all(p.grad.abs().sum() > 0 for layer in hypernet.zero_layers for p in layer.parameters())
        assert control.grad is not None and control.grad.abs().sum() > 0
        assert all(not b._forward_pre_hooks for b in gen.unet.up_blocks), "no hook left behind"
        grads[checkpoint] = [control.grad, *(p.grad for p in hypernet.parameters())]
    for with_ckpt, without in zip(grads[True], grads[False], strict=True):
        torch.testing.assert_close(with_ckpt, without, rtol=1e-4, atol=1e-6)


def test_two_hynea_steps_with_a_binary_sut_change_the_image(tmp_path):
    gen = tiny_generator()
    sut = BinaryAttributeSUT(TinyAttributeNet(num_logits=4), attribute=2,
                             preprocess=Preprocess(mean=[0.5] * 3, std=[0.5] * 3))
    case = HyNeACase(gen, sut, origin_class=None, seed=3, search=PaperSearch(lr_min=1e-2, lr_max=1e-1))
    trainer = L.Trainer(max_steps=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    before = [p.detach().clone() for p in case.hypernet.parameters()]
    trainer.fit(case)
    assert case.sut_evals == 2 and trainer.global_step == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, case.hypernet.parameters(), strict=True))
    with torch.no_grad():
        adapted = case.generate()
    assert adapted.shape == case.origin_image.shape == (1, *IMAGE_SHAPE)
    assert (adapted - case.origin_image).abs().max() > 1e-3, "the adapted HyperNet changes the image"


# ---------------------------------------------------------------------- loading
def test_local_folder_loading_shares_frozen_components(tmp_path):
    root = save_tiny_checkpoint(tmp_path / "ldm")
    a = UnconditionalLDM(str(root), num_inference_steps=STEPS)
    b = UnconditionalLDM(str(root), num_inference_steps=STEPS)
    assert a is not b and a.unet is b.unet and a.vae is b.vae and a.scheduler is not b.scheduler
    assert a.scaling_factor == SCALING_FACTOR and a.num_inference_steps == STEPS
    noise = a.initial_noise(2)
    torch.testing.assert_close(a.sample(noise), tiny_generator().sample(noise))

    # a VQ config without scaling_factor (as CompVis/ldm-celebahq-256's): unscaled latents, not diffusers' 0.18215
    plain = tmp_path / "plain"
    shutil.copytree(root, plain)
    config_file = plain / "vqvae" / "config.json"
    config = json.loads(config_file.read_text())
    del config["scaling_factor"]
    config_file.write_text(json.dumps(config))
    assert UnconditionalLDM(str(plain), num_inference_steps=STEPS).scaling_factor == 1.0
    assert UnconditionalLDM(str(plain), scaling_factor=0.5).scaling_factor == 0.5


def test_hub_id_is_read_from_the_local_cache_only(tmp_path, monkeypatch, no_network):
    fake_hub_cache(monkeypatch, tmp_path / "hub", "tiny-org/tiny-ldm", save_tiny_checkpoint)
    monkeypatch.chdir(tmp_path)  # "tiny-org/tiny-ldm" is no local folder here
    gen = UnconditionalLDM("tiny-org/tiny-ldm", num_inference_steps=STEPS)
    assert gen.latent_shape == LATENT_SHAPE


@pytest.mark.parametrize("name", ["missing_folder", "CompVis/ldm-celebahq-256"])
def test_missing_checkpoint_is_a_one_line_error_naming_it(tmp_path, monkeypatch, no_network, name):
    fake_hub_cache(monkeypatch, tmp_path / "empty_cache")
    location = str(tmp_path / name) if name == "missing_folder" else name
    with pytest.raises(FileNotFoundError) as error:
        UnconditionalLDM(location)
    message = str(error.value)
    assert len(message.splitlines()) == 1 and location in message and "not found" in message


def test_incomplete_checkpoint_names_the_missing_component(tmp_path):
    root = save_tiny_checkpoint(tmp_path / "ldm")
    shutil.rmtree(root / "vqvae")
    with pytest.raises(FileNotFoundError, match="vqvae/") as error:
        UnconditionalLDM(str(root))
    assert len(str(error.value).splitlines()) == 1 and str(root) in str(error.value)
