"""Stable Diffusion 1.5 family: equality with the diffusers pipelines, where gradients go, HyNeA steps, loading."""

from __future__ import annotations

import json

import lightning as L
import pytest
import torch
from diffusers import (
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    StableDiffusionControlNetPipeline,
    StableDiffusionPipeline,
)
from PIL import Image
from tiny_families import perturb_zero_layers
from tiny_sd import (
    IMAGE_SIZE,
    LATENT_SHAPE,
    MAX_TOKENS,
    NEGATIVE_PROMPT,
    PROMPT,
    tiny_controlnet,
    tiny_scheduler,
    tiny_text_encoder,
    tiny_tokenizer,
    tiny_unet,
    tiny_vae,
    write_control_image,
)
from torch import nn

from hynea_pl.generators.hub import hub_reachable
from hynea_pl.generators.text_conditional import StableDiffusionGenerator, TextConditionalGenerator
from hynea_pl.methods import HyNeACase, PaperSearch
from hynea_pl.suts import ClassifierSUT, Preprocess

STEPS, GUIDANCE = 3, 3.0
SCHEDULERS = {"ddim": DDIMScheduler, "dpm": DPMSolverMultistepScheduler}


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """Tiny components shared by the tests (all frozen; the generator never changes them)."""
    root = tmp_path_factory.mktemp("sd")
    tokenizer = tiny_tokenizer(root / "tokenizer_files")
    return {
        "unet": tiny_unet(), "vae": tiny_vae(), "text_encoder": tiny_text_encoder(len(tokenizer)),
        "tokenizer": tokenizer, "controlnet": tiny_controlnet(),
        "control_path": write_control_image(root / "segmentation.png"),
    }


def make_generator(parts, controlnet: bool = False, scheduler: str = "ddim", **settings) -> TextConditionalGenerator:
    settings = {"num_inference_steps": STEPS, "guidance_scale": GUIDANCE, **settings}
    task = {"controlnet": parts["controlnet"], "control_image": str(parts["control_path"])} if controlnet else {}
    return TextConditionalGenerator(
        parts["unet"], parts["vae"], parts["text_encoder"], parts["tokenizer"],
        scheduler=SCHEDULERS[scheduler].from_config(tiny_scheduler().config),
        prompt=PROMPT, negative_prompt=NEGATIVE_PROMPT, **task, **settings,
    )


def pipeline_kwargs(scheduler: str) -> dict:
    return {"scheduler": SCHEDULERS[scheduler].from_config(tiny_scheduler().config), "safety_checker": None,
            "feature_extractor": None, "requires_safety_checker": False}


def run_pipeline(pipe, noise, guidance: float = GUIDANCE, **extra) -> tuple[torch.Tensor, torch.Tensor]:
    """The pipeline's latents and ``output_type="pt"`` images for the same noise, prompts and settings."""
    common = {"prompt": PROMPT, "negative_prompt": NEGATIVE_PROMPT, "num_inference_steps": STEPS,
              "guidance_scale": guidance, "height": IMAGE_SIZE, "width": IMAGE_SIZE, **extra}
    latents = pipe(latents=noise.clone(), output_type="latent", **common).images
    images = pipe(latents=noise.clone(), output_type="pt", **common).images
    return latents, images


