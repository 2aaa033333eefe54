"""Human ratings (paper RQ3): the items the ``rate`` page shows, the ratings file it appends to, Tables 3 and 4.

An *item* is one flipped result image of a run: ``<run folder name>/<case_id>``. The page asks, for its origin's
class, "Is this a <class name>?" (``yes`` / ``no`` / ``unsure``) and the image's realism on 1-5, and appends one
:class:`Rating` per answer to a JSON-lines file (``ratings.jsonl``), flushed and fsync'd before the next image.

:func:`rq3_tables` joins the ratings with the runs' records (the method and class of each item) and computes, with
the one statistics module :mod:`hynea_pl.metrics.functional.stats`:

- ``table3`` (paper Table 3), a row per method: label preservation (share of ``yes``) and its SD, realism mean and
  SD on the 1-5 scale and normalised to 0-1 (``(r - 1) / 4``, the paper's scale), ambiguity (share of
  ``unsure``), and the numbers of ratings, items and raters;
- ``table4`` (paper Table 4), a row per baseline against HyNeA: Wilcoxon signed-rank p-value and Cohen's d (pooled
  SD) for label preservation and realism, on paired units (see :data:`PAIRING`);
- ``kappa``: Fleiss' kappa of the yes / no / unsure answers over the items rated by at least two raters.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hynea_pl.jsonl import drop_torn_tail
from hynea_pl.schema import read_records

RATINGS_FILE = "ratings.jsonl"
Answer = Literal["yes", "no", "unsure"]
#: The answers to "Is this a <class>?", in the category order of the kappa table.
ANSWERS: tuple[str, ...] = ("yes", "no", "unsure")
#: The realism scale (paper 4.5: 1-5).
REALISM_LABELS = {1: "very unrealistic", 2: "unrealistic", 3: "neither", 4: "realistic", 5: "perfectly realistic"}
#: How Table 4 pairs HyNeA with a baseline.
PAIRING = ("pairs are (rater, origin class) units that rated both HyNeA and the baseline in that class; each side "
           "is the mean over that rater's ratings of that method's items of that class (one image per class and "
           "method, as in the paper's survey, makes a unit one rating). Wilcoxon signed-rank (two-sided) on the "
           "pairs; Cohen's d with the pooled SD of the two paired samples")


class Rating(BaseModel):
    """One rater's answers on one item (one line of the ratings file)."""

    model_config = ConfigDict(extra="forbid")

    rater: str = Field(min_length=1, description="the rater's name")
    item: str = Field(description="<run folder name>/<case_id>")
    run: str = Field(description="the run folder's name")
    case_id: str
    origin_class: int = Field(description="the class the question asked about (the origin's class)")
    question: str = Field(description="the question as shown")
    answer: Answer = Field(description="yes / no / unsure")
    realism: int = Field(ge=1, le=5, description="1 (very unrealistic) to 5 (perfectly realistic)")
    time: str = Field(description="when the answer was saved, ISO 8601 UTC")


def item_id(run: str, case_id: str) -> str:
    """An item's id: ``<run folder name>/<case_id>``."""
    return f"{run}/{case_id}"


def run_name(run_dir: Path | str) -> str:
    """A run's name in item ids: its folder's name."""
    return Path(run_dir).resolve().name


def _unique_names(run_dirs: Sequence[Path | str], strict: bool = True) -> list[tuple[str, Path]]:
    """``(name, folder)`` per run; two folders of one name are an error (``strict``), else the first is kept."""
    named = [(run_name(d), Path(d)) for d in run_dirs]
    names = [name for name, _ in named]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        message = f"run folders must have distinct names (item ids are <run>/<case_id>): {duplicates}"
        if strict:
            raise ValueError(message)
        warnings.warn(f"{message}; the ratings are matched to the first folder of each name", stacklevel=3)
        named = [(name, path) for i, (name, path) in enumerate(named) if name not in names[:i]]
    for _, path in named:
        if not (path / "records.jsonl").is_file():
            raise FileNotFoundError(f"no records.jsonl in {path}")
    return named


# --- class names ---------------------------------------------------------------------------------------------


