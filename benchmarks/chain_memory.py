"""Memory and seconds per HyNeA optimisation step for the generator's levers (checkpointing, truncated
back-propagation, bf16 autocast, channels_last) and chain lengths.

    .venv/bin/python benchmarks/chain_memory.py                                  # tiny models, CPU, < 3 min
    .venv/bin/python benchmarks/chain_memory.py --device cuda --size sd15 --dtype bfloat16 --json runs/sd15.json
    .venv/bin/python benchmarks/chain_memory.py --device meta --size sd15 --construct-only   # check the configs

One step = projector -> differentiable sampling chain from the stored noise (HyperNet residuals in every model
call) -> decode -> SUT -> image distance + normalised cross entropy -> backward -> AdamW step, i.e. what
``HyNeACase.training_step`` does, without Lightning. Each row gets a fresh HyperNet, projector and optimiser;
one warm-up step (also used to measure saved activations), then ``--repeats`` timed steps (median reported).

Memory columns:
- ``saved MB``: bytes of the tensors autograd saves for backward during the forward of one step, deduplicated by
  storage, parameters excluded (``torch.autograd.graph.saved_tensors_hooks``). Tensors saved *inside* a
  checkpointed call are not held (they are recomputed in backward), so they are not counted; neither are the
  per-step inputs a checkpoint keeps, nor the transient activations of one recomputed call during backward.
- CPU ``RSS peak+ MB``: rise of the process's peak resident memory (``VmHWM``, reset per row through
  ``/proc/self/clear_refs``) over the resident memory at the row's start: rough (allocator caching).
- CUDA ``peak MB`` / ``peak+ MB``: ``torch.cuda.max_memory_allocated`` over the timed steps, and its rise over the
  memory allocated between steps (weights, HyperNet, optimiser state).

Random weights everywhere (nothing is downloaded): ``tiny`` reuses ``tests/tiny_components.py``; ``sd15`` is a
UNet2DConditionModel with the Stable Diffusion 1.5 config + the SD AutoencoderKL + random 77x768 prompt states;
``dit-xl`` a DiTTransformer2DModel with the DiT-XL/2 config + the SD AutoencoderKL (needs
``hynea_pl.generators.dit.DiTGenerator``). The big sizes use a small conv-net SUT (1000 classes) on the decoded
image resized to 64 px; they are meant for a GPU in bf16 (``--dtype bfloat16``).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from hynea_pl.generators import DiffusionGenerator  # noqa: E402
from hynea_pl.hypernets import ControlProjector  # noqa: E402
from hynea_pl.objectives import frobenius_distance  # noqa: E402
from hynea_pl.suts import SUT, ClassifierSUT, Preprocess  # noqa: E402

MB = 2**20
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class SkipSize(RuntimeError):
    """This size cannot be built here (e.g. its generator family does not exist yet)."""


# ---------------------------------------------------------------------- variants (table rows per chain length)
@dataclass(frozen=True)
class Variant:
    """Generator lever settings of one row."""

    name: str
    gradient_checkpointing: bool
    grad_steps: int | None = None
    autocast_dtype: str | None = None
    channels_last: bool = False
    cuda_only: bool = False  # part of the default rows only on CUDA


VARIANTS = {
    v.name: v
    for v in [
        Variant("plain", gradient_checkpointing=False),
        Variant("ckpt", gradient_checkpointing=True),
        Variant("grad5", gradient_checkpointing=False, grad_steps=5),
        Variant("ckpt+bf16", gradient_checkpointing=True, autocast_dtype="bfloat16", cuda_only=True),
        Variant("ckpt+cl", gradient_checkpointing=True, channels_last=True, cuda_only=True),
    ]
}


@dataclass
class Setup:
    """A frozen generator, its condition and a frozen SUT, ready to benchmark."""

    generator: DiffusionGenerator
    condition: Any
    sut: SUT
    description: str
    origins: dict[int, Tensor] = field(default_factory=dict)  # chain length -> origin image (1, C, H, W)


# ---------------------------------------------------------------------- model sizes
def _load_tiny_components() -> Any:
    path = ROOT / "tests" / "tiny_components.py"
    spec = importlib.util.spec_from_file_location("tiny_components", path)
    if spec is None or spec.loader is None:
        raise SkipSize(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_tiny(device: torch.device) -> Setup:
    """The test suite's tiny class-conditional LDM (latents 4x8x8, images 1x32x32, CFG 3) and random SmallCNN SUT."""
    tiny = _load_tiny_components()
    with device:
        generator = tiny.tiny_generator(guidance_scale=3.0)
        sut = tiny.tiny_sut()
    return Setup(generator, 3, sut, "tiny LDM (UNet 32/64, latents 4x8x8, images 1x32x32, CFG 3.0, class 3)")


