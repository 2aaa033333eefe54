"""A campaign plan larger than its data says so (issue 68, point 4): before any model is built, case run or run
folder written, ``fit`` refuses in one line, with the numbers (exit 2), a selection that asks more cases of a class
than its source holds images of: ``cases.images`` as a folder, a CSV of labels or the zoo's held-out digits from
``start`` on, and natural's pool (a class it holds no image of). The images that turn out unreadable are counted
again when the images are read, still before the run folder exists."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tiny_components import tiny_generator

from hynea_pl.campaign.case_types import CaseSelection, images_needed
from hynea_pl.campaign.image_cases import read_case_images
from hynea_pl.campaign.validation import check_plan_served
from hynea_pl.campaign.test_images import count_test_labels
from hynea_pl.cli import main

#: the tiny zoo's components (tests/data/tiny_zoo): nothing here is ever built, the plan is refused first
TINY = ("--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "2",
        "--sut.init_args.weights", "zoo://tiny/sut", "--sut.init_args.model.init_args.channels", "[8, 16]",
        "--sut.init_args.model.init_args.hidden", "32", "--oracle.init_args.profile", "tiny",
        "--realism.init_args.profile", "tiny", "--realism.init_args.reference_size", "100")


@pytest.fixture
def guarded(tiny_zoo_cache, monkeypatch, no_network):
    """The tiny zoo's cache and no network: a check that let the plan through could not train or fetch a zoo."""
    monkeypatch.setenv("HYNEA_PL_CACHE", tiny_zoo_cache)


def fit_real(root: Path, images: str, classes: list[int], n_per_class: int, *extra: str) -> list[str]:
    """``configs/mnist_real.yaml`` (HyNeA from real images) on the tiny zoo."""
    return ["fit", "--config", "configs/mnist_real.yaml", *TINY,
            "--model.init_args.steering.model.init_args.profile", "tiny",
            "--model.init_args.acceptance.test.init_args.profile", "tiny",
            "--cases.images", images, "--cases.classes", json.dumps(classes), "--cases.n_per_class", str(n_per_class),
            "--output.root", str(root), "--output.name", "run", *extra]


