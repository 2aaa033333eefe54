"""Tiny, seeded, random Stable Diffusion components for fast tests (no downloads).

Shapes: images (B, 3, 16, 16) <-> latents (B, 4, 8, 8) (VAE scale factor 2); prompts -> (1, 16, 32) CLIP hidden
states from a 2-layer CLIP text model and a CLIP BPE tokenizer whose vocab.json / merges.txt are written by hand.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import torch
from diffusers import AutoencoderKL, ControlNetModel, DDIMScheduler, UNet2DConditionModel
from PIL import Image

LATENT_SHAPE = (4, 8, 8)
IMAGE_SIZE = 16
CONTEXT_DIM = 32
MAX_TOKENS = 16
PROMPT = "a city street, cars, people"
NEGATIVE_PROMPT = "blurry, dark"
BLOCKS = ("CrossAttnDownBlock2D", "DownBlock2D")


def write_tokenizer_files(folder: Path) -> Path:
    """A character-level CLIP BPE vocabulary (letters, word-final letters, punctuation) and no merges."""
    folder.mkdir(parents=True, exist_ok=True)
    symbols = list(string.ascii_lowercase) + [",", ".", "!"]
    tokens = ["<|startoftext|>", "<|endoftext|>", *symbols, *(s + "</w>" for s in symbols)]
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    return folder


def tiny_tokenizer(folder: Path):
    from transformers import CLIPTokenizer

    return CLIPTokenizer.from_pretrained(write_tokenizer_files(folder), model_max_length=MAX_TOKENS)


def tiny_text_encoder(vocab_size: int, seed: int = 0):
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(seed)
    config = CLIPTextConfig(vocab_size=vocab_size, hidden_size=CONTEXT_DIM, intermediate_size=37,
                            num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=MAX_TOKENS,
                            projection_dim=CONTEXT_DIM, bos_token_id=0, eos_token_id=1, pad_token_id=1)
    return CLIPTextModel(config).eval()


def tiny_unet(seed: int = 0) -> UNet2DConditionModel:
    torch.manual_seed(seed)
    return UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=LATENT_SHAPE[1], in_channels=4,
        out_channels=4, down_block_types=BLOCKS, up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=CONTEXT_DIM, norm_num_groups=32,
    )


def tiny_vae(seed: int = 0) -> AutoencoderKL:
    """RGB 16x16 <-> 4x8x8; ``scaling_factor=1`` so random-weight decodes are neither saturated nor flat."""
    torch.manual_seed(seed)
    return AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16), layers_per_block=1,
        latent_channels=4, norm_num_groups=8, sample_size=IMAGE_SIZE, scaling_factor=1.0,
    )


def tiny_controlnet(seed: int = 1) -> ControlNetModel:
    """A random task ControlNet whose zero layers are made non-zero (a 'trained' one changes the image); its
    conditioning embedding takes an RGB image at pixel size (one 2x downsampling)."""
    torch.manual_seed(seed)
    controlnet = ControlNetModel(
        block_out_channels=(32, 64), layers_per_block=1, in_channels=4, down_block_types=BLOCKS,
        cross_attention_dim=CONTEXT_DIM, norm_num_groups=32, conditioning_embedding_out_channels=(16, 32),
    )
    with torch.no_grad():
        for layer in [*controlnet.controlnet_down_blocks, controlnet.controlnet_mid_block,
                      controlnet.controlnet_cond_embedding.conv_out]:
            for p in layer.parameters():
                p.copy_(0.05 * torch.randn_like(p))
    return controlnet.eval()


def tiny_scheduler() -> DDIMScheduler:
    """Stable Diffusion 1.5's schedule (scaled linear betas, leading spacing with offset 1)."""
    return DDIMScheduler(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                         beta_schedule="scaled_linear", clip_sample=False, set_alpha_to_one=False, steps_offset=1)


def write_control_image(path: Path, size: int = 20, seed: int = 0) -> Path:
    """A blocky RGB 'segmentation map' PNG (not at the image size, so it gets resized)."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)
    pixels = np.kron(blocks, np.ones((size // 4, size // 4, 1), dtype=np.uint8))
    Image.fromarray(pixels, "RGB").save(path)
    return path


def save_stable_diffusion(folder: Path, tokenizer_dir: Path) -> Path:
    """Write a tiny SD checkpoint in the diffusers layout (``StableDiffusionPipeline.save_pretrained``)."""
    from diffusers import StableDiffusionPipeline

    tokenizer = tiny_tokenizer(tokenizer_dir)
    pipe = StableDiffusionPipeline(
        vae=tiny_vae(), text_encoder=tiny_text_encoder(len(tokenizer)), tokenizer=tokenizer, unet=tiny_unet(),
        scheduler=tiny_scheduler(), safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )
    pipe.save_pretrained(folder)
    return folder
