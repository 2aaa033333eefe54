"""A third-party MNIST classifier trained on 28 px digits, tested on the zoo's 32 px images two ways: read through
its own centre crop (a ``torchvision.transforms.v2`` pipeline in the SUT's ``preprocess``), and through a resize
to 28 px (the preprocessing mismatch a dict-only ``preprocess`` forced). Prints, per way, the campaign's flips and
stability, and how many of its failures still fail when the saved PNG is read the way the model was trained (its
crop). Nothing is asserted.

    .venv/bin/python benchmarks/third_party_crop.py [--cases-seed 0] [--per-class 1] [--out runs/third_party]

The model is the tests' third-party classifier (``tests/third_party_mnist.py``: ``Digit28CNN``, trained for two
epochs on the zoo's training digits cropped to 28 px, MNIST mean / std). HyNeA runs as in ``configs/mnist.yaml``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the third-party model lives with the tests that use it

from third_party_mnist import MNIST_MEAN, MNIST_STD, Digit28CNN, crop28, train_digit28  # noqa: E402

from hynea_pl.campaign.config import parse_config  # noqa: E402
from hynea_pl.cli import main  # noqa: E402
from hynea_pl.images import load_image  # noqa: E402

#: the two ways to read the zoo's 32 px image: the model's own crop, and a resize to its 28 px
PREPROCESS = {
    "centre-crop": [{"class_path": "torchvision.transforms.v2.CenterCrop", "init_args": {"size": 28}}],
    "resize": [{"class_path": "torchvision.transforms.v2.Resize", "init_args": {"size": 28, "antialias": True}}],
}


def sut_section(weights: Path, way: str) -> dict:
    normalize = {"class_path": "torchvision.transforms.v2.Normalize",
                 "init_args": {"mean": [MNIST_MEAN], "std": [MNIST_STD]}}
    pipeline = {"class_path": "torchvision.transforms.v2.Compose",
                "init_args": {"transforms": [*PREPROCESS[way], normalize]}}
    return {"class_path": "hynea_pl.suts.ClassifierSUT",
            "init_args": {"model": {"class_path": "third_party_mnist.Digit28CNN"}, "weights": str(weights),
                          "preprocess": pipeline}}


def held_on_own_crop(run: Path, model: Digit28CNN) -> tuple[int, int]:
    """(failures that still fail when the saved PNG is read through the model's crop, failures)."""
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    flipped = [r for r in records if r["flipped"]]
    held = 0
    for record in flipped:
        image = load_image(run / record["result_image"])[:1][None]  # the PNG is written as RGB
        with torch.no_grad():
            held += int(model(crop28(image)).argmax(-1)) != record["origin_label"]
    return held, len(flipped)


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-seed", type=int, default=0)
    parser.add_argument("--per-class", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/third_party"))
    options = parser.parse_args(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    weights, accuracy = train_digit28(options.out / "digit28.pt")
    print(f"third-party 28 px model: held-out accuracy {accuracy:.3f} on its own crop")
    model = Digit28CNN()
    model.load_state_dict(torch.load(weights))
    model.eval()
    rows = []
    for way in PREPROCESS:
        config = yaml.safe_load(parse_config(["--config", str(REPO / "configs" / "mnist.yaml")]).dump())
        config["sut"] = sut_section(weights, way)
        path = options.out / f"{way}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        name = f"third_party_{way}"
        code = main(["fit", "--config", str(path), "--cases.seed", str(options.cases_seed),
                     "--cases.n_per_class", str(options.per_class), "--output.root", str(options.out),
                     "--output.name", name])
        summary = json.loads((options.out / name / "summary.json").read_text())
        held, flipped = held_on_own_crop(options.out / name, model)
        rows.append((way, code, summary, held, flipped))
    print("| SUT reads the image by | cases | flip | valid | stable flip | median evals (flipped) | failures that "
          "hold on the model's own crop |")
    print("|---|---|---|---|---|---|---|")
    for way, code, s, held, flipped in rows:
        print(f"| {way} | {s['n_cases']} | {s['flip_rate']:.2f} | {s['valid_failure_rate']:.2f} | "
              f"{s['stable_flip_rate'] if s['stable_flip_rate'] is None else round(s['stable_flip_rate'], 2)} | "
              f"{s['median_sut_evals_flipped']} | {held} / {flipped} |" + ("" if code == 0 else f" (exit {code})"))
    return 0


if __name__ == "__main__":
    sys.exit(main_())
