"""Tiny-zoo campaigns of every MNIST method with fixed seeds, and the comparison of their records with the
golden records in ``tests/golden/`` (written by the code before a refactor: a refactor must not change a record).

Regenerate the golden records (only when a change of behaviour is intended) with::

    python tests/records_regression.py --write tests/golden
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tiny_components import DIGIT_CENTROIDS, PAPER_HYNEA
from tiny_zoo import install

#: method -> (config, extra arguments); every run uses the fixed tiny zoo, classes 1 and 2, one case each (the tiny
#: StyleGAN draws 7, 8 and 9 alike for every style, so a search among them ranks rounding errors)
METHODS: dict[str, tuple[str, ...]] = {
    # 6 steps a run and a budget of 18: a case that finds nothing runs three times, each at its next target
    "hynea": ("configs/mnist.yaml", "--model.init_args.steering.model.init_args.profile", "tiny",
              "--model.init_args.acceptance.test.init_args.profile", "tiny", "--trainer.max_steps", "6",
              "--budget.max_evals", "18"),
    "hynea-paper": ("configs/mnist.yaml", *PAPER_HYNEA, "--trainer.max_steps", "8"),
    "giftbench-low-1e-4": ("configs/mnist_giftbench.yaml",),
    "giftbench-high-1e-3": ("configs/mnist_giftbench.yaml", "--model.init_args.config", "high"),
    "sinvad": ("configs/mnist_sinvad.yaml",),
    "cfg-first-flip": ("configs/mnist_cfg_firstflip.yaml",),
    "mimicry": ("configs/mnist_mimicry.yaml", "--model.init_args.population_size", "8",
                "--model.init_args.generations", "2"),
    "truncation-first-flip-fixed": ("configs/mnist_truncation.yaml",),
    "truncation-first-flip-adaptive": ("configs/mnist_truncation_adaptive.yaml",),
    "truncation-style-mix": ("configs/mnist_truncation_stylemix.yaml",),
}
GAN_CONFIGS = ("mnist_mimicry", "mnist_truncation")
#: fields that measure the machine, not the method
VOLATILE = {"runtime_s"}
#: float tolerances of the comparison: 7x the largest gaps measured between kernel paths (AVX-512, AVX2 and
#: ATEN_CPU_CAPABILITY=default with SSE4.1 oneDNN, each with 2 threads and with OMP_NUM_THREADS=1) on these records:
#: relative 2.8e-3 (a GIFTbench fitness), absolute 1.4e-5 (a distance of 1e-3)
REL, ABS = 2e-2, 2e-4
#: fields that name which of equally good candidates a search kept, when the case did not flip (its closest
#: candidate; Mimicry's genome ``alphas``): candidates whose distances tie within rounding make them differ between
#: kernel paths, so they are compared only where the case flipped (there the first flip decides them); the kept
#: result's distance and predictions are compared as floats either way
TIE_BROKEN = ("result_step", "diagnostics.alphas")


def fit_args(method: str, root: Path) -> list[str]:
    config, *extra = METHODS[method]
    generator = "zoo://tiny/stylegan" if any(name in config for name in GAN_CONFIGS) else "zoo://tiny/ldm"
    args = ["fit", "--config", config, "--generator.init_args.pretrained", generator]
    if generator.endswith("ldm"):
        args += ["--generator.init_args.num_inference_steps", "2"]
    return [*args,
            # a SUT that every pixel moves and no training made (tiny_components.DigitCentroids): the searches flip
            # it, so the records hold decisions (flips, steps, stops) that a change of rule would change
            *DIGIT_CENTROIDS,
            "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
            "--cases.classes", "[1, 2]", "--cases.n_per_class", "1", "--cases.validate_origins", "false",
            "--budget.max_evals", "60", "--output.root", str(root), "--output.name", f"mnist_{method}",
            *extra]


def run_method(method: str, root: Path, *extra: str) -> list[dict]:
    """Fit one method's tiny campaign into ``root`` (``extra``: more ``fit`` arguments) and return its records,
    volatile fields removed."""
    from hynea_pl.cli import main

    assert main([*fit_args(method, root), *extra]) == 0, f"{method}: fit failed"
    lines = (root / f"mnist_{method}" / "records.jsonl").read_text().splitlines()
    return [stable(json.loads(line)) for line in lines]


def stable(record: dict) -> dict:
    """A record without the fields that measure the machine (wall times, also inside ``diagnostics``)."""
    out = {k: v for k, v in record.items() if k not in VOLATILE}
    out["diagnostics"] = {k: v for k, v in record.get("diagnostics", {}).items()
                          if not (k.endswith("_s") or k.endswith("seconds"))}
    return out


def record_differences(expected: dict, actual: dict) -> list[str]:
    """Where record ``actual`` differs from the golden ``expected``: decisions exactly, floats within
    :data:`REL` / :data:`ABS`, :data:`TIE_BROKEN` fields only for a flipped case."""
    if not expected.get("flipped"):
        expected, actual = (without(record, TIE_BROKEN) for record in (expected, actual))
    return list(differences(expected, actual, rel=REL, abs_=ABS))


def without(record: dict, fields: tuple[str, ...]) -> dict:
    """``record`` without the dotted ``fields`` (``diagnostics.alphas``: a key of a nested dict)."""
    out = {**record, "diagnostics": dict(record.get("diagnostics", {}))}
    for field in fields:
        *parents, key = field.split(".")
        (out["diagnostics"] if parents else out).pop(key, None)
    return out


def differences(expected: object, actual: object, path: str = "", rel: float = 1e-3,
                abs_: float = 1e-4) -> Iterator[str]:
    """Each place where ``actual`` differs from ``expected``: floats within ``rel`` / ``abs_``, all else exact."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            if key not in expected or key not in actual:
                yield f"{path}.{key}: only in {'expected' if key in expected else 'actual'}"
            else:
                yield from differences(expected[key], actual[key], f"{path}.{key}", rel, abs_)
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path}: length {len(expected)} != {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            yield from differences(e, a, f"{path}[{i}]", rel, abs_)
    elif isinstance(expected, float) or isinstance(actual, float):
        if not (isinstance(expected, (int, float)) and isinstance(actual, (int, float))
                and math.isclose(expected, actual, rel_tol=rel, abs_tol=abs_)):
            yield f"{path}: {expected!r} != {actual!r}"
    elif expected != actual:
        yield f"{path}: {expected!r} != {actual!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, required=True, help="folder for <method>.jsonl golden records")
    parser.add_argument("--root", type=Path, default=None,
                        help="run folders (default: a fresh temporary folder; an existing run folder would be resumed)")
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    args = parser.parse_args(argv)
    args.write.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as cache:  # the fixed tiny zoo the tests use, never one trained here
        install(cache)
        os.environ["HYNEA_PL_CACHE"] = cache
        root = args.root or Path(cache) / "runs"
        for method in args.methods:
            records = run_method(method, root)
            lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
            (args.write / f"{method}.jsonl").write_text(lines)
            print(f"{method}: {len(records)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