def sd_vae(sample_size: int) -> nn.Module:
    """A random AutoencoderKL with the Stable Diffusion config (3 <-> 4 channels, /8)."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4,
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(128, 256, 512, 512), layers_per_block=2, norm_num_groups=32,
        sample_size=sample_size, scaling_factor=0.18215,
    )


def small_sut(num_classes: int = 1000) -> ClassifierSUT:
    """A random small conv net on the decoded RGB image resized to 64 px: ``(B, 3, H, W) -> (B, num_classes)``."""
    from hynea_pl.zoo.labelled.classifier import SmallCNN

    torch.manual_seed(0)
    model = SmallCNN(channels=(8, 16), hidden=32, num_classes=num_classes, in_channels=3, image_size=64, dropout=0.0)
    return ClassifierSUT(model, preprocess=Preprocess(size=64, channels=3, mean=[0.5] * 3, std=[0.5] * 3))


def build_sd15(device: torch.device) -> Setup:
    """Random-weight Stable Diffusion 1.5 shapes: UNet (320/640/1280/1280, 64x64 latents), SD VAE, CFG 7.5."""
    from diffusers import DDIMScheduler, UNet2DConditionModel

    from hynea_pl.generators import LatentDiffusionGenerator

    torch.manual_seed(0)
    with device:
        unet = UNet2DConditionModel(
            sample_size=64, in_channels=4, out_channels=4, layers_per_block=2,
            block_out_channels=(320, 640, 1280, 1280),
            down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
            up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
            cross_attention_dim=768, attention_head_dim=8, norm_num_groups=32,
        )
        vae = sd_vae(512)
        sut = small_sut()
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False, steps_offset=1)
    generator = LatentDiffusionGenerator(unet, vae, scheduler, condition_encoder=None, guidance_scale=7.5)
    g = torch.Generator("cpu").manual_seed(0)
    prompts = (torch.randn(1, 77, 768, generator=g), torch.randn(1, 77, 768, generator=g))  # (cond, uncond)
    return Setup(generator, prompts, sut, "SD 1.5 shapes, random weights (UNet 64x64 latents, SD VAE 512 px, "
                                          "CFG 7.5, random 77x768 prompt states)")


def build_dit_xl(device: torch.device) -> Setup:
    """Random-weight DiT-XL/2 (28 layers, 16 x 72 heads, patch 2, 32x32x4 latents, learned sigma) + SD VAE, CFG 1.5."""
    try:
        from hynea_pl.generators.dit import DiTGenerator
    except ImportError as error:
        raise SkipSize(f"hynea_pl.generators.dit.DiTGenerator is not available ({error})") from None
    from diffusers import DDIMScheduler, DiTTransformer2DModel

    torch.manual_seed(0)
    with device:
        transformer = DiTTransformer2DModel(
            num_attention_heads=16, attention_head_dim=72, in_channels=4, out_channels=8, num_layers=28,
            patch_size=2, sample_size=32, num_embeds_ada_norm=1000, norm_type="ada_norm_zero",
        )
        vae = sd_vae(256)
        sut = small_sut()
    scheduler = DDIMScheduler(beta_schedule="linear", clip_sample=False)
    build = getattr(DiTGenerator, "from_components", None)  # the constructor itself loads a checkpoint
    if build is None:
        raise SkipSize("DiTGenerator has no from_components(transformer, vae, scheduler, **settings)")
    try:
        generator = build(transformer, vae, scheduler, guidance_scale=1.5)
    except (TypeError, ValueError) as error:
        raise SkipSize(f"DiTGenerator.from_components(transformer, vae, scheduler, guidance_scale=1.5) failed: "
                       f"{error}") from None
    if not callable(getattr(generator, "make_hypernet", None)):
        raise SkipSize("DiTGenerator has no make_hypernet()")
    return Setup(generator, 207, sut, "DiT-XL/2 shapes, random weights (32x32x4 latents, learned sigma, SD VAE "
                                      "256 px, CFG 1.5, class 207)")


SIZES: dict[str, Callable[[torch.device], Setup]] = {"tiny": build_tiny, "sd15": build_sd15, "dit-xl": build_dit_xl}


# ---------------------------------------------------------------------- measurement helpers
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _param_count(module: nn.Module) -> float:
    """Parameters in millions."""
    return sum(p.numel() for p in module.parameters()) / 1e6


def _rss_reset() -> int | None:
    """Give freed heap back to the OS, reset the peak RSS, return the current RSS in bytes (Linux only)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _proc_status("VmRSS")
    except OSError:
        return None