def load_class_names(path: Path | str) -> dict[int, str]:
    """Class names from a file: a JSON list (index = class), a JSON object ``{"3": "three"}``, or text with one name
    per line."""
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix.lower() == ".json":
        data = json.loads(text)
        items = enumerate(data) if isinstance(data, list) else data.items()
        return {int(k): str(v) for k, v in items}
    return dict(enumerate(line.strip() for line in text.splitlines() if line.strip()))


def run_class_names(run_dir: Path | str) -> Callable[[int], str]:
    """The class names of a run's SUT (its ``config.yaml``): ``digit <i>`` for a SUT with zoo weights (the MNIST
    zoo), torchvision's category names for a :class:`hynea_pl.suts.PretrainedClassifierSUT` of a torchvision model,
    else ``class <i>``."""
    path = Path(run_dir) / "config.yaml"
    sut = ((yaml.safe_load(path.read_text()) or {}).get("sut") or {}) if path.is_file() else {}
    init_args = sut.get("init_args") or {}
    if str(init_args.get("weights") or "").startswith("zoo://"):
        return lambda index: f"digit {index}"
    if str(sut.get("class_path", "")).endswith("PretrainedClassifierSUT"):
        try:
            import torchvision

            categories = torchvision.models.get_model_weights(init_args.get("name")).DEFAULT.meta["categories"]
            return lambda index: categories[index] if 0 <= index < len(categories) else f"class {index}"
        except (ValueError, KeyError, AttributeError, TypeError):
            pass
    return lambda index: f"class {index}"


def question_for(class_name: str) -> str:
    """``Is this a <class name>?`` (``an`` before a vowel)."""
    article = "an" if class_name[:1].lower() in "aeiou" else "a"
    return f"Is this {article} {class_name}?"


# --- items -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RatingItem:
    """A flipped result image to rate. ``method`` stays on the server: the page never shows it."""

    item: str
    run: str
    case_id: str
    method: str
    origin_class: int
    class_name: str
    image: Path

    @property
    def token(self) -> str:
        """An opaque id for the page and the image URL (the run's name may name the method)."""
        return hashlib.sha256(self.item.encode()).hexdigest()[:16]

    @property
    def question(self) -> str:
        return question_for(self.class_name)


def rating_items(run_dirs: Sequence[Path | str], class_names: Mapping[int, str] | None = None) -> list[RatingItem]:
    """Every flipped result of the runs (cases that ran without error, have a class and a result PNG), sorted by
    item id. ``class_names`` overrides the names read from each run's config."""
    items = []
    for name, run_dir in _unique_names(run_dirs):
        names = run_class_names(run_dir)
        for record in read_records(run_dir / "records.jsonl"):
            if not (record.is_case and record.ok and record.flipped and record.result_image
                    and record.origin_class is not None and (run_dir / record.result_image).is_file()):
                continue
            cls = record.origin_class
            label = (class_names or {}).get(cls) or names(cls)
            items.append(RatingItem(item_id(name, record.case_id), name, record.case_id, record.method, cls, label,
                                    run_dir / record.result_image))
    return sorted(items, key=lambda i: i.item)


def rater_order(items: Iterable[RatingItem], rater: str, seed: int = 0) -> list[RatingItem]:
    """The rater's order of the items: sorted by id, then shuffled by a generator seeded with ``seed`` and the
    rater's name (the same every time, different per rater, whatever the order of the run folders)."""
    ordered = sorted(items, key=lambda i: i.item)
    random.Random(f"{seed}/{rater}").shuffle(ordered)
    return ordered


# --- the ratings file -----------------------------------------------------------------------------------------


def default_ratings_path(run_dirs: Sequence[Path | str]) -> Path:
    """``ratings.jsonl`` in the first run folder's parent (beside the run folders)."""
    return Path(run_dirs[0]).parent / RATINGS_FILE


