"""HyNeA at the paper's model sizes, random weights: seconds per step and peak memory at B = 1, 4, 16 cases.

    .venv/bin/python benchmarks/real_size.py --device cuda [--batch-sizes 1 4 16] [--steps 3]
        [--backbones sd15-yolov8 dit-xl2-wrn50 celebahq-ldm-resnet50] [--inference-steps N]
        [--autocast bfloat16|none] [--no-checkpointing] [--no-channels-last] [--json runs/real_size.json]
    .venv/bin/python benchmarks/real_size.py --reduced        # tiny versions of the three (CPU, seconds)

The three backbones of the paper, built from their diffusers configs with random weights (nothing is downloaded;
the configs are written out below from the published model cards' ``config.json`` files, not read from them):

- ``sd15-yolov8``: Stable Diffusion 1.5's UNet (320/640/1280/1280, 64x64 latents, cross-attention 768), its
  AutoencoderKL (512 px), a task ControlNet copied from the UNet (the driving config's segmentation ControlNet) and
  CFG 7.5 over random 77x768 prompt states, as :class:`~hynea_pl.generators.text_conditional.TextConditionalGenerator`
  runs them; the SUT is an untrained YOLOv8n (``yolov8n.yaml``, 640 px, top-5 detections), 25 sampling steps.
- ``dit-xl2-wrn50``: DiT-XL/2 (28 blocks, 16 x 72 heads, patch 2, 32x32x4 latents) + the SD AutoencoderKL at
  256 px, CFG 1.5, a HyperNet of 8 blocks; the SUT a WideResNet-50-2 at 224 px; 50 sampling steps.
- ``celebahq-ldm-resnet50``: the CelebA-HQ LDM's UNet2DModel (224/448/672/896, 64x64x3 latents) and VQ-f4 model
  (256 px); the SUT a ResNet-50 with 40 attribute logits (Smiling) at 224 px; 100 sampling steps.

One HyNeA step is what a campaign runs: at B = 1 a :class:`~hynea_pl.methods.HyNeACase` under ``Trainer.fit``; at
B > 1 a :class:`~hynea_pl.methods.batched.BatchedHyNeA` with B cases (its HyperNets stacked). ``--steps`` steps per
row, the first a warm-up; the median of the others is reported, with the peak memory of the row (CUDA:
``max_memory_allocated``; CPU: the process's peak resident memory, reset per row). Cases never stop early here
(``acceptance.margin`` is out of reach) so every row times B cases. A row that runs out of memory ends its backbone's
larger batch sizes. Memory levers (:class:`~hynea_pl.generators.base.MemoryOptions`): gradient checkpointing and
channels-last on by default, bf16 autocast on by default on CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import lightning as L  # noqa: E402

from hynea_pl.methods import Acceptance, HyNeACase, PaperSearch  # noqa: E402
from hynea_pl.methods.batched import BatchedHyNeA  # noqa: E402
from hynea_pl.suts import SUT, ClassifierSUT, Preprocess  # noqa: E402

IMAGENET = {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
GiB = 2**30


@dataclass
class Backbone:
    """A generator, its SUT and the case condition, with a line saying what they are."""

    generator: Any
    sut: SUT
    origin_class: int | None
    description: str


# ---------------------------------------------------------------------- the three backbones
def sd_vae(reduced: bool, sample_size: int) -> nn.Module:
    """Stable Diffusion's AutoencoderKL (3 <-> 4 channels, /8); reduced: 2 levels of 32/64 channels (/2)."""
    from diffusers import AutoencoderKL

    levels = (32, 64) if reduced else (128, 256, 512, 512)
    return AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4,
                         down_block_types=("DownEncoderBlock2D",) * len(levels),
                         up_block_types=("UpDecoderBlock2D",) * len(levels), block_out_channels=levels,
                         layers_per_block=1 if reduced else 2, norm_num_groups=32, sample_size=sample_size,
                         scaling_factor=0.18215)