@torch.no_grad()
def ours(gen: TextConditionalGenerator, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Our chain with a fresh HyperNet and a zero control."""
    hypernet, control = gen.make_hypernet(), torch.zeros(1, *LATENT_SHAPE)
    latents = gen.denoise(noise, None, hypernet=hypernet, control=control)
    return latents, gen(noise, None, hypernet=hypernet, control=control)


@pytest.mark.parametrize("scheduler", ["ddim", "dpm"])
def test_fresh_hypernet_matches_stable_diffusion_pipeline(parts, scheduler):
    gen = make_generator(parts, scheduler=scheduler)
    assert gen.latent_shape == LATENT_SHAPE and gen.image_size == (IMAGE_SIZE, IMAGE_SIZE)
    assert gen.prompt_embeds.shape == gen.negative_prompt_embeds.shape == (1, MAX_TOKENS, 32)
    noise = gen.initial_noise(0)
    latents, images = ours(gen, noise)
    pipe = StableDiffusionPipeline(vae=parts["vae"], text_encoder=parts["text_encoder"],
                                   tokenizer=parts["tokenizer"], unet=parts["unet"], **pipeline_kwargs(scheduler))
    ref_latents, ref_images = run_pipeline(pipe, noise)
    torch.testing.assert_close(latents, ref_latents, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(images, ref_images, atol=1e-5, rtol=1e-5)
    assert images.shape == (1, 3, IMAGE_SIZE, IMAGE_SIZE) and images.std() > 0.01
    # the prompt is used, and the case condition is ignored
    other = make_generator(parts, scheduler=scheduler)
    other.set_prompt("a dog", NEGATIVE_PROMPT)
    assert not torch.allclose(other.sample(noise), images, atol=1e-4)
    torch.testing.assert_close(gen.sample(noise, 7), gen.sample(noise, None), atol=0, rtol=0)


@pytest.mark.parametrize("guidance", [GUIDANCE, 1.0])
def test_fresh_hypernet_matches_controlnet_pipeline(parts, guidance):
    gen = make_generator(parts, controlnet=True, guidance_scale=guidance)
    assert gen.control_image.shape == (1, 3, IMAGE_SIZE, IMAGE_SIZE)
    noise = gen.initial_noise(1)
    latents, images = ours(gen, noise)
    pipe = StableDiffusionControlNetPipeline(
        vae=parts["vae"], text_encoder=parts["text_encoder"], tokenizer=parts["tokenizer"], unet=parts["unet"],
        controlnet=parts["controlnet"], **pipeline_kwargs("ddim"),
    )
    control = Image.open(parts["control_path"]).convert("RGB")
    ref_latents, ref_images = run_pipeline(pipe, noise, guidance, image=control)
    torch.testing.assert_close(latents, ref_latents, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(images, ref_images, atol=1e-5, rtol=1e-5)
    # the task ControlNet changes the image (its residuals reach the UNet)
    assert not torch.allclose(make_generator(parts, guidance_scale=guidance).sample(noise), images, atol=1e-4)


@pytest.mark.parametrize("settings", [{"gradient_checkpointing": True},
                                      {"gradient_checkpointing": False, "autocast_dtype": "bfloat16", "grad_steps": 1}],
                         ids=["checkpointed", "bf16-last-step"])
def test_gradients_reach_only_the_hypernet_and_the_control(parts, settings):
    gen = make_generator(parts, controlnet=True, **settings)
    hypernet = gen.make_hypernet()
    perturb_zero_layers(hypernet, scale=1e-2, seed=0)  # so gradient reaches every trained part
    control = torch.randn(1, *LATENT_SHAPE, requires_grad=True)
    gen(gen.initial_noise(2), None, hypernet=hypernet, control=control).square().mean().backward()
    frozen = {"unet": parts["unet"], "vae": parts["vae"], "text_encoder": parts["text_encoder"],
              "controlnet": parts["controlnet"]}
    for name, module in frozen.items():
        assert all(p.grad is None and not p.requires_grad for p in module.parameters()), name
    assert control.grad is not None and control.grad.abs().sum() > 0
    grads = {name: p.grad for name, p in hypernet.named_parameters()}
    assert all(p.requires_grad for p in hypernet.parameters())
    for name in ("controlnet.conv_in.weight", "controlnet.controlnet_mid_block.weight",
                 "controlnet.controlnet_cond_embedding.conv_in.weight"):
        assert grads[name] is not None and grads[name].abs().sum() > 0, name


def tiny_rgb_sut() -> ClassifierSUT:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 5))
    return ClassifierSUT(model, preprocess=Preprocess(size=IMAGE_SIZE, channels=3, mean=[0.5] * 3, std=[0.5] * 3))


def test_two_hynea_steps_change_the_image(parts):
    gen = make_generator(parts, controlnet=True, num_inference_steps=2)
    frozen_before = {k: v.clone() for k, v in gen.state_dict().items()}
    torch.manual_seed(0)
    case = HyNeACase(gen, tiny_rgb_sut(), origin_class=None, seed=3, search=PaperSearch(lr_min=1e-3, lr_max=1e-2))
    trainer = L.Trainer(max_steps=2, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False)
    trainer.fit(case)
    assert trainer.global_step == 2 and case.sut_evals == 2
    with torch.no_grad():
        adapted = gen.sample(case.noise, None, hypernet=case.hypernet, control=case.projector(case.control))
    assert (adapted - case.origin_image).abs().max() > 1e-4, "two HyperNet updates change the image"
    frozen_after = gen.state_dict()
    assert all(torch.equal(frozen_before[k], frozen_after[k]) for k in frozen_before)


# ---------------------------------------------------------------------- loading
@pytest.fixture(scope="module")
def saved(parts, tmp_path_factory):
    """The shared components saved as an SD folder and a ControlNet folder."""
    root = tmp_path_factory.mktemp("saved")
    pipe = StableDiffusionPipeline(vae=parts["vae"], text_encoder=parts["text_encoder"],
                                   tokenizer=parts["tokenizer"], unet=parts["unet"], **pipeline_kwargs("ddim"))
    pipe.save_pretrained(root / "sd")
    parts["controlnet"].save_pretrained(root / "controlnet")
    return root


def test_loads_from_saved_folders(parts, saved):
    settings = {"prompt": PROMPT, "negative_prompt": NEGATIVE_PROMPT, "num_inference_steps": STEPS,
                "guidance_scale": GUIDANCE}
    loaded = StableDiffusionGenerator(str(saved / "sd"), controlnet=str(saved / "controlnet"),
                                      control_image=str(parts["control_path"]), **settings)
    assert isinstance(loaded.scheduler, DDIMScheduler)
    assert all(not p.requires_grad for p in loaded.parameters())
    noise = loaded.initial_noise(0)
    torch.testing.assert_close(loaded.sample(noise), make_generator(parts, controlnet=True).sample(noise),
                               atol=1e-6, rtol=1e-6)
    # a second wrapper shares the frozen weights (loaded once per process) but has its own scheduler
    dpm = StableDiffusionGenerator(str(saved / "sd"), scheduler="dpm", **settings)
    assert dpm.unet is loaded.unet and dpm.controlnet is None
    assert isinstance(dpm.scheduler, DPMSolverMultistepScheduler)
    saved_config = json.loads((saved / "sd" / "scheduler" / "scheduler_config.json").read_text())
    reference = make_generator(parts)
    reference.scheduler = DPMSolverMultistepScheduler.from_config(saved_config)  # the saved schedule, as DPM
    torch.testing.assert_close(dpm.sample(noise), reference.sample(noise), atol=1e-6, rtol=1e-6)


def missing_cases(tmp_path, saved, parts):
    incomplete = tmp_path / "incomplete"
    (incomplete / "unet").mkdir(parents=True)
    control = str(parts["control_path"])
    return {
        "local folder": ({"pretrained": str(tmp_path / "no-such-sd")}, str(tmp_path / "no-such-sd")),
        "hub id": ({"pretrained": "hynea-tests/no-such-sd-checkpoint"}, "hynea-tests/no-such-sd-checkpoint"),
        "incomplete": ({"pretrained": str(incomplete)}, str(incomplete)),
        "controlnet": ({"pretrained": str(saved / "sd"), "controlnet": str(tmp_path / "no-cn"),
                        "control_image": control}, str(tmp_path / "no-cn")),
        "control image": ({"pretrained": str(saved / "sd"), "controlnet": str(saved / "controlnet"),
                           "control_image": str(tmp_path / "seg.png")}, str(tmp_path / "seg.png")),
    }


@pytest.mark.parametrize("which", ["local folder", "hub id", "incomplete", "controlnet", "control image"])
def test_missing_checkpoint_is_a_one_line_error_naming_it(which, tmp_path, saved, parts, no_network):
    hub_reachable.cache_clear()
    kwargs, name = missing_cases(tmp_path, saved, parts)[which]
    with pytest.raises(FileNotFoundError) as error:
        StableDiffusionGenerator(**kwargs)
    message = str(error.value)
    assert "\n" not in message and name in message
    hub_reachable.cache_clear()


def test_controlnet_and_control_image_go_together(saved):
    with pytest.raises(ValueError, match="control_image"):
        StableDiffusionGenerator(str(saved / "sd"), controlnet=str(saved / "controlnet"))
