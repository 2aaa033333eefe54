"""Compare methods: one row per run folder, scored by the evaluation layer (``evaluate_run``; ``report`` reuses a
run's ``metrics.json``).

``python -m hynea_pl compare runs/A runs/B ...`` prints the table and writes ``compare.md`` and ``compare.csv``.

Origins: two runs start from identical origin images only when the case has the same (seed, class) *and* the same
generator samples it (each run's ``config.yaml``: class path, ``pretrained`` and the sampling settings). The
GAN-based methods (truncation probes, Mimicry: ``StyleGANGenerator``) start from the GAN's image of the seed, not
the LDM's: ``compare`` says so (the ``origins`` column, the origin warning and the note of ``compare.md``) and
never calls such origins identical.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from torch import Tensor

from hynea_pl.evaluation.rescore import evaluate_run, read_metrics
from hynea_pl.schema import read_records
from hynea_pl.verdicts import RATE_KEYS, STABLE_FAILURE_RATE, STABLE_FLIP_RATE

#: Table columns (metric keys of ``evaluate_run``), in order; each cost column names the cases it averages
#: (``*_flipped``: flipped cases, ``*_all``: every case, ``*_per_valid_failure``: all cases' cost / valid failures).
COLUMNS = ("method", "n_cases", "flip_rate", "misclassification_rate", *RATE_KEYS.values(), STABLE_FLIP_RATE,
           STABLE_FAILURE_RATE, "realism_pass_origins",
           "realism_pass_results", "target_reached_rate", "escape_ratio", "confidence_reduction",
           "median_sut_evals_flipped", "mean_sut_evals_all", "sut_evals_per_valid_failure",
           "sut_evals_per_stable_failure", "ended_before_budget_rate",
           "mean_runtime_s", "runtime_s_per_valid_failure", "median_ms_ssim",
           "fid", "kid_mean", "fid_valid_failures", "kid_mean_valid_failures", "n_realism_valid_failures",
           "diversity", "trace_difference")
REFERENCE_METHOD = "hynea"
#: Generator settings that never change a sampled image (gradients and memory only): ignored when comparing origins.
GRADIENT_ONLY_SETTINGS = frozenset({"gradient_checkpointing", "grad_steps"})
DIFFERENT_GENERATOR = "same (seed, class), different generator: origins are not identical images"
UNKNOWN_GENERATOR = ("same (seed, class), generator not recorded (no config.yaml): origins are not known to be "
                     "identical")


def metric_value(entry: Any) -> Any:
    """A metric value; unavailable metrics (``{"value": None, "unavailable": reason}``) become ``None``."""
    return entry.get("value") if isinstance(entry, dict) else entry



def run_config(run_dir: Path | str) -> dict[str, Any] | None:
    """A run's saved ``config.yaml`` as a mapping; ``None`` without the file. The one reader of a run's config."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        return None
    config = yaml.safe_load(path.read_text()) or {}
    return config if isinstance(config, dict) else {}


def run_config_section(run_dir: Path | str, name: str) -> dict[str, Any] | None:
    """Section ``name`` (``generator``, ``model``, ...) of a run's ``config.yaml`` (:func:`run_config`) as
    ``{"class_path", "init_args"}``; ``None`` without the file."""
    config = run_config(run_dir)
    if config is None:
        return None
    section = config.get(name) or {}
    return {"class_path": section.get("class_path"), "init_args": dict(section.get("init_args") or {})}


def run_generator(run_dir: Path | str) -> dict[str, Any] | None:
    """The ``generator`` section of a run's ``config.yaml`` (:func:`run_config_section`)."""
    return run_config_section(run_dir, "generator")


def run_zoo_profile(run_dir: Path | str) -> str | None:
    """The zoo profile a run's digit generator came from (its ``config.yaml``), ``None`` for any other generator
    (a real model, or a zoo scene generator: the digit zoo's embedder and held-out digits do not fit scenes)."""
    from hynea_pl.zoo.scenes import SCENE_COMPONENTS

    pretrained = str(((run_generator(run_dir) or {}).get("init_args") or {}).get("pretrained") or "")
    if not pretrained.startswith("zoo://"):
        return None
    profile, _, component = pretrained.removeprefix("zoo://").partition("/")
    return None if component.strip("/") in SCENE_COMPONENTS else profile


def run_embedder_name(run_dir: Path | str) -> str:
    """The embedder that fits a run: ``zoo://<profile>`` when its generator is a zoo model (the MNIST zoo's
    embedder), else ``resnet50`` (ImageNet features from the torch cache; unavailable, never downloaded or random,
    when the weights are missing); ``none`` for a run without its config."""
    if not (Path(run_dir) / "config.yaml").is_file():
        return "none"
    profile = run_zoo_profile(run_dir)
    return f"zoo://{profile}" if profile else "resnet50"