class _Tokens(SimpleNamespace):
    pass


class PromptTokenizer:
    """Stands in for CLIP's tokenizer (no vocabulary files here): any text -> ``(1, 77)`` token ids of its bytes."""

    model_max_length = 77

    def __call__(self, text: str, padding: str, max_length: int, truncation: bool, return_tensors: str) -> _Tokens:
        ids = [49406, *list(text.encode())[: max_length - 2], 49407]
        ids += [49407] * (max_length - len(ids))
        return _Tokens(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, max_length, dtype=torch.long))


class PromptEncoder(nn.Module):
    """Stands in for CLIP's text encoder: random token embeddings ``(1, 77) -> (1, 77, D)`` (the UNet sees prompt
    states of the real shape)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.config = SimpleNamespace(use_attention_mask=False)
        self.embedding = nn.Embedding(49408, dim)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> tuple[Tensor]:
        return (self.embedding(input_ids),)


def build_sd15(reduced: bool, steps: int | None, memory: dict) -> Backbone:
    from diffusers import ControlNetModel, DDIMScheduler, UNet2DConditionModel

    from hynea_pl.generators.text_conditional import TextConditionalGenerator
    from hynea_pl.suts import YOLODetectorSUT

    if reduced:
        unet = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                    block_out_channels=(32, 64),
                                    down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                    attention_head_dim=8, norm_num_groups=32)
    else:  # stable-diffusion-v1-5 unet/config.json
        unet = UNet2DConditionModel(sample_size=64, in_channels=4, out_channels=4, layers_per_block=2,
                                    block_out_channels=(320, 640, 1280, 1280),
                                    down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
                                    up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
                                    cross_attention_dim=768, attention_head_dim=8, norm_num_groups=32)
    image = 16 if reduced else 512
    vae = sd_vae(reduced, image)
    controlnet = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=(16, 32) if reduced
                                           else (16, 32, 96, 256))
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False, steps_offset=1)
    generator = TextConditionalGenerator(
        unet, vae, PromptEncoder(unet.config.cross_attention_dim), PromptTokenizer(), scheduler=scheduler,
        prompt="an urban street scene from a car's front camera", controlnet=controlnet,
        control_image=torch.rand(1, 3, image, image, generator=torch.Generator().manual_seed(0)),
        num_inference_steps=steps or (2 if reduced else 25), guidance_scale=7.5, **memory)
    size = 64 if reduced else 640
    sut = YOLODetectorSUT("yolov8n.yaml", imgsz=size, nc=80, top_k=5)
    return Backbone(generator, sut, None, f"SD 1.5 UNet + task ControlNet + SD VAE ({image} px), CFG 7.5, "
                                          f"{generator.num_inference_steps} steps; YOLOv8n at {size} px")


def build_dit(reduced: bool, steps: int | None, memory: dict) -> Backbone:
    from diffusers import DDIMScheduler, DiTTransformer2DModel
    from torchvision.models import resnet18, wide_resnet50_2

    from hynea_pl.generators.dit import DiTGenerator

    if reduced:
        transformer = DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4,
                                            out_channels=8, num_layers=2, patch_size=2, sample_size=8,
                                            num_embeds_ada_norm=1000, norm_type="ada_norm_zero")
    else:  # facebook/DiT-XL-2-256 transformer/config.json
        transformer = DiTTransformer2DModel(num_attention_heads=16, attention_head_dim=72, in_channels=4,
                                            out_channels=8, num_layers=28, patch_size=2, sample_size=32,
                                            num_embeds_ada_norm=1000, norm_type="ada_norm_zero")
    image = 16 if reduced else 256
    generator = DiTGenerator.from_components(
        transformer, sd_vae(reduced, image), DDIMScheduler(beta_schedule="linear", clip_sample=False),
        num_inference_steps=steps or (2 if reduced else 50), guidance_scale=1.5, hypernet_blocks=8, **memory)
    model = resnet18(num_classes=1000) if reduced else wide_resnet50_2()
    size = 32 if reduced else 224
    sut = ClassifierSUT(model, preprocess=Preprocess(size=size, channels=3, **IMAGENET))
    return Backbone(generator, sut, 207, f"DiT-XL/2 + SD VAE ({image} px), CFG 1.5, {generator.num_inference_steps} "
                                         f"steps, HyperNet of 8 blocks; {'ResNet-18' if reduced else 'WRN-50-2'} at "
                                         f"{size} px")


def build_celeba(reduced: bool, steps: int | None, memory: dict) -> Backbone:
    from diffusers import DDIMScheduler, UNet2DModel, VQModel
    from torchvision.models import resnet18, resnet50

    from hynea_pl.generators.unconditional import UNet2DGenerator
    from hynea_pl.suts import BinaryAttributeSUT

    if reduced:
        unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
                           block_out_channels=(32, 64), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                           up_block_types=("AttnUpBlock2D", "UpBlock2D"), attention_head_dim=8)
        vqvae = VQModel(in_channels=3, out_channels=3, latent_channels=3, block_out_channels=(32, 64),
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        layers_per_block=1, num_vq_embeddings=64, sample_size=16)
    else:  # CompVis/ldm-celebahq-256 unet/ and vqvae/ config.json
        unet = UNet2DModel(sample_size=64, in_channels=3, out_channels=3, layers_per_block=2,
                           block_out_channels=(224, 448, 672, 896),
                           down_block_types=("DownBlock2D",) + ("AttnDownBlock2D",) * 3,
                           up_block_types=("AttnUpBlock2D",) * 3 + ("UpBlock2D",), attention_head_dim=32)
        vqvae = VQModel(in_channels=3, out_channels=3, latent_channels=3, block_out_channels=(128, 256, 512),
                        down_block_types=("DownEncoderBlock2D",) * 3, up_block_types=("UpDecoderBlock2D",) * 3,
                        layers_per_block=2, num_vq_embeddings=8192, sample_size=256)
    generator = UNet2DGenerator(unet, vqvae, DDIMScheduler(), num_inference_steps=steps or (2 if reduced else 100),
                                **memory)
    size = 32 if reduced else 224
    sut = BinaryAttributeSUT((resnet18 if reduced else resnet50)(num_classes=40), attribute=31,
                             preprocess=Preprocess(size=size, channels=3, **IMAGENET))
    return Backbone(generator, sut, None, f"CelebA-HQ LDM UNet + VQ-f4 ({'16' if reduced else '256'} px), "
                                          f"{generator.num_inference_steps} steps; "
                                          f"{'ResNet-18' if reduced else 'ResNet-50'} (40 attributes) at {size} px")


BACKBONES: dict[str, Callable[[bool, int | None, dict], Backbone]] = {
    "sd15-yolov8": build_sd15, "dit-xl2-wrn50": build_dit, "celebahq-ldm-resnet50": build_celeba}


# ---------------------------------------------------------------------- measuring
class StepTimer(L.Callback):
    """Seconds of every training step (device synchronised)."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.seconds, self._start = device, [], 0.0

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def on_train_batch_start(self, *args: Any) -> None:
        self._sync()
        self._start = time.perf_counter()

    def on_train_batch_end(self, *args: Any) -> None:
        self._sync()
        self.seconds.append(time.perf_counter() - self._start)


