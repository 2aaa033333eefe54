"""How well the digit scenes' validity judges read real scenes: prints, for held-out real scenes (held-out digits
only), each judge's mean AUROC and its error rates at its decision rule, alone and in the shipped unanimous oracle.

    python benchmarks/scene_judges.py                 # 300 scenes, about 17 minutes on one core
    python benchmarks/scene_judges.py --scenes 100 --thresholds 0.7 0.8 0.9

Then the same judges on damaged copies of the scenes, the failure mode a validity judge exists for: each scene's
first digit erased (its box set to black) or half erased (the lower half of its box), and how often each judge
still reads that digit's class present (erased: only a wrong reading; another copy of the class elsewhere in the
scene is excluded).

"Wrongly present": absent digits (scene, class) the judge reads present, over all absent ones; a validity judge that
errs this way calls a failure valid although the digit is gone. "Wrongly absent": present digits read absent, over
all present ones; it under-counts valid failures. The judges come from configs/sections/scenes_oracle.yaml (built from
the
full zoo on first use), the window reader's threshold swept.
"""

from __future__ import annotations

import argparse
import time

import torch
import yaml
from torchmetrics.functional.classification import multilabel_auroc

from hynea_pl.campaign.config import fit_parser
from hynea_pl.suts import SUT
from hynea_pl.suts.window_reader import DigitWindowReader
from hynea_pl.zoo.mnist.data import NUM_CLASSES
from hynea_pl.zoo.profiles import get_profile
from hynea_pl.zoo.registry import BuildContext as ExtraContext
from hynea_pl.zoo.scenes.attributes import attribute_logits
from hynea_pl.zoo.scenes.data import scene_split


def shipped_judges(path: str = "configs/sections/scenes_oracle.yaml") -> tuple[SUT, DigitWindowReader]:
    """The two judges of the shipped scene oracle, instantiated from its YAML as a campaign's ``oracle`` is."""
    parser = fit_parser()
    with open(path) as file:
        oracle = parser.instantiate(parser.parse_object({"oracle": yaml.safe_load(file)}, defaults=False)).oracle
    cnn, reader = oracle.model.judges
    return cnn, reader


def error_rates(present: torch.Tensor, truth: torch.Tensor) -> tuple[float, float]:
    """(wrongly present, wrongly absent) of boolean decisions against 0/1 ``truth``, both ``(N, K)``."""
    absent, there = truth == 0, truth == 1
    return (present & absent).sum().item() / absent.sum().item(), (~present & there).sum().item() / there.sum().item()


@torch.no_grad()
def readings(cnn: SUT, reader: DigitWindowReader, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each judge's presence probabilities ``(N, K)`` of ``images (N, 1, 64, 64)``: the scene CNN's sigmoid and the
    window reader's highest window probability."""
    windows = torch.cat([reader.presence(images[i:i + 20]) for i in range(0, len(images), 20)])
    return attribute_logits(cnn, images).sigmoid(), windows


def damaged(scenes, lower_half_only: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of ``scenes.images`` with each scene's first digit erased (or the lower half of its box), and a mask
    ``(N,)`` of the scenes where that class appears only once."""
    images = scenes.images.clone()
    single = torch.zeros(len(scenes), dtype=torch.bool)
    for i, (boxes, labels) in enumerate(zip(scenes.boxes, scenes.labels, strict=True)):
        x0, y0, x1, y1 = (int(v) for v in boxes[0].tolist())
        images[i, :, (y0 + y1) // 2 if lower_half_only else y0:y1, x0:x1] = 0.0
        single[i] = int((labels == labels[0]).sum()) == 1
    return images, single


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=300)
    parser.add_argument("--seed", type=int, default=3900, help="held-out scenes are drawn from seed + 1")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.7, 0.8, 0.9, 0.95])
    options = parser.parse_args()
    _, real = scene_split(ExtraContext(get_profile("full"), {}).data, 0, options.scenes, options.seed)
    truth = real.attributes().long()
    cnn, reader = shipped_judges()
    start = time.perf_counter()
    p_cnn, p_win = readings(cnn, reader, real.images)
    seconds = (time.perf_counter() - start) / len(real)
    print(f"{len(real)} held-out real scenes, {int(truth.sum())} digits present of {truth.numel()} (scene, class) "
          f"pairs; both judges {seconds:.2f} s / scene on {torch.get_num_threads()} thread(s)")
    print(f"mean AUROC: attribute oracle {multilabel_auroc(p_cnn, truth, NUM_CLASSES).item():.4f}, "
          f"MNIST judges over windows {multilabel_auroc(p_win, truth, NUM_CLASSES).item():.4f}")
    print(f"{'judge':<44} {'wrongly present':>16} {'wrongly absent':>15}")
    fp, fn = error_rates(p_cnn > 0.5, truth)
    print(f"{'attribute oracle (p > 0.5)':<44} {fp:>16.4f} {fn:>15.4f}")
    for threshold in options.thresholds:
        fp, fn = error_rates(p_win > threshold, truth)
        print(f"{f'windows (p > {threshold})':<44} {fp:>16.4f} {fn:>15.4f}")
        fp, fn = error_rates((p_win > threshold) & (p_cnn > 0.5), truth)
        marker = "  <- shipped" if threshold == reader.threshold else ""
        print(f"{f'unanimous: attribute oracle + windows {threshold}':<44} {fp:>16.4f} {fn:>15.4f}{marker}")
    first = torch.tensor([int(labels[0]) for labels in real.labels])
    print(f"{'still reads the damaged digit':<44} {'erased':>16} {'half erased':>15}")
    rows: dict[str, list[float]] = {}
    for half in (False, True):
        images, single = damaged(real, half)
        keep = single if not half else torch.ones_like(single)
        cnn_p, win_p = readings(cnn, reader, images)
        index = torch.arange(len(images))
        cnn_on = cnn_p[index, first] > 0.5
        win_on = win_p[index, first] > reader.threshold
        for name, on in (("attribute oracle", cnn_on), (f"windows (p > {reader.threshold})", win_on),
                         ("unanimous (shipped)", cnn_on & win_on)):
            rows.setdefault(name, []).append(on[keep].float().mean().item())
    for name, (erased, half) in rows.items():
        print(f"{name:<44} {erased:>16.4f} {half:>15.4f}")


if __name__ == "__main__":
    main()
