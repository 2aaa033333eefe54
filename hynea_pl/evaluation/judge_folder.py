"""``python -m hynea_pl judge IMAGES --out DIR [--people FILE.csv] [--profile full]``: the project's verdict on any
generator's images.

``IMAGES`` is a folder ``<class>/<image>`` (class folders named by the class index, ``0``-``9`` for the digits) of
PNGs (grey, or RGB made grey by the mean of its channels) or ``.npy`` float arrays (``(H, W)``, ``(H, W, 1)``,
``(1, H, W)`` or ``(1, H, W, 1)``, values about 0..1). Every image is square: 32 px is taken as is, 28 px (MNIST) is
zero-padded by 2 px on each side to the zoo's 32 px. Each image is read by the zoo's judges as a panel
(:class:`~hynea_pl.zoo.labelled.oracle_sut.ZooOracle`, role ``judges``) and by the zoo's realism test
(:class:`~hynea_pl.zoo.labelled.realism.ZooTypicality`; both built by the command line, :mod:`hynea_pl.cli`, since
the zoo imports this package), and given the verdict of a case whose result keeps its class folder's class
(:func:`~hynea_pl.metrics.functional.validity.verdict`, the one verdict rule): ``valid`` (the verdict's
``valid_failure``: these images are inputs, not failures), ``degraded``, ``semantic_change`` or ``ambiguous``.

It writes ``DIR/verdicts.csv`` (a row per image: the judges' readings, the panel's, the realism test's, the verdict)
and prints the rate of each verdict. With ``--people FILE.csv`` (a ``path`` column, then one column per person, each
a reading), it compares the verdict with what people read: an agreement table, printed and written to
``DIR/agreement.csv``, and a ``people`` column in ``verdicts.csv``.

Every input is checked (the folder, its class folders, each image's size, the people CSV) before ``DIR`` is
created: bad input is a one-line ``ValueError`` / ``FileNotFoundError`` and nothing is written.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from hynea_pl.data.image_folder import IMAGE_EXTENSIONS
from hynea_pl.images import load_image
from hynea_pl.metrics.functional.validity import verdict
from hynea_pl.verdicts import AMBIGUOUS, DEGRADED, NOT_A_CLASS, SEMANTIC_CHANGE, VALID_FAILURE, reading_name

if TYPE_CHECKING:
    from hynea_pl.metrics.typicality import TypicalityTest
    from hynea_pl.suts import EnsembleClassifierSUT

#: the judged images' size (the zoo's digits)
JUDGED_SIZE = 32
#: the size zero-padded to :data:`JUDGED_SIZE` (MNIST's 28 px digits; 2 px on each side)
PADDED_SIZE = 28
#: the suffix of the images read as numpy arrays (the others: the PNGs, and what else PIL reads)
NPY = ".npy"
#: the verdict an image gets, in the order of the tables: ``valid`` is the verdict's ``valid_failure``
VALID = "valid"
VERDICT_NAMES: dict[str, str] = {VALID_FAILURE: VALID, DEGRADED: DEGRADED, SEMANTIC_CHANGE: SEMANTIC_CHANGE,
                                 AMBIGUOUS: AMBIGUOUS}
IMAGE_VERDICTS: tuple[str, ...] = tuple(VERDICT_NAMES.values())
#: what people read in an image (the ``people`` column): all the expected class, all one other reading, or not one
PEOPLE_CLASS, PEOPLE_OTHER, PEOPLE_DISAGREE = "class", "other", "disagree"
#: the agreement table's rows
AGREEMENT_ROWS = ("people read the class", "people read another digit", "people read not a digit", "people disagree")
#: the agreement table's summary rows, measured on the images where people agree
AGREES, CLASS_VALID, OTHER_REFUSED = ("verdict agrees with people", "people's class called valid",
                                      "people's other reading refused")

_INDEX = re.compile(r"[0-9]+")
_DIGIT = re.compile(r"(?:digit\s*)?([0-9]+)(?:\.0*)?", re.IGNORECASE)
_NOT_A_DIGIT = re.compile(r"not\s+a\s+digit", re.IGNORECASE)


@dataclass(frozen=True)
class FolderImages:
    """The images of a folder ``<class>/<image>``, ready for the judges, sorted by path."""

    images: Tensor  # (N, 1, 32, 32) float32 in [0, 1]
    expected: list[int]  # (N,): the class of each image's class folder
    paths: list[str]  # (N,): each image's path relative to the folder (posix), e.g. "3/a.png"


@dataclass(frozen=True)
class JudgedFolder:
    """What :func:`judge_folder` wrote: ``verdicts`` (a row per image) and, with people, ``agreement``."""

    verdicts: pd.DataFrame
    agreement: pd.DataFrame | None
    written: list[Path]


# ------------------------------------------------------------------------------------------------ the images
def image_files(root: Path, num_classes: int) -> list[tuple[Path, str, int]]:
    """``(file, path relative to root (posix), class)`` of every image under ``root/<class>/``, sorted by path.

    Class folders are named by a class index below ``num_classes``; hidden files and folders are skipped, and so
    are files that are no images (a README); files directly in ``root`` too (a people CSV may sit there). Raises
    a one-line ``FileNotFoundError`` / ``ValueError`` for a missing folder, a class folder of another name, or no
    image at all."""
    if not root.is_dir():
        found = "is not a folder" if root.exists() else "not found"
        raise FileNotFoundError(f"image folder {root} {found} (expected IMAGES/<class>/<image>)")
    files = []
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        if not _INDEX.fullmatch(folder.name) or int(folder.name) >= num_classes:
            raise ValueError(f"class folder {folder} is not a class: class folders are named by the class index "
                             f"0-{num_classes - 1} (IMAGES/<class>/<image>)")
        for path in folder.rglob("*"):
            relative = path.relative_to(root)
            if (path.is_file() and not any(part.startswith(".") for part in relative.parts)
                    and path.suffix.lower() in (*IMAGE_EXTENSIONS, NPY)):
                files.append((path, relative.as_posix(), int(folder.name)))
    if not files:
        raise ValueError(f"no image in {root} (expected IMAGES/<class>/<image>, images .png or .npy)")
    return sorted(files, key=lambda item: item[1])


def read_image(path: Path) -> Tensor:
    """One image file as ``(H, W)`` float32 in [0, 1]: a PNG (or another image PIL reads; 8-bit levels / 255, RGB
    made grey by the mean of its channels) or a ``.npy`` array of shape ``(H, W)``, ``(H, W, 1)``, ``(1, H, W)`` or
    ``(1, H, W, 1)`` (floats clamped to [0, 1]; ``uint8`` levels / 255). One-line ``ValueError`` otherwise."""
    if path.suffix.lower() != NPY:
        try:
            return load_image(path).mean(0)
        except Exception as error:  # PIL raises many kinds (OSError, SyntaxError, ValueError, ...)
            raise ValueError(f"{path} cannot be read as an image ({type(error).__name__})") from None
    try:
        array = np.load(path, allow_pickle=False)
    except Exception as error:
        raise ValueError(f"{path} cannot be read as a numpy array ({type(error).__name__})") from None
    shape = tuple(array.shape)
    if array.ndim == 4 and shape[0] == 1 and shape[3] == 1:
        array = array[0, :, :, 0]
    elif array.ndim == 3 and shape[2] == 1:
        array = array[:, :, 0]
    elif array.ndim == 3 and shape[0] == 1:
        array = array[0]
    elif array.ndim != 2:
        raise ValueError(f"{path} is an array of shape {shape}; accepted: (H, W), (H, W, 1), (1, H, W), (1, H, W, 1)")
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{path} is an array of {array.dtype}, not of numbers")
    scale = 255.0 if array.dtype == np.uint8 else 1.0
    image = torch.from_numpy(np.asarray(array, dtype=np.float32) / scale)
    if not bool(torch.isfinite(image).all()):
        raise ValueError(f"{path} holds values that are not finite (NaN or infinity)")
    return image.clamp_(0.0, 1.0)


def judged_size(image: Tensor, path: Path) -> Tensor:
    """``image (H, W)`` as the judges read it, ``(1, 32, 32)``: 32 px as is, 28 px zero-padded by 2 px on each
    side; any other size is a one-line ``ValueError`` naming ``path``, its size and the sizes accepted."""
    height, width = image.shape
    if height != width or height not in (JUDGED_SIZE, PADDED_SIZE):
        raise ValueError(f"{path} is {height}x{width}; images must be {JUDGED_SIZE}x{JUDGED_SIZE} or "
                         f"{PADDED_SIZE}x{PADDED_SIZE} (zero-padded to {JUDGED_SIZE})")
    pad = (JUDGED_SIZE - height) // 2
    return torch.nn.functional.pad(image, (pad, pad, pad, pad)).unsqueeze(0)


def read_folder(root: str | Path, num_classes: int) -> FolderImages:
    """Every image of ``root/<class>/<image>`` (:func:`image_files`) read (:func:`read_image`) at the judges' size
    (:func:`judged_size`): ``images (N, 1, 32, 32)``, sorted by path."""
    files = image_files(Path(root), num_classes)
    images = [judged_size(read_image(path), path) for path, _, _ in files]
    return FolderImages(torch.stack(images), [label for _, _, label in files], [source for _, source, _ in files])


# ----------------------------------------------------------------------------------------------- the people
def parse_reading(text: object, num_classes: int) -> int | None:
    """A person's reading: a class index (``5``, ``"5"``, ``"Digit 5"``), :data:`~hynea_pl.verdicts.NOT_A_CLASS`
    (``"not a digit"``), or ``None`` (unsure: ``"?"``, empty, anything else, a digit of no class)."""
    text = str(text).strip()
    if _NOT_A_DIGIT.fullmatch(text):
        return NOT_A_CLASS
    found = _DIGIT.fullmatch(text)
    if found and int(found.group(1)) < num_classes:
        return int(found.group(1))
    return None


def read_people(csv_path: str | Path, paths: Sequence[str], num_classes: int) -> pd.DataFrame:
    """The people's readings of the images ``paths`` from ``csv_path`` (a ``path`` column, then a column per
    person): ``(N, P)`` indexed by ``paths`` in their order, a column per person, each cell a class index,
    ``NOT_A_CLASS`` or ``None`` (:func:`parse_reading`). The CSV names every image of ``paths`` and no other, each
    once, and has at least one person; else a one-line ``ValueError`` / ``FileNotFoundError``."""
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise FileNotFoundError(f"people CSV {csv_path} not found")
    try:
        table = pd.read_csv(csv_path, dtype=str, keep_default_na=False, skipinitialspace=True, encoding="utf-8-sig")
    except Exception as error:
        raise ValueError(f"{csv_path} cannot be read as a CSV ({type(error).__name__})") from None
    table.columns = [str(column).strip() for column in table.columns]
    if "path" not in table.columns:
        raise ValueError(f"{csv_path} has no path column (expected the columns path, then one per person)")
    people = [column for column in table.columns if column != "path"]
    if not people:
        raise ValueError(f"{csv_path} has no person's column (expected the columns path, then one per person)")
    named = [path.strip().replace("\\", "/").removeprefix("./") for path in table["path"]]
    repeated = sorted(path for path, count in Counter(named).items() if count > 1)
    if repeated:
        raise ValueError(f"{csv_path} names {repeated[0]} more than once")
    images = set(paths)
    missing = [path for path in named if path not in images]
    if missing:
        raise ValueError(f"{csv_path} names {missing[0]}, which is no image of the folder")
    named_set = set(named)
    unnamed = [path for path in paths if path not in named_set]
    if unnamed:
        raise ValueError(f"{csv_path} does not name the image {unnamed[0]} (it must name every image of the folder)")
    readings = table[people].map(lambda cell: parse_reading(cell, num_classes)).astype(object)
    readings.index = pd.Index(named, name="path")
    return readings.loc[list(paths)]


def people_category(readings: Sequence[int | None], expected: int) -> str:
    """What people read in an image of class ``expected``, from each person's reading (a class index,
    ``NOT_A_CLASS`` or ``None``: unsure): ``class`` if everyone read ``expected``, ``other`` if everyone gave one
    other reading (another class, or "not a digit"), else ``disagree`` (any unsure too)."""
    if any(reading is None for reading in readings) or len(set(readings)) != 1:
        return PEOPLE_DISAGREE
    return PEOPLE_CLASS if readings[0] == expected else PEOPLE_OTHER


def people_reading(readings: Sequence[int | None]) -> int | None:
    """The one reading every person gave (``None``: they did not all give the same one)."""
    return readings[0] if len(set(readings)) == 1 else None


def agreement_table(verdicts: pd.DataFrame, people: pd.DataFrame) -> pd.DataFrame:
    """The verdict against what people read. ``verdicts``: :func:`verdict_table` with its ``people`` column,
    ``people``: :func:`read_people` (rows in the same order). Rows :data:`AGREEMENT_ROWS` (what people read) with
    ``n`` and the count of each verdict, then, over the images where people agree, :data:`AGREES` (valid on
    ``class``, anything but valid on ``other``), :data:`CLASS_VALID` and :data:`OTHER_REFUSED`, each with its
    ``n`` and ``share`` (empty where ``n`` is 0)."""
    common = [people_reading(list(row)) for row in people.itertuples(index=False)]
    category = verdicts["people"].to_numpy()
    rows_of = {
        AGREEMENT_ROWS[0]: category == PEOPLE_CLASS,
        AGREEMENT_ROWS[1]: (category == PEOPLE_OTHER) & np.array([reading != NOT_A_CLASS for reading in common]),
        AGREEMENT_ROWS[2]: (category == PEOPLE_OTHER) & np.array([reading == NOT_A_CLASS for reading in common]),
        AGREEMENT_ROWS[3]: category == PEOPLE_DISAGREE,
    }
    valid = verdicts["verdict"].to_numpy() == VALID
    rows = []
    for name, where in rows_of.items():
        counts = verdicts.loc[where, "verdict"].value_counts()
        rows.append({"people": name, "n": int(where.sum()),
                     **{verdict: int(counts.get(verdict, 0)) for verdict in IMAGE_VERDICTS}, "share": None})
    on_class, on_other = category == PEOPLE_CLASS, category == PEOPLE_OTHER
    agrees = (on_class & valid) | (on_other & ~valid)
    for name, where, hits in ((AGREES, on_class | on_other, agrees), (CLASS_VALID, on_class, on_class & valid),
                              (OTHER_REFUSED, on_other, on_other & ~valid)):
        n = int(where.sum())
        rows.append({"people": name, "n": n, **{verdict: None for verdict in IMAGE_VERDICTS},
                     "share": float(hits.sum()) / n if n else None})
    table = pd.DataFrame(rows, columns=["people", "n", *IMAGE_VERDICTS, "share"])
    return table.astype({column: "Int64" for column in ("n", *IMAGE_VERDICTS)} | {"share": "Float64"})


# --------------------------------------------------------------------------------------------- the verdicts
def verdict_table(folder: FolderImages, panel: EnsembleClassifierSUT, realism: TypicalityTest,
                  batch_size: int = 500) -> pd.DataFrame:
    """The verdict on each image of ``folder``: a row per image (in its order) with ``path``, ``expected``, each
    judge's reading (a column per judge, :func:`~hynea_pl.verdicts.reading_name`), the ``panel``'s decision,
    ``realism_passed``, ``realism_score`` and ``verdict`` (:data:`IMAGE_VERDICTS`). ``panel``: the judges
    (:meth:`~hynea_pl.suts.EnsembleClassifierSUT.panel_readings` of ``(N, 1, 32, 32)``); ``realism``: the realism
    test, which decides only where the panel has no "not a digit" answer (else it is only recorded)."""
    decision, members = panel.panel_readings(folder.images)
    readings = [realism.readings(folder.images[start : start + batch_size])
                for start in range(0, len(folder.images), batch_size)]
    passed = torch.cat([reading["passed"] for reading in readings]).bool().tolist()
    score = torch.cat([reading["score"] for reading in readings]).double().tolist()
    verdicts = [VERDICT_NAMES[verdict(flipped=True, reference_label=expected, judge_labels=[int(label)],
                                      sut_result_label=None, realistic=None if panel.reads_no_class else realistic,
                                      accepted=None)]
                for expected, label, realistic in zip(folder.expected, decision.tolist(), passed)]
    return pd.DataFrame({
        "path": folder.paths, "expected": folder.expected,
        **{name: [reading_name(label) for label in labels.tolist()] for name, labels in members.items()},
        "panel": [reading_name(label) for label in decision.tolist()],
        "realism_passed": passed, "realism_score": score, "verdict": verdicts,
    })


def rate_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The rate of each verdict: a row ``all`` (every image), then one per expected class when there are several;
    columns ``images`` (n) and one per verdict (:data:`IMAGE_VERDICTS`)."""
    groups = [("all", verdicts)]
    if verdicts["expected"].nunique() > 1:
        groups += [(str(label), rows) for label, rows in verdicts.groupby("expected", sort=True)]
    return pd.DataFrame([{"expected": name, "images": len(rows),
                          **{verdict: float((rows["verdict"] == verdict).mean()) for verdict in IMAGE_VERDICTS}}
                         for name, rows in groups])