def read_ratings(path: Path | str) -> list[Rating]:
    """Every rating of a ratings file; an unterminated last line that does not parse (a write that was killed) is
    skipped with a warning, any other bad line is a one-line ``ValueError`` naming the file and line."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    ratings = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ratings.append(Rating.model_validate_json(line))
        except ValidationError as error:
            if number == len(lines) and not text.endswith("\n"):
                warnings.warn(f"{path}:{number}: skipped a torn last line (a write that was killed)", stacklevel=2)
                break
            first = error.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "<rating>"
            raise ValueError(f"{path}:{number}: field '{field}': {first['msg']}") from None
    return ratings


class RatingsFile:
    """The ratings file of a ``rate`` server: answers appended one line each, flushed and fsync'd before
    :meth:`append` returns, so a closed browser or a killed server loses nothing; one answer per rater and item
    (a second one, e.g. a resubmitted form, is not written). Thread-safe."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        drop_torn_tail(self.path, "that answer is asked again")
        self._lock = threading.Lock()
        self._rated: dict[str, set[str]] = {}
        for rating in read_ratings(self.path) if self.path.exists() else []:
            self._rated.setdefault(rating.rater, set()).add(rating.item)

    def rated_by(self, rater: str) -> set[str]:
        """The item ids this rater has answered."""
        with self._lock:
            return set(self._rated.get(rater, ()))

    def append(self, rating: Rating) -> bool:
        """Write one rating (fsync'd); ``False`` (nothing written) when the rater already answered the item."""
        with self._lock:
            rated = self._rated.setdefault(rating.rater, set())
            if rating.item in rated:
                return False
            with self.path.open("a", encoding="utf-8") as stream:
                stream.write(rating.model_dump_json() + "\n")
                stream.flush()
                os.fsync(stream.fileno())
            rated.add(rating.item)
            return True