def _proc_status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class SavedTensorMeter:
    """Sums the storage bytes of tensors autograd saves for backward (deduplicated, given parameters excluded)."""

    def __init__(self, exclude: list[nn.Module]) -> None:
        self.excluded = {t.untyped_storage().data_ptr() for m in exclude for t in [*m.parameters(), *m.buffers()]}
        self.storages: dict[int, int] = {}

    def _pack(self, tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self.excluded:
            self.storages[ptr] = storage.nbytes()
        return tensor

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)

    @property
    def bytes(self) -> int:
        return sum(self.storages.values())


def _set_channels_last(generator: DiffusionGenerator, on: bool) -> None:
    fmt = torch.channels_last if on else torch.contiguous_format
    generator.denoiser.to(memory_format=fmt)
    generator.vae.to(memory_format=fmt)
    generator.channels_last = on


def _origin(setup: Setup, steps: int) -> Tensor:
    """The un-adapted image of the stored noise for a chain length (cached)."""
    if steps not in setup.origins:
        gen = setup.generator
        gen.num_inference_steps, gen.grad_steps, gen.autocast_dtype = steps, None, None
        gen.gradient_checkpointing = False
        setup.origins[steps] = gen.sample(gen.initial_noise(0), setup.condition).float()
    return setup.origins[steps]


def measure(setup: Setup, steps: int, variant: Variant, repeats: int, device: torch.device) -> dict:
    """One row: fresh HyperNet / projector / AdamW, a warm-up step (saved activations), ``repeats`` timed steps."""
    gen, sut = setup.generator, setup.sut
    row: dict[str, Any] = {"steps": steps, "variant": variant.name, **asdict(variant)}
    row.pop("name")
    row.pop("cuda_only")
    origin = _origin(setup, steps)
    with torch.no_grad():
        origin_output = sut(origin)
    target = sut.default_target(origin_output)
    labels = sut.objective_labels(origin_output, target)  # fixed once from the origin, as HyNeACase does
    signal = sut.control_signal(origin_output, target)

    gen.num_inference_steps = steps
    gen.gradient_checkpointing = variant.gradient_checkpointing
    gen.grad_steps = variant.grad_steps
    gen.autocast_dtype = variant.autocast_dtype
    _set_channels_last(gen, variant.channels_last)
    torch.manual_seed(0)
    with device:  # built where it runs (a 360 M-parameter copy initialised on CPU would dominate a GPU row)
        hypernet = gen.make_hypernet()
        projector = ControlProjector(signal.shape[1:], gen.latent_shape)
    params = [*hypernet.parameters(), *projector.parameters()]
    optimizer = torch.optim.AdamW(params, lr=1e-4, weight_decay=1e-2)
    noise = gen.initial_noise(0)
    initial_behaviour: list[Tensor] = []
    meter = SavedTensorMeter([gen, sut, hypernet, projector])

    def forward() -> Tensor:
        images = gen(noise, setup.condition, hypernet=hypernet, control=projector(signal))
        behaviour = sut.behaviour_loss(sut(images), labels, target)
        if not initial_behaviour:
            initial_behaviour.append(behaviour.detach().clamp_min(1e-8))
        return frobenius_distance(origin, images) + behaviour / initial_behaviour[0]

    def step(measure_saved: bool = False) -> float:
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        start = time.perf_counter()
        if measure_saved:
            with meter.hooks():
                loss = forward()
        else:
            loss = forward()
        loss.backward()
        optimizer.step()
        _sync(device)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss is {loss.item()}")
        return time.perf_counter() - start

    rss_start = _rss_reset() if device.type == "cpu" else None
    try:
        row["warmup_s"] = step(measure_saved=True)
        row["saved_mb"] = meter.bytes / MB
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            row["between_steps_mb"] = torch.cuda.memory_allocated(device) / MB
            torch.cuda.reset_peak_memory_stats(device)
        times = [step() for _ in range(repeats)]
        row["s_per_step"] = statistics.median(times)
        row["times"] = times
        if device.type == "cuda":
            row["cuda_peak_mb"] = torch.cuda.max_memory_allocated(device) / MB
            row["cuda_peak_over_between_mb"] = row["cuda_peak_mb"] - row["between_steps_mb"]
        peak = _proc_status("VmHWM")
        if rss_start is not None and peak is not None:
            row["rss_peak_delta_mb"] = (peak - rss_start) / MB
    except torch.OutOfMemoryError as error:
        row["error"] = "OOM"
        row["detail"] = str(error).splitlines()[0]
    finally:
        _set_channels_last(gen, False)
        del hypernet, projector, optimizer, params
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return row