def _print_table(title: str, table: pd.DataFrame, echo: Callable[[object], None]) -> None:
    from rich.table import Table

    shown = Table(title=title)
    for column in table.columns:
        shown.add_column(str(column), justify="left" if column in ("expected", "people") else "right")
    for row in table.itertuples(index=False):
        shown.add_row(*("" if pd.isna(value) else f"{value:.1%}" if isinstance(value, float) else str(value)
                        for value in row))
    echo(shown)


def judge_folder(images: str | Path, out: str | Path, profile: str, data: Any,
                 readers: Callable[[], tuple[EnsembleClassifierSUT, TypicalityTest]],
                 people: str | Path | None = None, echo: Callable[[object], None] | None = None) -> JudgedFolder:
    """The verdict on every image of the folder ``images`` (``<class>/<image>``), written to ``out/verdicts.csv``
    and, with the ``people`` CSV, compared with people's readings in ``out/agreement.csv``; the tables are shown
    with ``echo`` (default: a rich console).

    ``profile`` and ``data``: the zoo profile's name and its data config (its ``num_classes``, ``channels``,
    ``image_size``); ``readers()``: its judges as a panel and its realism test (built only once the inputs are
    checked; the command line passes the zoo's, which this package may not import). Every input is checked before
    ``out`` is created: bad input is a one-line ``ValueError`` / ``FileNotFoundError`` and nothing is written."""
    if echo is None:
        from rich.console import Console

        echo = Console(width=120).print
    if data.channels != 1 or data.image_size != JUDGED_SIZE:
        raise ValueError(f"judge reads grey {JUDGED_SIZE} px images; profile {profile!r} is {data.channels} x "
                         f"{data.image_size} x {data.image_size}")
    folder = read_folder(images, data.num_classes)
    readings = read_people(people, folder.paths, data.num_classes) if people is not None else None
    verdicts = verdict_table(folder, *readers())
    agreement = None
    if readings is not None:
        verdicts["people"] = [people_category(list(row), expected)
                              for row, expected in zip(readings.itertuples(index=False), folder.expected)]
        agreement = agreement_table(verdicts, readings)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "verdicts.csv"]
    verdicts.to_csv(written[0], index=False)
    judges = list(verdicts.columns[2:verdicts.columns.get_loc("panel")])
    echo(f"{len(verdicts)} images of {images} judged by the {profile} zoo's judges ({', '.join(judges)}) as a panel")
    _print_table("verdict rates", rate_table(verdicts), echo)
    if agreement is not None:
        written.append(out / "agreement.csv")
        agreement.to_csv(written[1], index=False)
        counts, shares = agreement.iloc[:len(AGREEMENT_ROWS)], agreement.iloc[len(AGREEMENT_ROWS):]
        _print_table(f"the verdict against {readings.shape[1]} people", counts.drop(columns="share"), echo)
        _print_table("where people agree", shares[["people", "n", "share"]], echo)
    echo(f"wrote {', '.join(map(str, written))}")
    return JudgedFolder(verdicts, agreement, written)
