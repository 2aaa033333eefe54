"""Train and save each component of a base zoo (the registry's ``train`` of :mod:`hynea_pl.zoo.labelled.zoo`), for any
profile's data: the image size, channels and classes come from its data config (``data``)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from diffusers import AutoencoderKL, DDIMScheduler, DDPMScheduler, UNet2DConditionModel
from safetensors.torch import save_file
from torch.utils.data import TensorDataset

from hynea_pl.generators.conditioning import ClassEmbedding
from hynea_pl.zoo.labelled.autoencoder import AutoencoderTraining, encode_latents
from hynea_pl.zoo.labelled.classifier import ClassifierTraining, SmallCNN
from hynea_pl.zoo.labelled.config import (
    AutoencoderConfig, ClassifierConfig, DenoiserConfig, OracleConfig,
)
from hynea_pl.zoo.labelled.denoiser import EMA, DenoiserTraining
from hynea_pl.zoo.labelled.oracle import OracleTraining, oracle_network, oracle_role
from hynea_pl.zoo.splits import ImageSplits
from hynea_pl.zoo.train import console, fit


def classifier_preprocess(data: Any) -> dict:
    """How the zoo's classifiers of a profile (its data config ``data``) expect their input: C x S x S in [0, 1],
    then (x - 0.5) / 0.5 per channel."""
    return {"size": data.image_size, "channels": data.channels, "mean": [0.5] * data.channels,
            "std": [0.5] * data.channels}


def classifier_init_args(cfg: ClassifierConfig, data: Any) -> dict:
    return {"channels": list(cfg.channels), "hidden": cfg.hidden, "dropout": cfg.dropout,
            "num_classes": data.num_classes, "in_channels": data.channels, "image_size": data.image_size}


def train_classifier(cfg: ClassifierConfig, digits: ImageSplits, split: str, out: Path, role: str,
                     data_config: Any) -> SmallCNN:
    """Train a SmallCNN on the images of ``split`` and save ``model.safetensors`` + ``config.json`` (class path, init
    args, preprocessing, the split it trained on)."""
    data = digits[split]
    console.print(f"[bold]zoo[/]: training {role} (SmallCNN {list(cfg.channels)}, {cfg.max_steps} steps)")
    torch.manual_seed(cfg.seed)
    init_args = classifier_init_args(cfg, data_config)
    model = SmallCNN(**init_args)
    module = ClassifierTraining(model, lr=cfg.lr, max_steps=cfg.max_steps, max_shift=cfg.max_shift)
    seconds = fit(module, data.dataset(), cfg.batch_size, cfg.max_steps, cfg.seed,
                  name=role)
    model.eval()
    save_file(model.state_dict(), str(out / "model.safetensors"))
    config = {
        "class_path": f"{SmallCNN.__module__}.{SmallCNN.__qualname__}", "init_args": init_args,
        "preprocess": classifier_preprocess(data_config), "role": role, "data_split": split,
        "training": dataclasses.asdict(cfg),
        "build_s": seconds,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return model


def train_oracle(cfg: OracleConfig, digits: ImageSplits, split: str, out: Path, name: str, data_config: Any) -> None:
    """Train a validity-oracle member on the digits of ``split`` and save it like a classifier: ``model.safetensors``
    + ``config.json`` (class path, init args, preprocessing, role, split, training config)."""
    data = digits[split]
    torch.manual_seed(cfg.seed)
    start = time.perf_counter()
    model, class_path, init_args = oracle_network(cfg, data_config)
    console.print(f"[bold]zoo[/]: training {name} ({class_path.rsplit('.', 1)[-1]}, {cfg.max_steps} steps)")
    fit(OracleTraining(model, cfg, not_digit_label=data_config.num_classes), data.dataset(), cfg.batch_size,
        cfg.max_steps, cfg.seed, name=name)
    save_file(model.eval().state_dict(), str(out / "model.safetensors"))
    config = {
        "class_path": class_path, "init_args": init_args,
        "preprocess": classifier_preprocess(data_config), "role": name, "oracle_role": oracle_role(name), "data_split": split,
        "training": dataclasses.asdict(cfg), "build_s": time.perf_counter() - start,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))


def train_autoencoder(cfg: AutoencoderConfig, digits: ImageSplits, split: str, out: Path,
                      data_config: Any) -> AutoencoderKL:
    """Train the AutoencoderKL on the digits of ``split``, set ``scaling_factor`` to 1 / std of the training latents,
    save it."""
    data = digits[split]
    console.print(f"[bold]zoo[/]: training autoencoder (AutoencoderKL {list(cfg.block_out_channels)}, {cfg.max_steps} steps)")
    torch.manual_seed(cfg.seed)
    n_blocks = len(cfg.block_out_channels)
    vae = AutoencoderKL(
        in_channels=data_config.channels, out_channels=data_config.channels,
        down_block_types=["DownEncoderBlock2D"] * n_blocks, up_block_types=["UpDecoderBlock2D"] * n_blocks,
        block_out_channels=list(cfg.block_out_channels), layers_per_block=cfg.layers_per_block,
        latent_channels=cfg.latent_channels, norm_num_groups=cfg.norm_num_groups, sample_size=data_config.image_size,
    )
    module = AutoencoderTraining(vae, cfg.lr, cfg.max_steps, cfg.l1_weight, cfg.kl_weight)
    seconds = fit(module, data.dataset(labels=False), cfg.batch_size, cfg.max_steps, cfg.seed,
                  name="autoencoder")
    vae.eval()
    latents = encode_latents(vae, data.train_images)
    vae.register_to_config(scaling_factor=float(1.0 / latents.std()))
    vae.save_pretrained(out)
    (out / "training.json").write_text(json.dumps({**dataclasses.asdict(cfg), "data_split": split,
                                                    "build_s": seconds}, indent=2))
    return vae


def inference_scheduler(cfg: DenoiserConfig) -> DDIMScheduler:
    """DDIM with ``leading`` spacing and ``set_alpha_to_one`` (``trailing`` starts at t=999, where the
    cosine schedule has almost no signal and epsilon prediction blows up; see REFERENCE.md)."""
    return DDIMScheduler(
        num_train_timesteps=cfg.num_train_timesteps, beta_schedule=cfg.beta_schedule, prediction_type="epsilon",
        timestep_spacing="leading", set_alpha_to_one=True, clip_sample=False,
    )


def train_denoiser(cfg: DenoiserConfig, digits: ImageSplits, split: str, vae_dir: Path, out: Path,
                   data_config: Any) -> None:
    """Train the class-conditional UNet on scaled autoencoder latents of the digits of ``split``; save a generator folder
    (``unet/``, ``class_embedding/``, ``scheduler/``, ``vae/``) that ``LatentDiffusionGenerator.from_pretrained`` loads."""
    console.print(f"[bold]zoo[/]: training ldm (UNet2DConditionModel {list(cfg.block_out_channels)}, {cfg.max_steps} steps)")
    data = digits[split]
    vae = AutoencoderKL.from_pretrained(vae_dir)
    latents = encode_latents(vae, data.train_images) * vae.config.scaling_factor
    torch.manual_seed(cfg.seed)
    unet = UNet2DConditionModel(
        sample_size=latents.shape[-1], in_channels=latents.shape[1], out_channels=latents.shape[1],
        block_out_channels=list(cfg.block_out_channels), layers_per_block=cfg.layers_per_block,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=cfg.cross_attention_dim, attention_head_dim=cfg.attention_head_dim,
        norm_num_groups=cfg.norm_num_groups,
    )
    class_embedding = ClassEmbedding(num_classes=data_config.num_classes, embedding_dim=cfg.cross_attention_dim)
    noise_scheduler = DDPMScheduler(
        num_train_timesteps=cfg.num_train_timesteps, beta_schedule=cfg.beta_schedule, prediction_type="epsilon"
    )
    module = DenoiserTraining(unet, class_embedding, noise_scheduler, cfg.lr, cfg.max_steps,
                              cfg.label_dropout, cfg.snr_gamma)
    seconds = fit(module, TensorDataset(latents, data.train_labels), cfg.batch_size, cfg.max_steps, cfg.seed,
                  callbacks=[EMA(cfg.ema_decay)], name="ldm")
    unet.eval()
    unet.save_pretrained(out / "unet")
    class_embedding.save_pretrained(out / "class_embedding")
    inference_scheduler(cfg).save_pretrained(out / "scheduler")
    shutil.copytree(vae_dir, out / "vae", ignore=shutil.ignore_patterns("COMPLETE", "training.json"))
    (out / "training.json").write_text(json.dumps({**dataclasses.asdict(cfg), "data_split": split,
                                                    "build_s": seconds}, indent=2))