# ---------------------------------------------------------------------- report
def environment(device: torch.device, options: argparse.Namespace) -> dict:
    import diffusers

    env = {
        "device": str(device),
        "torch": torch.__version__,
        "diffusers": diffusers.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "size": options.size,
        "dtype": options.dtype,
        "repeats": options.repeats,
    }
    if hasattr(os, "getloadavg"):
        env["loadavg_1m"] = round(os.getloadavg()[0], 2)
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["gpu_memory_gb"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
    return env


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[dict], device: torch.device) -> str:
    """A fixed-width text table of the rows."""
    if device.type == "cuda":
        header = ["steps", "variant", "s/step", "warmup s", "saved MB", "peak MB", "peak+ MB", "note"]
    else:
        header = ["steps", "variant", "s/step", "warmup s", "saved MB", "RSS peak+ MB", "note"]
    lines = [header]
    for r in rows:
        cells = [str(r["steps"]), r["variant"], _fmt(r.get("s_per_step"), ".3f"), _fmt(r.get("warmup_s"), ".3f"),
                 _fmt(r.get("saved_mb"), ".1f")]
        if device.type == "cuda":
            cells += [_fmt(r.get("cuda_peak_mb"), ".0f"), _fmt(r.get("cuda_peak_over_between_mb"), ".0f")]
        else:
            cells += [_fmt(r.get("rss_peak_delta_mb"), ".0f")]
        cells.append(r.get("error", ""))
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for index, line in enumerate(lines):
        out.append("  ".join(c.ljust(w) if i in (1, len(line) - 1) else c.rjust(w)
                             for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip())
        if index == 0:
            out.append("-" * len(out[0]))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                        help="weights of the frozen denoiser and autoencoder (the HyperNet follows the denoiser)")
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 25, 50], help="chain lengths")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=None,
                        help="rows per chain length; default: plain ckpt grad5, on CUDA also ckpt+cl and (with "
                             "--dtype float32) ckpt+bf16")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per row (median reported)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads; default 1 on CPU (the tiny models gain nothing from more, and "
                             "more oversubscribe a shared machine: 6 s instead of 1 s per step measured), torch's "
                             "default otherwise")
    parser.add_argument("--json", type=Path, default=None, help="also save environment and rows to this file")
    parser.add_argument("--construct-only", action="store_true",
                        help="build the models (any device, e.g. meta), print parameter counts and stop")
    options = parser.parse_args(argv)
    device = torch.device(options.device)
    if options.threads is None and device.type == "cpu":
        options.threads = 1
    if options.threads:
        torch.set_num_threads(options.threads)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if options.variants is None:  # autocast is moot when the weights already are half precision
        options.variants = [n for n, v in VARIANTS.items() if (device.type == "cuda" or not v.cuda_only)
                            and (v.autocast_dtype is None or options.dtype == "float32")]

    env = environment(device, options)
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    start = time.perf_counter()
    try:
        setup = SIZES[options.size](device)
    except SkipSize as reason:
        print(f"skipping --size {options.size}: {reason}")
        return 0
    setup.generator.to(DTYPES[options.dtype])
    counts = {"denoiser_m": _param_count(setup.generator.denoiser), "vae_m": _param_count(setup.generator.vae),
              "sut_m": _param_count(setup.sut)}
    with device:
        hypernet = setup.generator.make_hypernet()
    counts["hypernet_m"] = _param_count(hypernet)
    del hypernet
    env.update(counts, model=setup.description, build_s=round(time.perf_counter() - start, 1))
    print(f"model: {setup.description}")
    print("parameters (M): " + ", ".join(f"{k[:-2]}={v:.2f}" for k, v in counts.items()) + f"; built in "
          f"{env['build_s']} s", flush=True)
    if options.construct_only:
        return 0

    rows = []
    for steps in options.steps:
        for name in options.variants:
            row = measure(setup, steps, VARIANTS[name], options.repeats, device)
            rows.append(row)
            print(f"  {steps:>3} steps {name:<10} {_fmt(row.get('s_per_step'), '.3f')} s/step "
                  f"{row.get('error', '')}", flush=True)
    env["total_s"] = round(time.perf_counter() - start, 1)
    print()
    if device.type == "cpu":
        print("saved MB = autograd-saved activations per step (saved_tensors_hooks, dedup by storage, params "
              "excluded; checkpointed calls' internals not held); RSS peak+ = rough process peak-RSS rise")
    else:
        print("saved MB = autograd-saved activations per step (outside checkpoints); peak MB = "
              "max_memory_allocated over the timed steps; peak+ = peak minus memory held between steps")
    print(table(rows, device))
    print(f"total {env['total_s']} s")
    if options.json is not None:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps({"environment": env, "rows": rows}, indent=2))
        print(f"saved {options.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
