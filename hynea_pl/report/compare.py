"""Compare methods: one row per run folder, scored by the shared metric module (``evaluate_run``).

``python -m hynea_pl compare runs/A runs/B ...`` prints the table and writes ``compare.md`` and ``compare.csv``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from torch import Tensor

import yaml

from hynea_pl.metrics.rescore import evaluate_run
from hynea_pl.schema import read_records

#: Table columns (metric keys of ``evaluate_run``), in order.
COLUMNS = ("method", "n_cases", "flip_rate", "misclassification_rate", "valid_failure_rate", "semantic_change_rate", "ambiguous_rate",
           "target_reached_rate", "escape_ratio", "median_sut_evals", "mean_sut_evals_all",
           "sut_evals_per_valid_failure", "mean_runtime_s", "runtime_s_per_valid_failure", "median_ms_ssim",
           "fid", "kid_mean", "fid_valid_failures", "kid_mean_valid_failures", "n_realism_valid_failures",
           "diversity", "trace_difference")
REFERENCE_METHOD = "hynea"


def _value(entry: Any) -> Any:
    """A metric value; unavailable metrics (``{"value": None, "unavailable": reason}``) become ``None``."""
    return entry.get("value") if isinstance(entry, dict) else entry


def run_zoo_profile(run_dir: Path | str) -> str | None:
    """The zoo profile a run's generator came from (its ``config.yaml``), ``None`` for any other generator."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        return None
    config = yaml.safe_load(path.read_text()) or {}
    pretrained = str(((config.get("generator") or {}).get("init_args") or {}).get("pretrained") or "")
    return pretrained.removeprefix("zoo://").split("/")[0] if pretrained.startswith("zoo://") else None


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

    from hynea_pl.zoo.realism import held_out_digits, zoo_realism_features

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


def origin_mismatches(run_dirs: Sequence[Path]) -> list[str]:
    """Cases whose origin (seed, class) differs between runs; ``[]`` when every run started from the same origins.

    Only cases present in several runs are compared (a run may select fewer cases)."""
    seen: dict[str, tuple[Any, Any, str]] = {}
    problems = []
    for run_dir in run_dirs:
        for record in read_records(Path(run_dir) / "records.jsonl"):
            key = (record.seed, record.origin_class)
            first = seen.setdefault(record.case_id, (*key, str(run_dir)))
            if first[:2] != key:
                problems.append(f"{record.case_id}: seed/class {first[:2]} in {first[2]} but {key} in {run_dir}")
    return problems


def compare_runs(run_dirs: Sequence[Path | str], embedder: Callable[[Tensor], Tensor] | str | None = "auto",
                 reference: str = REFERENCE_METHOD, lpips_weights: str | None = None) -> pd.DataFrame:
    """One row per run (``evaluate_run`` re-scores each and writes its ``metrics.json``).

    ``embedder``: a callable, or a name for :func:`load_embedder` (default ``auto``: each run's own).
    ``hynea_eval_ratio`` = the reference method's mean SUT evaluations per case over *all* cases divided by the
    row's (cases that never flip count with what they spent, so a method that rarely flips is not flattered by
    a median over its few flips). It is empty when no run is the reference method.
    """
    rows = []
    loaded: dict[str, Any] = {}
    for run_dir in run_dirs:
        run_embedder = embedder
        if isinstance(embedder, str) and embedder != "resnet50":  # a name: resolve it per run, load each once
            name = run_embedder_name(run_dir) if embedder == "auto" else embedder
            if name not in loaded:
                loaded[name] = load_embedder(name)
            run_embedder = loaded[name]
        features, real_images = run_realism_inputs(run_dir)
        metrics = evaluate_run(run_dir, embedder=run_embedder, lpips_weights=lpips_weights,
                               realism_features=features, realism_reference=real_images)
        row = {key: _value(metrics.get(key)) for key in COLUMNS}
        row["run"] = str(run_dir)
        rows.append(row)
    table = pd.DataFrame(rows, columns=[*COLUMNS, "run"])
    ref = table.loc[table["method"] == reference, "mean_sut_evals_all"]  # flips or not: what each case spent
    if len(ref) == 1 and ref.iloc[0]:
        table.insert(len(COLUMNS), "hynea_eval_ratio", float(ref.iloc[0]) / table["mean_sut_evals_all"])
    else:
        table.insert(len(COLUMNS), "hynea_eval_ratio", None)
    return table


def display_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Column names and formatted cells (3 significant digits, ``-`` for missing) of the shown columns."""
    shown = table.drop(columns=["run"])
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
    """Write ``compare.md`` and ``compare.csv`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    markdown, csv = out / "compare.md", out / "compare.csv"
    markdown.write_text(to_markdown(table, note))
    table.to_csv(csv, index=False)
    return markdown, csv
