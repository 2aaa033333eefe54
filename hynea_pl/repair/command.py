"""``python -m hynea_pl repair RUN_DIR [RUN_DIR ...] [--sut SUT.yaml] --out DIR``: fine-tune the SUT on the runs'
valid failures and, as a control, on as many real training images drawn at random; then one table of the original,
the repaired and the control model: accuracy on the real held-out images, the original's natural errors each reads
right, and a fresh HyNeA campaign against each from case seeds the failures never came from.

``DIR`` holds ``repair.json`` (the arguments), ``original/``, ``repaired/`` and ``control/`` (each a ``sut.yaml``
that ``fit --sut`` takes; the two fine-tuned ones with ``model.safetensors`` and ``training.json``), ``eval/`` (the
campaigns) and ``repair.md`` / ``repair.csv``. A second call with the same arguments reuses every model and finished
campaign, and one with other ``--eval-seeds`` adds their campaigns; any other change into the same ``DIR`` is
refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import lightning as L
import pandas as pd
import torch
import yaml
from rich.console import Console
from safetensors.torch import save_file

from hynea_pl.repair.failures import Failures, collect_failures
from hynea_pl.repair.measure import accuracy, natural_errors_read_right, predictions
from hynea_pl.repair.module import RepairModule, WeightInterpolation
from hynea_pl.campaign.config import quiet_lightning_info
from hynea_pl.progress import StepProgressBar
from hynea_pl.report.compare import to_markdown
from hynea_pl.suts import SUT

console = Console(highlight=False)
#: the table's models, in its order
MODELS = ("original", "repaired", "control")


@dataclass(frozen=True)
class RepairSettings:
    """The fine-tuning (the same for the repair and its control) and the evaluation campaigns."""

    profile: str = "full"  # the zoo profile whose real images are mixed in and measured on
    steps: int = 300  # fine-tuning steps (the learning rate anneals to 0 over them)
    # the kept model's held-out accuracy may fall this much below the original's (WeightInterpolation): half the
    # 0.1 points a repair may lose, as the held-out and the test images disagree by about that much
    tolerance: float = 0.0005
    batch_size: int = 256
    extra_per_batch: int = 32  # failures (control: real images drawn at random) in every batch
    lr: float = 3e-5  # AdamW's peak learning rate
    val_size: int = 10000  # real images the SUT never saw (the last of the method split), read by WeightInterpolation
    seed: int = 0
    eval_config: str = "configs/mnist.yaml"  # the campaign run against each model
    eval_seeds: tuple[int, ...] = (0, 7000)
    eval_args: tuple[str, ...] = ()  # more fit arguments for the campaigns, e.g. --cases.n_per_class 1
    failure_runs: tuple[str, ...] = field(default=())
    sut: dict[str, Any] = field(default_factory=dict)


#: what --sut (or the sut section of --eval-config) must hold
SUT_FILE = "an existing SUT file: a class_path and init_args, or a fit config with a sut section of them"
#: what --out must be
OUT_FOLDER = "a new or empty folder, or one holding a repair of the same arguments (other --eval-seeds add campaigns)"


def invalid(argument: str, value: Any, allowed: str, why: str = "") -> ValueError:
    """The one-line error of a bad argument, naming it, its value and the values it allows:
    ``--steps = -5: must be a positive integer (...)``, then ``; why`` when given; ``main`` prints it and exits 2."""
    return ValueError(f"{argument} = {value}: must be {allowed}" + (f"; {why}" if why else ""))


def is_integer(value: Any) -> bool:
    """``value`` is an ``int`` (a ``bool`` is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def read_yaml(argument: str, path: str, allowed: str) -> Any:
    """The YAML file ``path`` that ``argument`` names; a one-line error when it is missing or does not parse."""
    source = Path(path)
    if not source.is_file():
        raise invalid(argument, path, allowed, "no such file")
    try:
        return yaml.safe_load(source.read_text())
    except yaml.YAMLError as error:
        raise invalid(argument, path, allowed, f"not YAML: {' '.join(str(error).split())}") from None


def read_eval_config(path: str) -> dict[str, Any]:
    """The fit config ``--eval-config`` names, a YAML mapping of its sections; one line when it is not one."""
    from hynea_pl.campaign.config_files import resolve_config

    allowed = "a fit config file or a shipped config's name (a YAML mapping of sections, as fit --config takes)"
    try:
        source = resolve_config(path)
    except FileNotFoundError:
        raise invalid("--eval-config", path, allowed, "no such file or shipped config") from None
    config = read_yaml("--eval-config", str(source), allowed)
    if not isinstance(config, dict):
        raise invalid("--eval-config", path, allowed, f"it holds a {type(config).__name__}, not a mapping")
    return config


def sut_section(config: Any) -> dict[str, Any] | None:
    """``{class_path, init_args}`` of a SUT file's content (that mapping, or its ``sut`` section); ``None`` when it
    holds none."""
    config = config.get("sut", config) if isinstance(config, dict) else None
    if not isinstance(config, dict) or "class_path" not in config:
        return None
    if not isinstance(config.get("init_args") or {}, dict):
        return None
    return {"class_path": config["class_path"], "init_args": dict(config.get("init_args") or {})}


def read_sut_config(path: str | None, eval_config: str) -> dict[str, Any]:
    """A SUT's ``{class_path, init_args}``: from ``path`` (that mapping, or a file with a ``sut`` section), or the
    ``sut`` section of ``eval_config`` (the zoo's SUT for ``configs/mnist.yaml``); a one-line error naming the
    argument (``--sut``, else ``--eval-config``) when the file is missing or holds no SUT."""
    if path is None:
        config = sut_section(read_eval_config(eval_config))
        if config is None:
            raise invalid("--eval-config", eval_config, "a fit config with a sut section when --sut is not given",
                          "it holds none")
        return config
    config = sut_section(read_yaml("--sut", path, SUT_FILE))
    if config is None:
        raise invalid("--sut", path, SUT_FILE, "it holds none")
    return config


def check_numbers(settings: RepairSettings, jobs: int) -> None:
    """``--steps`` a positive integer, ``--jobs`` one of at least 1 and ``--eval-seeds`` distinct integers."""
    if not is_integer(settings.steps) or settings.steps < 1:
        raise invalid("--steps", settings.steps, "a positive integer (the fine-tuning steps at most)")
    if not is_integer(jobs) or jobs < 1:
        raise invalid("--jobs", jobs, "a positive integer (campaigns at a time)")
    seeds = settings.eval_seeds
    if not isinstance(seeds, (list, tuple)) or not all(map(is_integer, seeds)) or len(set(seeds)) != len(seeds):
        raise invalid("--eval-seeds", list(seeds) if isinstance(seeds, (list, tuple)) else seeds,
                      "distinct integers, the campaigns' case seeds (none: no campaign)")


def check_profile(profile: str) -> None:
    """``--profile`` names a registered zoo profile (built in, or built from a folder of the user's images)."""
    import hynea_pl.zoo  # noqa: F401  (registers the built-in profiles and those of the user's folders)
    from hynea_pl.zoo.profiles import get_profile, profile_names

    try:
        get_profile(profile)
    except ValueError:
        raise invalid("--profile", repr(profile), f"a zoo profile, one of {profile_names()} (one of your own "
                      "images: python -m hynea_pl zoo build --data PATH --name NAME)") from None


def check_runs(runs: Sequence[str | Path]) -> None:
    """At least one run folder, none named twice (its failures would count twice); what each holds is checked
    by :func:`collect_failures`."""
    if not runs:
        raise ValueError("RUN_DIR: give at least one run folder")
    resolved = [Path(run).resolve() for run in runs]
    twice = sorted({str(run) for run in runs if resolved.count(Path(run).resolve()) > 1})
    if twice:
        raise ValueError(f"RUN_DIR: each run folder once; {twice} given twice (its failures would count twice)")


def check_classes(original: SUT, failures: Failures, sut: str | None, eval_config: str) -> None:
    """The SUT has the class count of the runs' SUT (the one they tested), the argument it came from named."""
    classes = output_classes(original, failures.images[0])
    if classes != failures.num_classes:
        raise invalid("--sut" if sut else "--eval-config", sut or eval_config, "the SUT the runs tested",
                      f"the SUT has {classes} classes and the runs' SUT {failures.num_classes}")


def check_eval_seeds(settings: RepairSettings, failures: Failures) -> None:
    """No campaign's case seed is one the failures came from (it would evaluate the repair on its own data)."""
    clash = sorted(set(failures.seeds) & set(settings.eval_seeds))
    if clash:
        raise invalid("--eval-seeds", list(settings.eval_seeds),
                      f"integers other than the case seeds {failures.seeds} the failures came from",
                      f"case seeds {clash} gave failures and would evaluate the repair")


def build_sut(config: dict[str, Any]) -> SUT:
    """The SUT of ``{class_path, init_args}``, as ``fit`` builds it (jsonargparse)."""
    from jsonargparse import ArgumentParser

    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(SUT, "sut", required=True)
    return parser.instantiate_classes(parser.parse_object({"sut": config})).sut


def as_tensor(images: Any) -> torch.Tensor:
    """A split's images as one float tensor (a stored split is read whole)."""
    return images if isinstance(images, torch.Tensor) else images.float()


def output_classes(sut: SUT, image: torch.Tensor) -> int:
    with torch.no_grad():
        return int(sut(image[None].float()).shape[-1])


def check_out(out: Path, settings: RepairSettings) -> None:
    """Refuse, in one line and writing nothing, an ``out`` that is a file, one whose ``repair.json`` holds other
    arguments than ``settings`` but the evaluation's case seeds (more seeds add campaigns; the models and finished
    campaigns are reused), and a non-empty folder that holds no repair."""
    record = out / "repair.json"
    if out.exists() and not out.is_dir():
        raise invalid("--out", out, OUT_FOLDER, "it is a file")
    if record.is_file():
        try:
            held = json.loads(record.read_text())
        except ValueError:
            raise invalid("--out", out, OUT_FOLDER, f"{record} is not a repair's record") from None
        wanted = json.loads(json.dumps(asdict(settings)))
        if not isinstance(held, dict) or {**held, "eval_seeds": None} != {**wanted, "eval_seeds": None}:
            raise invalid("--out", out, OUT_FOLDER, f"it already holds a repair of other arguments: {record}")
    elif out.is_dir() and any(out.iterdir()):
        raise invalid("--out", out, OUT_FOLDER, "it is not empty and holds no repair")


def write_record(out: Path, settings: RepairSettings) -> None:
    """``out/repair.json``: the arguments (after :func:`check_out`)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "repair.json").write_text(json.dumps(json.loads(json.dumps(asdict(settings))), indent=2) + "\n")


def check_arguments(runs: Sequence[str | Path], out: Path, sut: str | None, jobs: int,
                    settings: RepairSettings) -> tuple[RepairSettings, Failures, SUT]:
    """Every argument checked before anything is written, trained or evaluated, the cheap checks first (the numbers,
    the profile, the files, ``out``), then the runs' failures and last the SUT (a model built); a bad one is a
    one-line ``ValueError`` naming it and the values it allows. Returns the settings with the SUT's config and the
    runs, the failures and the original SUT."""
    check_numbers(settings, jobs)
    check_profile(settings.profile)
    check_runs(runs)
    if settings.eval_seeds:  # the campaigns' config (also the SUT's source when --sut is not given)
        read_eval_config(settings.eval_config)
    settings = replace(settings, eval_seeds=tuple(settings.eval_seeds), eval_args=tuple(settings.eval_args),
                       failure_runs=tuple(str(Path(r).resolve()) for r in runs),
                       sut=read_sut_config(sut, settings.eval_config))
    check_out(out, settings)
    failures = collect_failures(list(runs))
    check_eval_seeds(settings, failures)
    original = build_sut(settings.sut)
    check_classes(original, failures, sut, settings.eval_config)
    return settings, failures, original


def write_sut_file(folder: Path, config: dict[str, Any], weights: Path | None = None) -> Path:
    """``folder/sut.yaml``: ``config`` with its ``weights`` pointing at ``weights`` when given."""
    config = {"class_path": config["class_path"], "init_args": dict(config["init_args"])}
    if weights is not None:
        config["init_args"]["weights"] = str(weights.resolve())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sut.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder / "sut.yaml"


def fine_tune(name: str, settings: RepairSettings, extra: tuple[torch.Tensor, torch.Tensor],
              real: tuple[torch.Tensor, torch.Tensor], val: tuple[torch.Tensor, torch.Tensor], folder: Path) -> Path:
    """Fine-tune a fresh copy of the SUT on ``extra`` mixed with ``real``, then move it back towards the original
    until it keeps the held-out accuracy; its weights (written last, so a killed run leaves none) and
    ``training.json`` into ``folder``; returns the weights file."""
    weights = folder / "model.safetensors"
    if weights.is_file():
        console.print(f"repair: {name}: {weights} exists, reused")
        return weights
    folder.mkdir(parents=True, exist_ok=True)
    sut = build_sut(settings.sut)
    module = RepairModule(sut, *extra, *real, *val, batch_size=settings.batch_size,
                          extra_per_batch=settings.extra_per_batch, lr=settings.lr, seed=settings.seed)
    keep = WeightInterpolation(settings.tolerance)
    L.seed_everything(settings.seed, verbose=False)
    quiet_lightning_info()
    trainer = L.Trainer(max_steps=settings.steps, max_epochs=1, limit_val_batches=0, accelerator="cpu", devices=1,
                        logger=L.pytorch.loggers.CSVLogger(folder, name="logs"), enable_checkpointing=False,
                        enable_model_summary=False,
                        callbacks=[keep, StepProgressBar(f"repair {name}", console=console)])
    console.print(f"repair: {name}: fine-tuning on {len(extra[1])} images mixed with {len(real[1])} real ones")
    with warnings.catch_warnings():  # the SUT starts in eval mode; training_step sets the mode it trains in
        warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
        trainer.fit(module)
    console.print(f"repair: {name}: kept alpha {keep.alpha:g} of the fine-tuning (held-out accuracy "
                  f"{keep.history[0][1]:.4f} before, {keep.history[-1][1]:.4f} kept)")
    (folder / "training.json").write_text(json.dumps({
        "extra_images": len(extra[1]), "steps_run": trainer.global_step, "alpha": keep.alpha,
        "held_out_accuracy": [{"alpha": a, "accuracy": acc} for a, acc in keep.history]}, indent=2) + "\n")
    partial = weights.with_suffix(".partial")
    save_file({k: v.contiguous() for k, v in sut.model.state_dict().items()}, str(partial))
    partial.replace(weights)
    return weights


def run_campaign(sut_file: Path, seed: int, out: Path, name: str, settings: RepairSettings,
                 threads: int | None = None) -> dict[str, Any]:
    """``fit --config eval_config --sut sut_file --cases.seed seed`` into ``out/name`` (resumed when started
    before; ``threads``: its torch threads, the default when ``None``); its ``summary.json``."""
    command = [sys.executable, "-m", "hynea_pl", "fit", "--config", settings.eval_config, "--sut", str(sut_file),
               "--cases.seed", str(seed), "--output.root", str(out), "--output.name", name, *settings.eval_args]
    console.print(f"repair: campaign {name}: {' '.join(command[2:])}")
    with open(out / f"{name}.log", "a") as log:
        env = dict(os.environ)
        if threads is not None:
            env |= {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    if code != 0:
        raise RuntimeError(f"the campaign {name} failed (exit {code}); see {out / f'{name}.log'}")
    return json.loads((out / name / "summary.json").read_text())


def repair(runs: Sequence[str | Path], out: str | Path, sut: str | None = None, jobs: int = 1,
           **overrides: Any) -> pd.DataFrame:
    """The whole command (module doc), its campaigns ``jobs`` at a time (one torch thread each when more than one);
    returns the table (a row per model)."""
    from hynea_pl.zoo.profiles import get_profile  # the profiles are registered by check_profile
    from hynea_pl.zoo.splits import load_splits

    out = Path(out)
    settings, failures, original = check_arguments(runs, out, sut, jobs, RepairSettings(**overrides))
    write_record(out, settings)

    splits = load_splits(get_profile(settings.profile).data)
    real = (as_tensor(splits.sut.train_images), splits.sut.train_labels)  # what the SUT was trained on
    # WeightInterpolation reads real images the SUT never saw, nor will be measured on: the method split's last ones
    unseen, size = splits.method, min(settings.val_size, len(splits.method.train_labels) // 2)
    val = (as_tensor(unseen.train_images[len(unseen.train_labels) - size:]), unseen.train_labels[-size:])
    control = torch.randperm(len(real[1]), generator=torch.Generator().manual_seed(settings.seed))[:len(failures)]
    files = {"original": write_sut_file(out / "original", settings.sut)}
    images = failures.with_channels(real[0].shape[1]).images
    for name, extra in (("repaired", (images, failures.labels)), ("control", (real[0][control], real[1][control]))):
        weights = fine_tune(name, settings, extra, real, val, out / name)
        files[name] = write_sut_file(out / name, settings.sut, weights)

    test_images, test_labels = splits.sut.test_images, splits.sut.test_labels
    read = {"original": predictions(original, test_images)}  # the two fine-tuned ones as fit loads them
    read |= {name: predictions(build_sut(yaml.safe_load(files[name].read_text())), test_images)
             for name in ("repaired", "control")}
    (out / "eval").mkdir(exist_ok=True)
    campaigns = [(name, seed) for name in MODELS for seed in settings.eval_seeds]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        summaries = dict(zip(campaigns, pool.map(
            lambda c: run_campaign(files[c[0]], c[1], out / "eval", f"{c[0]}-seed{c[1]}", settings,
                                   threads=1 if jobs > 1 else None), campaigns)))
    rows = []
    for name in MODELS:
        fixed, errors = natural_errors_read_right(read["original"], read[name], test_labels)
        row = {"model": name, "fine-tuned on": {"original": "-", "repaired": f"{len(failures)} valid failures",
                                                "control": f"{len(failures)} real images"}[name],
               "held-out accuracy": f"{accuracy(read[name], test_labels):.4f}",
               "original's natural errors read right": f"{fixed} of {errors}"}
        for seed in settings.eval_seeds:
            summary = summaries[name, seed]
            row[f"seed {seed}: cases"] = summary.get("n_cases")
            row[f"seed {seed}: flip"] = summary.get("flip_rate")
            row[f"seed {seed}: valid"] = summary.get("valid_failure_rate")
            row[f"seed {seed}: evals / valid"] = summary.get("sut_evals_per_valid_failure")
        rows.append(row)
    table = pd.DataFrame(rows)
    seeds = (f"failures from case seeds {failures.seeds} ({len(failures)} valid failures of {len(runs)} runs); "
             f"campaigns ({settings.eval_config}) from case seeds {list(settings.eval_seeds)}")
    markdown = to_markdown(table, seeds)
    (out / "repair.csv").write_text(table.to_csv(index=False))
    (out / "repair.md").write_text(markdown)
    console.print(markdown)
    return table


__all__ = ["MODELS", "RepairSettings", "build_sut", "check_arguments", "read_sut_config", "repair"]