def _peak_reset(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    else:
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM
        except OSError:
            pass


def _peak_gib(device: torch.device) -> float | None:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / GiB
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / GiB
    except OSError:
        return None
    return None


def make_case(backbone: Backbone, origin: Tensor, seed: int) -> HyNeACase:
    """A set-up case whose found rule never holds (every row times all its cases)."""
    case = HyNeACase(backbone.generator, backbone.sut, origin_class=backbone.origin_class, seed=seed,
                     search=PaperSearch(total_steps=10_000), acceptance=Acceptance(margin=1e9))
    case.provide_origin(origin)
    case.setup("fit")
    return case


def measure(backbone: Backbone, batch_size: int, steps: int, device: torch.device) -> dict:
    """One row: ``steps`` HyNeA steps of ``batch_size`` cases; seconds per step (median after the warm-up) and
    the row's peak memory."""
    with torch.no_grad():
        origin = backbone.generator.sample(backbone.generator.initial_noise(0), backbone.origin_class)
    _peak_reset(device)
    timer = StepTimer(device)
    trainer = L.Trainer(max_steps=steps, accelerator="gpu" if device.type == "cuda" else "cpu", devices=1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[timer])
    seeds = iter(range(1, 1_000_000))
    first = make_case(backbone, origin, 0)
    if batch_size == 1:
        module: L.LightningModule = first
    else:
        module = BatchedHyNeA(first, lambda: make_case(backbone, origin, next(seeds)), lambda *done: None,
                              slots=batch_size, max_steps=10_000, max_evals=10**9)
    trainer.fit(module)
    timed = timer.seconds[1:] or timer.seconds
    per_step = statistics.median(timed)
    return {"batch_size": batch_size, "s_per_step": per_step, "s_per_case_step": per_step / batch_size,
            "peak_gib": _peak_gib(device), "steps": len(timer.seconds)}


def is_oom(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower() \
        or "not enough memory" in str(error).lower()


def run(options: argparse.Namespace) -> list[dict]:
    device = torch.device(options.device)
    autocast = options.autocast if options.autocast != "auto" else ("bfloat16" if device.type == "cuda" else "none")
    memory = {"gradient_checkpointing": not options.no_checkpointing, "channels_last": not options.no_channels_last,
              "autocast_dtype": None if autocast == "none" else autocast}
    print(f"device {device}, {'reduced' if options.reduced else 'real'} sizes, levers {memory}, "
          f"{options.steps} steps per row (first = warm-up)", flush=True)
    rows = []
    for name in options.backbones:
        torch.manual_seed(0)
        with torch.device(device):
            backbone = BACKBONES[name](options.reduced, options.inference_steps, memory)
        backbone.generator.to(device)
        backbone.sut.to(device)
        print(f"{name}: {backbone.description}", flush=True)
        for batch_size in options.batch_sizes:
            try:
                row = measure(backbone, batch_size, options.steps, device)
            except Exception as error:  # noqa: BLE001 - a row that does not fit ends the larger ones
                if not is_oom(error):
                    raise
                print(f"  B={batch_size}: out of memory; larger batch sizes skipped", flush=True)
                rows.append({"backbone": name, "batch_size": batch_size, "oom": True})
                break
            finally:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            row = {"backbone": name, **row, "levers": memory}
            rows.append(row)
            peak = "n/a" if row["peak_gib"] is None else f"{row['peak_gib']:.2f} GiB"
            print(f"  B={batch_size}: {row['s_per_step']:.3f} s/step, {row['s_per_case_step']:.3f} s per case-step, "
                  f"peak {peak}", flush=True)
        del backbone
    return rows


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reduced", action="store_true", help="tiny versions of the three backbones")
    parser.add_argument("--backbones", nargs="+", choices=list(BACKBONES), default=list(BACKBONES))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--steps", type=int, default=3, help="HyNeA steps per row (the first is a warm-up)")
    parser.add_argument("--inference-steps", type=int, default=None,
                        help="sampling steps of the chain (default: the paper's 25 / 50 / 100; reduced: 2)")
    parser.add_argument("--autocast", choices=["auto", "bfloat16", "none"], default="auto")
    parser.add_argument("--no-checkpointing", action="store_true")
    parser.add_argument("--no-channels-last", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict]:
    options = parse(argv)
    os.environ.setdefault("YOLO_VERBOSE", "false")
    warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode")
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    from hynea_pl.campaign.config import quiet_lightning_info

    quiet_lightning_info()
    rows = run(options)
    if options.json is not None:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