def run_realism_inputs(run_dir: Path | str) -> tuple[str | Callable[[], Any], Any]:
    """Features and real reference images for a run's FID / KID: the zoo embedder and the zoo's 1000 held-out
    digits for a zoo run; Inception features and no reference otherwise (reported unavailable: a real setup
    needs its own reference images, ``evaluate_run(..., realism_reference=...)``)."""
    profile = run_zoo_profile(run_dir)
    if profile is None:
        return "inception", None
    from functools import partial

    from hynea_pl.zoo.labelled.realism import held_out_digits, zoo_realism_features

    return partial(zoo_realism_features, profile), held_out_digits(profile)


def load_embedder(name: str, run_dir: Path | str | None = None) -> Callable[[Tensor], Tensor] | str | None:
    """The embedding network for diversity / trace difference: ``auto`` (:func:`run_embedder_name` of
    ``run_dir``), ``zoo://<profile>`` (the MNIST zoo's embedder), ``resnet50`` (ImageNet ResNet-50 from the torch
    cache, resolved by ``evaluate_run``) or ``none``."""
    if name == "auto":
        name = run_embedder_name(run_dir) if run_dir is not None else "none"
    if name.startswith("zoo://"):
        from hynea_pl.zoo import load_zoo

        return load_zoo(name.removeprefix("zoo://").strip("/")).embedder()
    return None if name == "none" else name


def _origin_key(generator: dict[str, Any] | None, run_dir: str) -> str:
    """What fixes a run's origin images besides (seed, class): the generator's class and every setting that can
    change a sampled image. A run without ``config.yaml`` gets a key of its own (never assumed identical)."""
    if generator is None:
        return f"unknown:{run_dir}"
    settings = {k: v for k, v in generator["init_args"].items() if k not in GRADIENT_ONLY_SETTINGS}
    return json.dumps({"class_path": generator["class_path"], "init_args": settings}, sort_keys=True, default=str)


def origin_generators(run_dirs: Sequence[Path | str]) -> dict[str, tuple[str, str]]:
    """``{run: (origin key, label)}``: runs with equal keys sample identical origin images for a (seed, class).
    The label is the generator's class and ``pretrained`` (``ClassConditionalLDM(zoo://full/ldm)``), plus the
    settings that tell apart two generators of one label (``[guidance_scale=5.0]``)."""
    generators = {str(run): run_generator(run) for run in run_dirs}
    keys = {run: _origin_key(generator, run) for run, generator in generators.items()}
    base: dict[str, str] = {}
    for run, generator in generators.items():
        if generator is None:
            base[run] = f"unknown generator (no config.yaml in {run})"
            continue
        name = str(generator["class_path"]).rsplit(".", 1)[-1]
        pretrained = generator["init_args"].get("pretrained")
        base[run] = f"{name}({pretrained})" if pretrained else name
    labels = {}
    for run, generator in generators.items():
        twins = [generators[o] for o in generators if base[o] == base[run] and keys[o] != keys[run]]
        own = (generator or {}).get("init_args") or {}
        differing = sorted({k for twin in twins for k in {*own, *twin["init_args"]}
                            if k not in GRADIENT_ONLY_SETTINGS and own.get(k) != twin["init_args"].get(k)})
        extra = f" [{', '.join(f'{k}={own.get(k)}' for k in differing)}]" if differing else ""
        labels[run] = (keys[run], base[run] + extra)
    return labels


def origin_groups(run_dirs: Sequence[Path | str]) -> list[tuple[str, list[str]]]:
    """Runs grouped by the generator that samples their origins, in order: ``[(label, [run, ...]), ...]``. Runs of
    one group start from identical origin images for a (seed, class); runs of different groups do not."""
    groups: dict[str, tuple[str, list[str]]] = {}
    for run, (key, label) in origin_generators(run_dirs).items():
        groups.setdefault(key, (label, []))[1].append(run)
    return list(groups.values())


def origin_statement(run_dirs: Sequence[Path | str]) -> str:
    """Which runs share their origin images and which do not (markdown; for ``compare.md``)."""
    groups = origin_groups(run_dirs)
    if len(groups) <= 1:
        label = groups[0][0] if groups else "-"
        return f"Origin images: every run samples them with the same generator, {label}."
    lines = [f"Origin images by generator: the runs of one group share their origin images (for the same (seed, "
             f"class)); across groups: {DIFFERENT_GENERATOR}."]
    lines += [f"- {label}: {', '.join(runs)}" for label, runs in groups]
    return "\n".join(lines)


def origin_mismatches(run_dirs: Sequence[Path]) -> list[str]:
    """Cases whose origin differs between runs: another (seed, class), or the same (seed, class) sampled by another
    generator (a GAN-based method starts from the GAN's image of the seed, not the LDM's); ``[]`` when every run
    started from identical origin images.

    Only cases present in several runs are compared (a run may select fewer cases)."""
    generators = origin_generators(run_dirs)
    seen: dict[str, tuple[tuple[Any, Any], str, str, str]] = {}
    problems = []
    for run_dir in run_dirs:
        key, label = generators[str(run_dir)]
        for record in read_records(Path(run_dir) / "records.jsonl"):
            coords = (record.seed, record.origin_class)
            first = seen.setdefault(record.case_id, (coords, key, label, str(run_dir)))
            if first[0] != coords:
                problems.append(f"{record.case_id}: seed/class {first[0]} in {first[3]} but {coords} in {run_dir}")
            elif first[1] != key:
                unknown = first[1].startswith("unknown:") or key.startswith("unknown:")
                why = UNKNOWN_GENERATOR if unknown else DIFFERENT_GENERATOR
                problems.append(f"{record.case_id}: {why} ({first[3]}: {first[2]}; {run_dir}: {label})")
    return problems


