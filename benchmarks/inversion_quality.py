"""Inversion quality on the zoo's held-out real digits: prints measured numbers (nothing is asserted).

    .venv/bin/python benchmarks/inversion_quality.py [--profile full] [--n 100] [--start 500]
        [--settings plain fixed5 fixed5+refine20]

For each setting of :class:`~hynea_pl.generators.inversion.DDIMInversion` (``plain``: no fixed-point step;
``fixedK``: K fixed-point iterations per step; ``+refineN``: N Adam steps on the noise) and the first ``--n``
held-out digits from ``--start`` on, every digit is inverted under its own label with the zoo's generator as
configs/mnist_real.yaml builds it, then reconstructed. Printed per setting: how often the SUT's decision on the
reconstruction equals its decision on the real digit, the median (and 10th percentile) MS-SSIM of reconstruction
to real digit, the median relative latent error, and seconds per image. The autoencoder alone (encode, decode) is
the first row: no inversion can be more faithful than it.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jsonargparse import Namespace  # noqa: E402

from hynea_pl.campaign.config import parse_config  # noqa: E402
from hynea_pl.campaign.test_images import read_test_images  # noqa: E402
from hynea_pl.generators.inversion import DDIMInversion  # noqa: E402
from hynea_pl.metrics import ms_ssim  # noqa: E402


def setting(name: str) -> DDIMInversion:
    match = re.fullmatch(r"(plain|fixed(\d+))(\+refine(\d+))?", name)
    if match is None:
        raise SystemExit(f"unknown setting {name!r}: plain, fixedK, or either with +refineN")
    return DDIMInversion(fixed_point_iterations=int(match.group(2) or 0), refine_steps=int(match.group(4) or 0))


def report(name: str, sut, real: torch.Tensor, recon: torch.Tensor, errors: list[float], seconds: float) -> None:
    with torch.no_grad():
        agree = (sut.prediction(sut(recon)) == sut.prediction(sut(real))).float().mean().item()
    scores = sorted(float(ms_ssim(recon[i:i + 1], real[i:i + 1])) for i in range(len(real)))
    error = f"{statistics.median(errors):.3f}" if errors else "-"
    print(f"{name:<20} SUT agrees {agree:.3f}  MS-SSIM median {statistics.median(scores):.3f} "
          f"p10 {scores[len(scores) // 10]:.3f}  latent error median {error}  {seconds:.2f} s/image", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="full")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--start", type=int, default=500)
    parser.add_argument("--batch", type=int, default=25, help="images inverted together")
    parser.add_argument("--settings", nargs="+", default=["plain", "fixed5"])
    options = parser.parse_args()
    parsed = parse_config(["--config", str(REPO / "configs/mnist_real.yaml"),
                           "--generator.init_args.pretrained", f"zoo://{options.profile}/ldm",
                           "--sut.init_args.weights", f"zoo://{options.profile}/sut"])
    components = parsed.parser.instantiate(Namespace(generator=parsed.config.generator, sut=parsed.config.sut))
    generator, sut = components.generator, components.sut
    test = read_test_images(f"zoo://{options.profile}/held_out?start={options.start}", (32, 32), 1)
    real = test.images[: options.n]
    labels = torch.tensor([label[0] for label in test.labels[: options.n]])
    print(f"{len(real)} held-out digits from {options.start}, generator {generator.num_inference_steps} DDIM steps, "
          f"guidance {generator.guidance_scale}, {torch.get_num_threads()} thread(s)")
    start = time.perf_counter()
    with torch.no_grad():
        recon = generator.decode(generator.encode(real))
    report("autoencoder only", sut, real, recon, [], (time.perf_counter() - start) / len(real))
    for name in options.settings:
        inversion = setting(name)
        recons, errors, seconds = [], [], 0.0
        for i in range(0, len(real), options.batch):
            result = inversion(generator, real[i:i + options.batch], labels[i:i + options.batch])
            recons.append(result.reconstruction.cpu())
            errors += result.latent_error.tolist()
            seconds += result.seconds * len(result.noise)
        report(name, sut, real, torch.cat(recons), errors, seconds / len(real))


if __name__ == "__main__":
    main()