def refused(capsys, root: Path) -> str:
    """The one line ``fit`` printed; nothing was written under ``root``."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert not root.exists(), sorted(root.rglob("*"))
    return lines[0]


def _png(path: Path, level: int = 128) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8), level, np.uint8)).save(path)


def _folder(root: Path, per_class: dict[int, int]) -> Path:
    for label, n in per_class.items():
        for i in range(n):
            _png(root / str(label) / f"{i}.png", 40 * i)
    return root


# ---------------------------------------------------------------------- the sources, through fit
def test_a_folder_with_fewer_images_of_a_class_is_refused_before_anything(guarded, tmp_path, capsys):
    folder = _folder(tmp_path / "images", {1: 3, 7: 2})
    out = tmp_path / "out"
    assert main(fit_real(out, str(folder), [1, 7], 3)) == 2
    line = refused(capsys, out)
    assert line == (f"error: cases.n_per_class = 3 asks 3 cases of class 7 but cases.images ({folder}) holds "
                    "2 images of class 7: lower cases.n_per_class to at most 2")
    assert main(fit_real(out, str(folder), [1, 4], 1)) == 2  # a class the folder has no image of
    line = refused(capsys, out)
    assert "asks cases of class 4" in line and "holds no image of class 4" in line and "drop it" in line
    assert main(fit_real(out, str(folder), [1, 7], 3, "--cases.case_ids", '["c7-2"]')) == 2  # only c7-2 asked
    line = refused(capsys, out)
    assert "cases.case_ids asks case c7-2 of class 7" in line and "holds 2 images of class 7" in line
    assert "c7-0 to c7-1" in line


def test_a_csv_with_fewer_rows_of_a_class_is_refused_before_anything(guarded, tmp_path, capsys):
    folder = tmp_path / "flat"
    rows = [("a.png", "3"), ("b.png", "3"), ("c.png", "5"), ("d.png", "3 5")]  # a scene's row counts for neither
    for name, _ in rows:
        _png(folder / name)
    (folder / "labels.csv").write_text("file,label\n" + "".join(f"{f},{label}\n" for f, label in rows))
    out = tmp_path / "out"
    assert main(fit_real(out, str(folder), [3, 5], 2, "--cases.labels_csv", "labels.csv")) == 2
    line = refused(capsys, out)
    assert line == (f"error: cases.n_per_class = 2 asks 2 cases of class 5 but cases.images ({folder}, labels from "
                    "labels.csv) holds 1 image of class 5: lower cases.n_per_class to at most 1")


def test_a_held_out_range_too_small_for_the_plan_is_refused_before_anything(guarded, tmp_path, capsys):
    source = "zoo://tiny/held_out?start=190"  # the tiny zoo's last 10 held-out digits
    counts = count_test_labels(source)
    assert sum(counts.values()) == 10
    classes = sorted(label for (label,) in counts)
    fewest = min(classes, key=lambda c: counts[(c,)])
    asked = max(counts.values()) + 1  # more than any class holds
    out = tmp_path / "out"
    assert main(fit_real(out, source, classes, asked)) == 2
    line = refused(capsys, out)
    assert line.startswith(f"error: cases.n_per_class = {asked} asks {asked} cases of class {fewest} but "
                           f"cases.images ({source}) holds {counts[(fewest,)]} image")
    assert line.endswith(f"lower cases.n_per_class to at most {counts[(fewest,)]}")
    assert f"{len(classes)} classes hold fewer than {asked}" in line


def test_a_class_the_natural_pool_holds_no_image_of_is_refused_before_anything(guarded, tmp_path, capsys):
    pool = _folder(tmp_path / "pool", {1: 2})
    out = tmp_path / "out"
    args = ["fit", "--config", "configs/mnist_natural.yaml", *TINY, "--cases.images", "null",
            "--cases.classes", "[1, 7]", "--model.init_args.pool", str(pool), "--output.root", str(out)]
    assert main(args) == 2
    line = refused(capsys, out)
    assert line == (f"error: cases.classes = [1, 7] asks cases of class 7 but the natural pool (model.init_args.pool "
                    f"= {pool}) holds no image of class 7 (it holds 2 of class 1): drop it from cases.classes or "
                    "give a pool with images of it")


def test_the_natural_pool_bounds_no_n_per_class(tmp_path):
    """Every case reads its class's whole pool in its own order: a pool of 2 images serves 50 cases of its class."""
    from hynea_pl.baselines.natural import NaturalCase

    pool = str(_folder(tmp_path / "pool", {1: 2}))
    NaturalCase.check_case_plan({"pool": pool}, CaseSelection(classes=[1], n_per_class=50))  # served
    with pytest.raises(ValueError, match="give cases.classes"):
        NaturalCase.check_case_plan({"pool": pool}, CaseSelection(classes=None))


# ---------------------------------------------------------------------- the rule and the read
def test_images_needed_counts_the_selected_cases_per_class():
    assert images_needed(CaseSelection(classes=[0, 3], n_per_class=4)) == {0: 4, 3: 4}
    assert images_needed(CaseSelection(classes=[0, 3], n_per_class=4, case_ids=["c3-1", "c3-0"])) == {3: 2}
    assert images_needed(CaseSelection(classes=[None], n_per_class=4)) == {}
    check_plan_served(CaseSelection(classes=[0, 3], n_per_class=2), Counter({(0,): 2, (3,): 5}))  # served


def test_unreadable_files_are_counted_again_when_the_images_are_read(tmp_path):
    """The config's check counts files; the read counts the images it could read, before the run folder exists."""
    folder = _folder(tmp_path / "images", {1: 1})
    (folder / "1" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    selection = CaseSelection(classes=[1], n_per_class=2, images=str(folder))
    check_plan_served(selection, count_test_labels(folder))  # 2 files: the labels alone serve it
    with pytest.warns(UserWarning, match="broken.png"), pytest.raises(ValueError) as error:
        read_case_images(selection, tiny_generator(num_inference_steps=1))
    assert str(error.value) == (f"cases.n_per_class = 2 asks 2 cases of class 1 but cases.images ({folder}) holds "
                                "1 readable image of class 1 (1 unreadable file(s) skipped): lower "
                                "cases.n_per_class to at most 1")