def origins_note(run_dirs: Sequence[Path]) -> str:
    """One line: every run started from identical origins, or a warning naming the first case that did not."""
    mismatches = origin_mismatches(run_dirs)
    return ("Origins: identical in every run (same case ids, seeds and classes)." if not mismatches else
            f"WARNING: {len(mismatches)} case(s) started from different origins, e.g. {mismatches[0]}")


def compare_runs(run_dirs: Sequence[Path | str], embedder: Callable[[Tensor], Tensor] | str | None = "auto",
                 reference: str = REFERENCE_METHOD, lpips_weights: str | None = None,
                 rescore: bool = True) -> pd.DataFrame:
    """One row per run (``evaluate_run`` re-scores each and writes its ``metrics.json``).

    ``rescore=False``: a run's existing ``metrics.json`` is used as it is (:func:`hynea_pl.evaluation.read_metrics`;
    only a run without one, or whose records changed after it was written, is scored and written).
    ``embedder``: a callable, or a name for :func:`load_embedder` (default ``auto``: each run's own).
    ``hynea_eval_ratio`` = the reference method's mean SUT evaluations per case over *all* cases divided by the
    row's (cases that never flip count with what they spent, so a method that rarely flips is not flattered by
    a median over its few flips). It is empty when no run is the reference method. ``origins`` (second column):
    the generator that sampled the run's origins (:func:`origin_generators`); rows with different ones did not
    start from identical origin images.
    """
    rows = []
    loaded: dict[str, Any] = {}
    for run_dir in run_dirs:
        metrics = None if rescore else read_metrics(run_dir)
        if metrics is None:
            metrics = _score(run_dir, embedder, loaded, lpips_weights)
        row = {key: metric_value(metrics.get(key)) for key in COLUMNS}
        row["run"] = str(run_dir)
        rows.append(row)
    table = pd.DataFrame(rows, columns=[*COLUMNS, "run"])
    ref = table.loc[table["method"] == reference, "mean_sut_evals_all"]  # flips or not: what each case spent
    if len(ref) == 1 and ref.iloc[0]:
        table.insert(len(COLUMNS), "hynea_eval_ratio", float(ref.iloc[0]) / table["mean_sut_evals_all"])
    else:
        table.insert(len(COLUMNS), "hynea_eval_ratio", None)
    generators = origin_generators(run_dirs)
    table.insert(1, "origins", [generators[str(run)][1] for run in run_dirs])  # one generator = one set of origins
    return table


def _score(run_dir: Path | str, embedder: Callable[[Tensor], Tensor] | str | None, loaded: dict[str, Any],
           lpips_weights: str | None) -> dict[str, Any]:
    """``evaluate_run`` of one run with its embedder (a name resolved per run, each loaded once into ``loaded``)
    and its realism inputs; writes the run's ``metrics.json``."""
    run_embedder = embedder
    if isinstance(embedder, str) and embedder != "resnet50":  # a name: resolve it per run, load each once
        name = run_embedder_name(run_dir) if embedder == "auto" else embedder
        if name not in loaded:
            loaded[name] = load_embedder(name)
        run_embedder = loaded[name]
    features, real_images = run_realism_inputs(run_dir)
    return evaluate_run(run_dir, embedder=run_embedder, lpips_weights=lpips_weights,
                        realism_features=features, realism_reference=real_images)


def display_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Column names and formatted cells (3 significant digits, ``-`` for missing) of the shown columns."""
    shown = table.drop(columns=["run"], errors="ignore")
    return list(shown.columns), [[format_value(v) for v in row] for _, row in shown.iterrows()]


def to_markdown(table: pd.DataFrame, note: str = "") -> str:
    """The table as GitHub markdown, with an optional note below it."""
    columns, rows = display_rows(table)
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + ("\n\n" + note if note else "") + "\n"


def format_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def write_comparison(table: pd.DataFrame, out_dir: Path | str, note: str = "") -> tuple[Path, Path]:
    """Write ``compare.md`` (the table, ``note`` and :func:`origin_statement` of the table's runs) and
    ``compare.csv`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    markdown, csv = out / "compare.md", out / "compare.csv"
    origins = origin_statement(list(table["run"])) if "run" in table and len(table) else ""
    markdown.write_text(to_markdown(table, "\n\n".join(part for part in (note, origins) if part)))
    table.to_csv(csv, index=False)
    return markdown, csv
