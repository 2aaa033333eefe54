"""``python -m hynea_pl judge IMAGES --out DIR [--people FILE.csv]``: the verdict on a folder of images, on the fixed
tiny zoo (:mod:`hynea_pl.evaluation.judge_folder`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from hynea_pl import cli
from hynea_pl.evaluation.judge_folder import AGREEMENT_ROWS, AGREES, CLASS_VALID, IMAGE_VERDICTS, OTHER_REFUSED
from hynea_pl.metrics.functional.validity import verdict
from hynea_pl.verdicts import reading_name

JUDGES = ["oracle-1", "oracle-2", "judge-convmixer"]
COLUMNS = ["path", "expected", *JUDGES, "panel", "realism_passed", "realism_score", "verdict"]


def _image(seed: int, size: int) -> np.ndarray:
    """A ``(size, size)`` float image in [0, 1]: a stroke-like bar and some noise (what the judges read varies)."""
    generator = np.random.default_rng(seed)
    image = generator.uniform(0.0, 0.3, (size, size)).astype(np.float32)
    row = int(generator.integers(4, size - 8))
    image[row : row + 3, 4 : size - 4] = 1.0
    image[4 : size - 4, row : row + 3] = generator.uniform(0.5, 1.0)
    return image


def _png(path: Path, image: np.ndarray, rgb: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    levels = np.round(image * 255).astype(np.uint8)
    Image.fromarray(np.stack([levels] * 3, -1) if rgb else levels).save(path)


def _judged(image: np.ndarray, from_png: bool) -> torch.Tensor:
    """What the judges should see: ``(1, 32, 32)`` (8-bit levels for a PNG, 28 px padded by 2)."""
    tensor = torch.from_numpy(np.round(image * 255) / 255 if from_png else image).float().clamp(0, 1)
    pad = (32 - tensor.shape[0]) // 2
    return torch.nn.functional.pad(tensor, (pad, pad, pad, pad)).unsqueeze(0)


def _expected_rows(images: dict[str, torch.Tensor]) -> pd.DataFrame:
    """The verdict table computed here, image by image (through the panel and the verdict function)."""
    from hynea_pl.zoo.labelled.oracle_sut import ZooOracle
    from hynea_pl.zoo.labelled.realism import ZooTypicality

    panel, realism = ZooOracle(profile="tiny", role="judges"), ZooTypicality("tiny")
    paths = sorted(images)
    batch = torch.stack([images[path] for path in paths])
    decision, members = panel.panel_readings(batch)
    readings = realism.readings(batch)
    rows = []
    for i, path in enumerate(paths):
        expected = int(path.split("/")[0])
        realistic = None if panel.reads_no_class else bool(readings["passed"][i])
        found = verdict(flipped=True, reference_label=expected, judge_labels=[int(decision[i])],
                        sut_result_label=None, realistic=realistic, accepted=None)
        rows.append({"path": path, "expected": expected,
                     **{name: reading_name(int(labels[i])) for name, labels in members.items()},
                     "panel": reading_name(int(decision[i])), "realism_passed": bool(readings["passed"][i]),
                     "realism_score": float(readings["score"][i]),
                     "verdict": "valid" if found == "valid_failure" else found})
    return pd.DataFrame(rows)


@pytest.fixture
def png_folder(tmp_path: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    """``images/<class>/<image>.png``: 28 px and 32 px, grey and RGB, in three classes."""
    root, judged = tmp_path / "pngs", {}
    for i, (label, size, rgb) in enumerate([(0, 28, False), (0, 32, True), (3, 28, True), (3, 32, False),
                                            (7, 28, False), (7, 32, False)]):
        image = _image(i, size)
        _png(root / str(label) / f"img_{i}.png", image, rgb)
        judged[f"{label}/img_{i}.png"] = _judged(image, from_png=True)
    return root, judged


def _read(out: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(out / name, dtype={column: str for column in [*JUDGES, "panel"]}, keep_default_na=False)


def _check_verdicts(table: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert list(table.columns[: len(COLUMNS)]) == COLUMNS
    assert table["path"].tolist() == sorted(expected["path"])
    for column in ["path", "expected", *JUDGES, "panel", "realism_passed", "verdict"]:
        assert table[column].tolist() == expected[column].tolist(), column
    assert np.allclose(table["realism_score"], expected["realism_score"], atol=1e-4)
    assert set(table["verdict"]) <= set(IMAGE_VERDICTS)


def test_a_folder_of_pngs_gets_a_verdict_per_image(tiny_zoo, png_folder, tmp_path, capsys):
    root, judged = png_folder
    out = tmp_path / "out"
    assert cli.main(["judge", str(root), "--out", str(out), "--profile", "tiny"]) == 0
    table = _read(out, "verdicts.csv")
    _check_verdicts(table, _expected_rows(judged))
    assert "people" not in table.columns and not (out / "agreement.csv").exists()
    printed = capsys.readouterr().out
    assert "6 images" in printed and "verdict rates" in printed


def test_a_folder_of_npy_arrays_of_every_accepted_shape(tiny_zoo, tmp_path):
    root, judged = tmp_path / "arrays", {}
    shapes = [lambda a: a, lambda a: a[:, :, None], lambda a: a[None], lambda a: a[None, :, :, None]]
    for i, reshape in enumerate(shapes):
        image = _image(10 + i, 28 if i % 2 else 32) * 1.2 - 0.1  # a little outside [0, 1]: clamped
        (root / "5").mkdir(parents=True, exist_ok=True)
        np.save(root / "5" / f"a{i}.npy", reshape(image))
        judged[f"5/a{i}.npy"] = _judged(image, from_png=False)
    out = tmp_path / "out"
    assert cli.main(["judge", str(root), "--out", str(out), "--profile", "tiny"]) == 0
    _check_verdicts(_read(out, "verdicts.csv"), _expected_rows(judged))


def test_people_readings_give_the_people_column_and_the_agreement_table(tiny_zoo, png_folder, tmp_path, capsys):
    root, judged = png_folder
    people = pd.DataFrame([  # path, then three people; the category each image must get
        ("0/img_0.png", "0", "Digit 0", 0),                # class
        ("0/img_1.png", "not a digit", "Not a digit", "not a digit"),  # other (not a digit)
        ("3/img_2.png", "5", "Digit 5", "5"),              # other (another digit)
        ("3/img_3.png", "3", "3", "?"),                    # disagree (one unsure)
        ("7/img_4.png", "7", "1", "7"),                    # disagree
        ("7/img_5.png", "7", "", "7"),                     # disagree (empty)
    ], columns=["path", "ann", "bob", "cy"])
    csv = tmp_path / "people.csv"
    people.to_csv(csv, index=False)
    out = tmp_path / "out"
    assert cli.main(["judge", str(root), "--out", str(out), "--profile", "tiny", "--people", str(csv)]) == 0
    table = _read(out, "verdicts.csv")
    _check_verdicts(table, _expected_rows(judged))
    assert table["people"].tolist() == ["class", "other", "other", "disagree", "disagree", "disagree"]

    agreement = pd.read_csv(out / "agreement.csv")
    assert agreement["people"].tolist() == [*AGREEMENT_ROWS, AGREES, CLASS_VALID, OTHER_REFUSED]
    counts = agreement.set_index("people")
    groups = {AGREEMENT_ROWS[0]: [0], AGREEMENT_ROWS[1]: [2], AGREEMENT_ROWS[2]: [1], AGREEMENT_ROWS[3]: [3, 4, 5]}
    for row, where in groups.items():
        assert counts.loc[row, "n"] == len(where)
        for name in IMAGE_VERDICTS:
            assert counts.loc[row, name] == sum(table["verdict"][i] == name for i in where), (row, name)
    valid = table["verdict"] == "valid"
    class_valid, other_refused = int(valid[0]), int(not valid[1]) + int(not valid[2])
    assert counts.loc[AGREES, "n"] == 3 and counts.loc[AGREES, "share"] == pytest.approx(
        (class_valid + other_refused) / 3)
    assert counts.loc[CLASS_VALID, "n"] == 1 and counts.loc[CLASS_VALID, "share"] == pytest.approx(class_valid)
    assert counts.loc[OTHER_REFUSED, "n"] == 2 and counts.loc[OTHER_REFUSED, "share"] == pytest.approx(
        other_refused / 2)
    assert "people read another digit" in capsys.readouterr().out


def _bad_png_folder(tmp_path: Path, size: int = 32, class_name: str = "4") -> Path:
    root = tmp_path / "bad"
    _png(root / "4" / "ok.png", _image(0, 32))
    _png(root / class_name / "x.png", _image(1, size))
    return root


@pytest.mark.parametrize("case, message", [
    ("missing folder", "not found"),
    ("30 px image", "4/x.png is 30x30"),
    ("non-integer class folder", "class folder"),
    ("people CSV naming a missing image", "4/gone.png"),
    ("people CSV without a person", "no person"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, message, tiny_zoo, tmp_path, capsys):
    extra = []
    if case == "missing folder":
        root = tmp_path / "nowhere"
    elif case == "30 px image":
        root = _bad_png_folder(tmp_path, size=30)
    elif case == "non-integer class folder":
        root = _bad_png_folder(tmp_path, class_name="four")
    else:
        root = _bad_png_folder(tmp_path)
        csv = tmp_path / "people.csv"
        rows = ([("4/ok.png", "4"), ("4/x.png", "4"), ("4/gone.png", "4")] if case.endswith("missing image")
                else [("4/ok.png",), ("4/x.png",)])
        pd.DataFrame(rows, columns=["path", "ann"][: len(rows[0])]).to_csv(csv, index=False)
        extra = ["--people", str(csv)]
    out = tmp_path / "out"
    assert cli.main(["judge", str(root), "--out", str(out), "--profile", "tiny", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert "30x30" not in err or "32x32 or 28x28" in err
    assert not out.exists()