def now_utc() -> str:
    """The current time, ISO 8601 UTC (sortable)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# --- RQ3 tables ------------------------------------------------------------------------------------------------


def _ratings_frame(ratings_path: Path, run_dirs: Sequence[Path | str]) -> tuple[pd.DataFrame, int]:
    """The ratings of the runs' items with their method and class (first answer per rater and item, file order);
    and the number of ratings left out (items of other runs, repeated answers)."""
    cases = {}
    for name, run_dir in _unique_names(run_dirs, strict=False):
        for record in read_records(run_dir / "records.jsonl"):
            cases[item_id(name, record.case_id)] = (record.method, record.origin_class)
    rows, seen = [], set()
    ratings = read_ratings(ratings_path)
    for order, rating in enumerate(ratings):
        if rating.item not in cases or (rating.rater, rating.item) in seen:
            continue
        seen.add((rating.rater, rating.item))
        method, cls = cases[rating.item]
        rows.append({"rater": rating.rater, "item": rating.item, "method": method,
                     "origin_class": cls if cls is not None else rating.origin_class, "answer": rating.answer,
                     "yes": float(rating.answer == "yes"), "unsure": float(rating.answer == "unsure"),
                     "realism": float(rating.realism), "realism_norm": (rating.realism - 1) / 4.0,
                     "time": rating.time, "order": order})
    columns = ["rater", "item", "method", "origin_class", "answer", "yes", "unsure", "realism", "realism_norm",
               "time", "order"]
    return pd.DataFrame(rows, columns=columns), len(ratings) - len(rows)


def _method_order(methods: Iterable[str]) -> list[str]:
    from hynea_pl.report.compare import REFERENCE_METHOD

    unique = sorted(set(methods))
    return [m for m in unique if m == REFERENCE_METHOD] + [m for m in unique if m != REFERENCE_METHOD]


def _table3(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for method in _method_order(frame["method"]):
        part = frame[frame["method"] == method]
        rows.append({"method": method, "label_preservation": part["yes"].mean(),
                     "label_preservation_sd": part["yes"].std(ddof=1), "realism_mean": part["realism"].mean(),
                     "realism_sd": part["realism"].std(ddof=1), "realism_norm_mean": part["realism_norm"].mean(),
                     "realism_norm_sd": part["realism_norm"].std(ddof=1), "ambiguity": part["unsure"].mean(),
                     "n_ratings": len(part), "n_items": part["item"].nunique(), "n_raters": part["rater"].nunique()})
    columns = ["method", "label_preservation", "label_preservation_sd", "realism_mean", "realism_sd",
               "realism_norm_mean", "realism_norm_sd", "ambiguity", "n_ratings", "n_items", "n_raters"]
    return pd.DataFrame(rows, columns=columns).set_index("method")


def _table4(frame: pd.DataFrame) -> pd.DataFrame:
    from hynea_pl.metrics.functional.stats import cohens_d, wilcoxon_signed_rank
    from hynea_pl.report.compare import REFERENCE_METHOD

    columns = ["baseline", "n_pairs", "label_preservation_hynea", "label_preservation_baseline", "label_preservation_p",
               "label_preservation_d", "realism_hynea", "realism_baseline", "realism_p", "realism_d"]
    units = frame.groupby(["method", "rater", "origin_class"])[["yes", "realism"]].mean()
    rows = []
    methods = _method_order(frame["method"])
    if REFERENCE_METHOD in methods:
        hynea = units.loc[REFERENCE_METHOD]
        for baseline in methods[1:]:
            pairs = hynea.join(units.loc[baseline], how="inner", lsuffix="_h", rsuffix="_b")
            row: dict[str, object] = {"baseline": baseline, "n_pairs": len(pairs)}
            for key, column in (("label_preservation", "yes"), ("realism", "realism")):
                h, b = pairs[f"{column}_h"].to_numpy(), pairs[f"{column}_b"].to_numpy()
                row[f"{key}_hynea"] = float(h.mean()) if len(h) else math.nan
                row[f"{key}_baseline"] = float(b.mean()) if len(b) else math.nan
                row[f"{key}_p"] = wilcoxon_signed_rank(h, b)[1] if len(h) else math.nan
                row[f"{key}_d"] = cohens_d(h, b) if len(h) else math.nan
            rows.append(row)
    table = pd.DataFrame(rows, columns=columns).set_index("baseline")
    table.attrs["pairing"] = PAIRING
    return table


def _kappa(frame: pd.DataFrame) -> pd.DataFrame:
    """Fleiss' kappa over the items rated by >= 2 raters: ``all`` uses each item's first ``m`` answers (by time),
    ``m`` the fewest raters any such item has; with items of several rater counts, a row per count follows."""
    from hynea_pl.metrics.functional.stats import fleiss_kappa, ratings_to_table

    codes = frame.assign(code=frame["answer"].map({a: i for i, a in enumerate(ANSWERS)}))
    codes = codes.sort_values(["time", "order"], kind="stable")
    per_item = {item: group["code"].to_list() for item, group in codes.groupby("item", sort=True)}
    per_item = {item: answers for item, answers in per_item.items() if len(answers) >= 2}
    rows = []

    def row(scope: str, raters: int, answers: list[list[int]]) -> dict[str, object]:
        kappa = fleiss_kappa(ratings_to_table(np.array(answers), len(ANSWERS))) if answers else math.nan
        return {"scope": scope, "raters_per_item": raters, "kappa": kappa, "n_items": len(answers)}

    counts = sorted({len(a) for a in per_item.values()})
    if not counts:
        rows.append(row("all", 0, []))
    else:
        rows.append(row("all", counts[0], [a[:counts[0]] for a in per_item.values()]))
        if len(counts) > 1:
            for count in counts:
                rows.append(row(f"raters={count}", count, [a for a in per_item.values() if len(a) == count]))
    return pd.DataFrame(rows, columns=["scope", "raters_per_item", "kappa", "n_items"]).set_index("scope")


def rq3_tables(ratings_path: Path, run_dirs: list[Path]) -> dict[str, pd.DataFrame]:
    """Paper RQ3 from a ratings file and the rated runs: ``table3`` (per method), ``table4`` (HyNeA against each
    baseline; ``table4.attrs["pairing"]`` states the pairing) and ``kappa`` (Fleiss' kappa; see the module
    docstring). Ratings of items outside ``run_dirs`` and repeated answers (same rater and item: the first is
    kept) are left out; their number is ``table3.attrs["ratings_left_out"]``."""
    frame, left_out = _ratings_frame(Path(ratings_path), run_dirs)
    table3 = _table3(frame)
    table3.attrs["ratings_left_out"] = left_out
    return {"table3": table3, "table4": _table4(frame), "kappa": _kappa(frame)}


__all__ = ["ANSWERS", "PAIRING", "RATINGS_FILE", "REALISM_LABELS", "Rating", "RatingItem", "RatingsFile",
           "default_ratings_path", "item_id", "load_class_names", "now_utc", "question_for", "rater_order",
           "rating_items", "read_ratings", "rq3_tables", "run_class_names", "run_name"]
