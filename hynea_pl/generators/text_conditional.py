"""Stable Diffusion 1.5 (text-conditional UNet) as a frozen generator, with an optional frozen task ControlNet.

:class:`TextConditionalGenerator` wraps ready-made diffusers / transformers components (``UNet2DConditionModel``,
``AutoencoderKL``, ``CLIPTextModel`` + ``CLIPTokenizer``, a scheduler, optionally a ``ControlNetModel`` and its
control image). :class:`StableDiffusionGenerator` is its YAML-friendly form: it loads the components from a local
folder in the diffusers Stable Diffusion layout or from a Hugging Face hub id (once per process) and builds a
fresh wrapper per test case.

The prompt is fixed by the generator's configuration: its embeddings (and the negative prompt's) are computed
once with the frozen text encoder, and the case's condition (``origin_class``) is ignored. Every model call of the
chain mirrors ``StableDiffusionControlNetPipeline``: the task ControlNet's residuals (from the control image, with
the same classifier-free-guidance batching) plus the HyperNet's residuals go into the frozen UNet.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import torch
from diffusers import (
    AutoencoderKL,
    ControlNetModel,
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    UNet2DConditionModel,
)
from diffusers.image_processor import VaeImageProcessor
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, PositiveInt
from torch import Tensor, nn

from hynea_pl.generators.hub import checkpoint_key, load_pretrained, require_subfolders
from hynea_pl.generators.ldm import HyperNet, LatentDiffusionGenerator

SCHEDULERS = {"ddim": DDIMScheduler, "dpm": DPMSolverMultistepScheduler}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SD_SUBFOLDERS = ("unet", "vae", "text_encoder", "tokenizer", "scheduler")


class TextConditionalGenerator(LatentDiffusionGenerator):
    """Frozen text-conditional LDM (Stable Diffusion layout): initial noise (+ HyperNet, control) -> image in [0, 1].

    Shapes: noise / latents ``(B, 4, h, w)`` (``h, w`` = the UNet's ``sample_size``), images ``(B, 3, H, W)``
    with ``H = h * vae_scale_factor``; prompt embeddings ``(1, S, D)`` (``S`` = the tokenizer's
    ``model_max_length``, ``D`` = the UNet's ``cross_attention_dim``).

    Args:
        unet, vae, text_encoder, tokenizer: the frozen Stable Diffusion components.
        scheduler: any diffusers scheduler; default ``DDIMScheduler()``.
        prompt, negative_prompt: the fixed text condition (guidance contrasts the two, as the diffusers pipeline
            does; an empty negative prompt is the pipeline's default). The case condition is ignored.
        controlnet: an optional frozen task ``ControlNetModel`` (e.g. segmentation-conditioned).
        control_image: its condition: a path, a PIL image or a tensor ``(1, 3, H', W')`` in [0, 1]; resized to
            the image size as ``StableDiffusionControlNetPipeline`` does.
        controlnet_scale: the task ControlNet's ``conditioning_scale``.
        num_inference_steps, guidance_scale, eta: see :class:`~hynea_pl.generators.base.DiffusionGenerator`.
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions` (``channels_last``
            converts the task ControlNet too).
    """

    def __init__(
        self,
        unet: UNet2DConditionModel,
        vae: AutoencoderKL,
        text_encoder: nn.Module,
        tokenizer: Any,
        scheduler: Any | None = None,
        prompt: str = "",
        negative_prompt: str = "",
        controlnet: ControlNetModel | None = None,
        control_image: Any = None,
        controlnet_scale: float = 1.0,
        num_inference_steps: PositiveInt = 25,
        guidance_scale: NonNegativeFloat = 7.5,
        eta: ClosedUnitInterval = 0.0,
        **memory: Any,
    ) -> None:
        if (controlnet is None) != (control_image is None):
            raise ValueError("a task ControlNet needs a control_image, and a control_image needs a controlnet")
        if controlnet is not None and controlnet.config.global_pool_conditions:
            raise ValueError("guess-mode ControlNets (global_pool_conditions: true) are not supported")
        super().__init__(unet, vae, scheduler=scheduler, condition_encoder=None,
                         num_inference_steps=num_inference_steps, guidance_scale=guidance_scale, eta=eta,
                         **memory)
        self.text_encoder = text_encoder
        self.tokenizer = tokenizer
        self.controlnet = controlnet
        self.controlnet_scale = controlnet_scale
        if controlnet is not None:
            if self.channels_last:
                controlnet.to(memory_format=torch.channels_last)
            self.register_buffer("control_image", self.prepare_control_image(control_image), persistent=False)
        else:
            self.control_image = None
        self.set_prompt(prompt, negative_prompt)
        self.requires_grad_(False)
        self.train(False)

    # ------------------------------------------------------------------ conditions
    @property
    def vae_scale_factor(self) -> int:
        """Pixels per latent cell (8 for Stable Diffusion), as the diffusers pipelines compute it."""
        return 2 ** (len(self.vae.config.block_out_channels) - 1)

    @property
    def image_size(self) -> tuple[int, int]:
        """``(H, W)`` of the generated images."""
        _, h, w = self.latent_shape
        return h * self.vae_scale_factor, w * self.vae_scale_factor

    def prepare_control_image(self, image: Any) -> Tensor:
        """A path / PIL image / tensor -> ``(1, 3, H, W)`` float32 in [0, 1] at the image size (the pipeline's
        control-image preprocessing: RGB, resized, not normalised)."""
        if isinstance(image, (str, Path)):
            image = load_control_image(image)
        processor = VaeImageProcessor(vae_scale_factor=self.vae_scale_factor, do_convert_rgb=True,
                                      do_normalize=False)
        height, width = self.image_size
        tensor = processor.preprocess(image, height=height, width=width).to(torch.float32)
        if tensor.shape[0] != 1:
            raise ValueError(f"one control image expected, got a batch of {tensor.shape[0]}")
        return tensor

    @torch.no_grad()
    def encode_prompt(self, text: str) -> Tensor:
        """A prompt -> the frozen text encoder's last hidden states ``(1, S, D)`` (padded to the tokenizer's
        ``model_max_length`` and truncated, as ``StableDiffusionPipeline.encode_prompt`` does)."""
        tokens = self.tokenizer(text, padding="max_length", max_length=self.tokenizer.model_max_length,
                                truncation=True, return_tensors="pt")
        device = next(self.text_encoder.parameters()).device
        mask = None
        if getattr(self.text_encoder.config, "use_attention_mask", False):
            mask = tokens.attention_mask.to(device)
        return self.text_encoder(tokens.input_ids.to(device), attention_mask=mask)[0]

    def set_prompt(self, prompt: str, negative_prompt: str = "") -> None:
        """Encode and keep the prompt and negative prompt (buffers ``prompt_embeds`` / ``negative_prompt_embeds``)."""
        self.prompt, self.negative_prompt = prompt, negative_prompt
        device = self.device
        self.register_buffer("prompt_embeds", self.encode_prompt(prompt).to(device), persistent=False)
        self.register_buffer("negative_prompt_embeds", self.encode_prompt(negative_prompt).to(device),
                             persistent=False)

    def encode_condition(self, condition: Any, batch: int) -> tuple[Tensor, Tensor]:
        """``(prompt_embeds, negative_prompt_embeds)``, each ``(batch, S, D)``; ``condition`` is ignored (the
        prompt is part of the generator's configuration)."""
        cond = self.expand_batch(self.prompt_embeds.to(self.device, self.dtype), batch)
        uncond = self.expand_batch(self.negative_prompt_embeds.to(self.device, self.dtype), batch)
        return cond, uncond

    # ------------------------------------------------------------------ one model call
    def task_residuals(self, model_input: Tensor, t: Tensor, states: Tensor
                       ) -> tuple[list[Tensor] | None, Tensor | None]:
        """The frozen task ControlNet's residuals for ``model_input (N, C, h, w)`` (``N = 2B`` under guidance:
        the control image is repeated over both halves, as the pipeline does); ``(None, None)`` without one."""
        if self.controlnet is None:
            return None, None
        image = self.control_image.to(model_input.device, self.controlnet.dtype)
        image = image.expand(model_input.shape[0], -1, -1, -1)
        down, mid = self.controlnet(model_input, t, encoder_hidden_states=states, controlnet_cond=image,
                                    conditioning_scale=self.controlnet_scale, guess_mode=False, return_dict=False)
        return list(down), mid

    def model_output(self, model_input: Tensor, t: Tensor, states: Tensor, control: Tensor | None,
                     hypernet: HyperNet | None) -> Tensor:
        """Frozen UNet on ``model_input (N, C, h, w)`` with task-ControlNet + HyperNet residuals on its skips and
        mid block; returns ``(N, C, h, w)``."""
        down, mid = self.task_residuals(model_input, t, states)
        if hypernet is not None:
            hyper_down, hyper_mid = hypernet(model_input, t, states, control)
            if down is None:
                down, mid = list(hyper_down), hyper_mid
            else:
                down = [a + b for a, b in zip(down, hyper_down, strict=True)]
                mid = mid + hyper_mid
        return self.unet(model_input, t, encoder_hidden_states=states, down_block_additional_residuals=down,
                         mid_block_additional_residual=mid).sample


# ---------------------------------------------------------------------- loading
@dataclass(frozen=True)
class StableDiffusionComponents:
    """The frozen components of a Stable Diffusion checkpoint, shared by every generator wrapper."""

    unet: UNet2DConditionModel
    vae: AutoencoderKL
    text_encoder: nn.Module
    tokenizer: Any
    scheduler_config: dict


def _frozen(module: nn.Module) -> nn.Module:
    module.requires_grad_(False)
    return module.eval()


class _SchedulerConfig:
    """Adapter so :func:`~hynea_pl.generators.hub.load_pretrained` can read a scheduler config (``from_pretrained``
    -> the config dict)."""

    @staticmethod
    def from_pretrained(location: str, **kwargs: Any) -> dict:
        return DDIMScheduler.load_config(location, **kwargs)


@lru_cache(maxsize=2)
def load_stable_diffusion(pretrained: str, dtype: str = "float32", variant: str | None = None
                          ) -> StableDiffusionComponents:
    """Load ``unet/ vae/ text_encoder/ tokenizer/ scheduler/`` once per process (see
    :func:`~hynea_pl.generators.hub.load_pretrained`)."""
    from transformers import CLIPTextModel, CLIPTokenizer

    require_subfolders(pretrained, SD_SUBFOLDERS, "generator",
                       f"diffusers Stable Diffusion layout: {'/ '.join(SD_SUBFOLDERS)}/")
    torch_dtype = DTYPES[dtype]
    weights = {} if variant is None else {"variant": variant}
    unet = load_pretrained(UNet2DConditionModel, pretrained, "generator", "unet", torch_dtype=torch_dtype, **weights)
    vae = load_pretrained(AutoencoderKL, pretrained, "generator", "vae", torch_dtype=torch_dtype, **weights)
    text_encoder = load_pretrained(CLIPTextModel, pretrained, "generator", "text_encoder", dtype=torch_dtype,
                                   **weights)
    tokenizer = load_pretrained(CLIPTokenizer, pretrained, "generator", "tokenizer")
    scheduler_config = dict(load_pretrained(_SchedulerConfig, pretrained, "generator", "scheduler"))
    return StableDiffusionComponents(_frozen(unet), _frozen(vae), _frozen(text_encoder), tokenizer,
                                     scheduler_config)


@lru_cache(maxsize=2)
def load_controlnet(location: str, dtype: str = "float32", variant: str | None = None) -> ControlNetModel:
    """A frozen task ``ControlNetModel`` (a folder written by ``save_pretrained`` or a hub id), once per process."""
    weights = {} if variant is None else {"variant": variant}
    return _frozen(load_pretrained(ControlNetModel, location, "ControlNet", torch_dtype=DTYPES[dtype], **weights))


def load_control_image(path: str | Path) -> Any:
    """The control image at ``path`` as an RGB PIL image; a one-line ``FileNotFoundError`` when missing."""
    from PIL import Image

    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"control image not found: {file}")
    with Image.open(file) as image:
        return image.convert("RGB")


class StableDiffusionGenerator(TextConditionalGenerator):
    """Stable Diffusion 1.5 (+ an optional frozen task ControlNet) configured by names (YAML-friendly).

    Frozen components are loaded once per process and shared; every instance is a fresh wrapper (own scheduler,
    prompt embeddings and control image). ``origin_class`` of a test case is ignored: use ``cases.classes:
    [null]`` (or class ids the SUT checks the origin for, see ``configs/driving_sd15_yolov8.yaml``).

    Args:
        pretrained: a local folder in the diffusers Stable Diffusion layout (``unet/ vae/ text_encoder/
            tokenizer/ scheduler/``, as ``StableDiffusionPipeline.save_pretrained`` writes) or a Hugging Face hub
            id found in the local cache (downloaded only when the hub is reachable and ``HF_HUB_OFFLINE`` unset).
        prompt, negative_prompt: the text condition and the guidance's negative prompt.
        num_inference_steps: sampling steps. guidance_scale: classifier-free guidance (off at <= 1).
        eta: DDIM eta (0: deterministic). scheduler: ``"ddim"`` or ``"dpm"`` (DPM-Solver++ multistep), built from
            the checkpoint's scheduler config.
        dtype: weights dtype (``float32``, ``bfloat16``, ``float16``); the HyperNet copies it.
        variant: weight-file variant to load (e.g. ``fp16``), ``None`` for the default files.
        controlnet: a frozen task ``ControlNetModel``: a folder (``config.json`` + weights) or a hub id.
        control_image: path to its condition image (e.g. a segmentation map), resized to the image size.
        controlnet_scale: the task ControlNet's conditioning scale.
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions`
            (``gradient_checkpointing``, ``grad_steps``, ``autocast_dtype``, ``channels_last``).
    """

    def __init__(
        self,
        pretrained: str = "stable-diffusion-v1-5/stable-diffusion-v1-5",
        prompt: str = "",
        negative_prompt: str = "",
        num_inference_steps: PositiveInt = 25,
        guidance_scale: NonNegativeFloat = 7.5,
        eta: ClosedUnitInterval = 0.0,
        scheduler: Literal["ddim", "dpm"] = "ddim",
        dtype: Literal["float32", "bfloat16", "float16"] = "float32",
        variant: str | None = None,
        controlnet: str | None = None,
        control_image: str | None = None,
        controlnet_scale: float = 1.0,
        **memory: Any,
    ) -> None:
        if scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {sorted(SCHEDULERS)}, got {scheduler!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        if (controlnet is None) != (control_image is None):
            raise ValueError("generator: controlnet and control_image are set together (or both null)")
        image = None if control_image is None else load_control_image(control_image)  # before the big loads
        frozen = load_stable_diffusion(checkpoint_key(pretrained), dtype, variant)
        task_controlnet = None if controlnet is None else load_controlnet(checkpoint_key(controlnet), dtype, variant)
        super().__init__(
            frozen.unet, frozen.vae, frozen.text_encoder, frozen.tokenizer,
            scheduler=SCHEDULERS[scheduler].from_config(frozen.scheduler_config),
            prompt=prompt, negative_prompt=negative_prompt, controlnet=task_controlnet, control_image=image,
            controlnet_scale=controlnet_scale, num_inference_steps=num_inference_steps,
            guidance_scale=guidance_scale, eta=eta, **memory,
        )


__all__ = [
    "StableDiffusionComponents",
    "StableDiffusionGenerator",
    "TextConditionalGenerator",
    "load_controlnet",
    "load_control_image",
    "load_stable_diffusion",
]
