"""Readable case grids: upscaling by exact pixel blocks, rows that wrap, the valid-failures grid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hynea_pl.report.grid import case_grid, caption, upscale, write_grids
from hynea_pl.schema import CaseRecord, read_records, write_records

#: a colour no caption text, background or placeholder uses: marks the top-left pixel of the first origin.
MARK = (17, 201, 99)


def digit(seed: int, size: int = 32, mode: str = "L") -> Image.Image:
    """A random image with the MARK pixel at its top-left corner (RGB) or a random grey one."""
    rng = np.random.default_rng(seed)
    channels = 3 if mode == "RGB" else 1
    array = rng.integers(0, 256, (size, size, channels), dtype=np.uint8)
    if mode == "RGB":
        array[0, 0] = MARK
        return Image.fromarray(array, "RGB")
    return Image.fromarray(array[..., 0], "L")


def make_run(root: Path, verdicts: list[str | None], size: int = 32, mode: str = "L",
             errors: set[int] = frozenset()) -> tuple[Path, list[CaseRecord]]:
    """A run folder with one case per verdict (PNGs + records.jsonl); cases in ``errors`` have no images."""
    (root / "cases").mkdir(parents=True)
    records = []
    for i, verdict in enumerate(verdicts):
        paths = {}
        if i not in errors:
            for k, kind in enumerate(("origin", "result", "diff")):
                relative = f"cases/c{i % 10}-{i}_{kind}.png"
                digit(3 * i + k, size, mode).save(root / relative)
                paths[f"{kind}_image"] = relative
        records.append(CaseRecord(
            method="hynea", run="r", task="multiclass", case_id=f"c{i % 10}-{i}", seed=i, origin_class=i % 10,
            origin_label=i % 10, result_label=(i + 1) % 10, flipped=verdict not in (None, "no_flip"),
            verdict=None if i in errors else verdict, error="out of memory" if i in errors else None, **paths))
    write_records(root / "records.jsonl", records)
    return root, read_records(root / "records.jsonl")


def test_upscale_turns_each_pixel_into_an_exact_block():
    small = digit(0)
    big = upscale(small, 96)
    assert big.size == (96, 96)
    assert np.array_equal(np.asarray(big), np.kron(np.asarray(small), np.ones((3, 3), dtype=np.uint8)))
    assert upscale(small, 100).size == (128, 128)  # smallest integer factor reaching min_size
    large = digit(1, 256, "RGB")
    assert upscale(large, 96) is large  # a 256 px image stays as it is


def test_the_grid_shows_the_upscaled_digit_pixel_for_pixel(tmp_path):
    run, records = make_run(tmp_path / "run", ["valid_failure"], mode="RGB")
    grid = np.asarray(case_grid(run, records, min_size=96))
    ys, xs = np.nonzero(np.all(grid == MARK, axis=-1))
    y, x = ys.min(), xs[ys == ys.min()].min()  # top-left corner of the origin tile
    origin = np.asarray(Image.open(run / records[0].origin_image).convert("RGB"))
    expected = np.kron(origin, np.ones((3, 3, 1), dtype=np.uint8))
    assert np.array_equal(grid[y : y + 96, x : x + 96], expected)


def test_grid_size_follows_cases_rows_and_min_size(tmp_path):
    run, records = make_run(tmp_path / "run", ["no_flip"] * 30)
    sizes = {n: case_grid(run, records[:n]).size for n in (3, 10, 20, 30)}
    assert sizes[3][0] < sizes[10][0] == sizes[20][0] == sizes[30][0]  # 10 columns per row by default
    block = sizes[20][1] - sizes[10][1]
    assert block > 3 * 96 and sizes[30][1] - sizes[20][1] == block and sizes[3][1] == sizes[10][1]
    five = case_grid(run, records[:20], columns=5).size
    assert five[0] < sizes[20][0] and five[1] == sizes[10][1] + 3 * block  # 4 rows of 5
    bigger = case_grid(run, records[:10], min_size=192).size
    assert bigger[0] > sizes[10][0] and bigger[1] - sizes[10][1] >= 3 * 96
    rgb_run, rgb = make_run(tmp_path / "rgb", ["no_flip"] * 2, size=256, mode="RGB")
    assert case_grid(rgb_run, rgb).size[1] > 3 * 256  # 256 px tiles are not shrunk


def test_captions_name_case_labels_and_verdict():
    base = {"method": "hynea", "run": "r", "task": "multiclass", "seed": 1}
    judged = CaseRecord(**base, case_id="c3-0", origin_class=3, result_label=5, verdict="valid_failure")
    lines = caption(judged)
    assert [text for text, _ in lines] == ["c3-0", "class 3 -> SUT label 5", "valid failure"]
    assert lines[2][1] == (0, 140, 0)
    assert caption(judged.model_copy(update={"verdict": "semantic_change"}))[2][0] == "semantic change"
    assert caption(judged.model_copy(update={"verdict": None}))[2][0] == "not judged"
    assert caption(judged.model_copy(update={"error": "oom"}))[2][0] == "error"
    split = judged.model_copy(update={"verdict": "ambiguous", "judge_labels": {"a": 3, "b": 5}})
    assert [text for text, _ in caption(split)] == ["c3-0", "class 3 -> SUT label 5", "judges 3 5", "ambiguous"]
    assert caption(judged.model_copy(update={"verdict": "degraded"}))[2][0] == "degraded"
    unaccepted = caption(judged.model_copy(update={"verdict": "unaccepted", "accepted": False, "flipped": True}))
    assert unaccepted[2] == ("unaccepted", (150, 150, 150))
    unjudged = caption(judged.model_copy(update={"verdict": None, "accepted": False, "flipped": True}))
    assert unjudged[2][0] == "unaccepted", "a flip on a result its method did not accept is marked, judged or not"


def test_error_cases_get_a_column_without_images(tmp_path):
    run, records = make_run(tmp_path / "run", ["valid_failure", None, "ambiguous"], errors={1})
    assert case_grid(run, records).size == case_grid(*make_run(tmp_path / "ok", ["no_flip"] * 3)).size
    with pytest.raises(ValueError, match="no test case"):
        case_grid(run, [records[0].model_copy(update={"seed": None})])


def test_write_grids_writes_the_valid_failures_grid_with_only_those_cases(tmp_path):
    verdicts = ["valid_failure", "semantic_change", "valid_failure", "ambiguous", "no_flip", None]
    run, records = make_run(tmp_path / "run", verdicts)
    written = write_grids(run, records)
    assert written == [run / "grid.png", run / "grid_valid_failures.png"]
    valid = [r for r in records if r.verdict == "valid_failure"]
    with Image.open(run / "grid_valid_failures.png") as image:
        assert image.size == case_grid(run, valid, title="hynea / r: 2 valid failures of 5 judged cases").size
        assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(
            case_grid(run, valid, title="hynea / r: 2 valid failures of 5 judged cases")))
    with Image.open(run / "grid.png") as image:
        assert image.size == case_grid(run, records, title="hynea / r: 6 cases").size


def test_the_valid_failures_grid_never_shows_an_unaccepted_case(tmp_path):
    run, records = make_run(tmp_path / "run", ["valid_failure", "unaccepted", "no_flip"])
    records[1] = records[1].model_copy(update={"accepted": False})
    # a hand-written record that still calls an unaccepted result valid: left out all the same
    stale = records[0].model_copy(update={"accepted": False, "case_id": "c9-9"})
    written = write_grids(run, [*records, stale])
    assert run / "grid_valid_failures.png" in written
    title = "hynea / r: 1 valid failures of 4 judged cases"
    with Image.open(run / "grid_valid_failures.png") as image:
        assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(case_grid(run, records[:1], title=title)))
    only = write_grids(run, [records[1], records[2]])
    assert only == [run / "grid.png"]


def test_no_valid_failure_writes_no_valid_failures_grid(tmp_path):
    run, records = make_run(tmp_path / "run", ["semantic_change", "no_flip", None])
    assert write_grids(run, records) == [run / "grid.png"]
    assert not (run / "grid_valid_failures.png").exists()
    assert write_grids(run, []) == []


def test_detection_tiles_show_the_confident_boxes_in_red_for_the_class_under_test(tmp_path):
    from hynea_pl.report.grid import OTHER_BOX, TARGET_BOX, draw_boxes

    tile = Image.new("RGB", (96, 96))  # a 32 px image upscaled 3x
    boxes = [[2, 2, 10, 10, 3, 0.9], [20, 20, 30, 30, 7, 0.8], [12, 12, 18, 18, 3, 0.4]]
    out = np.asarray(draw_boxes(tile, boxes, 3.0, target=3))
    assert tuple(out[18, 6]) == TARGET_BOX  # the left edge of the class-3 box, at x = 2 * 3
    assert tuple(out[75, 60]) == OTHER_BOX  # the left edge of the class-7 box
    assert not np.any(np.all(out[40:50, 36] == TARGET_BOX, axis=-1)), "a box at confidence 0.4 is not drawn"
    # through a record: the grid draws the origin's and the result's boxes
    run, records = make_run(tmp_path / "run", ["valid_failure"], mode="RGB")
    det = records[0].model_copy(update={"task": "detection", "target": 3, "origin_boxes": [boxes[0]],
                                        "result_boxes": [boxes[1]]})
    grid = np.asarray(case_grid(run, [det], min_size=96))
    assert np.any(np.all(grid == TARGET_BOX, axis=-1)) and np.any(np.all(grid == OTHER_BOX, axis=-1))
    plain = np.asarray(case_grid(run, records, min_size=96))
    assert not np.any(np.all(plain == TARGET_BOX, axis=-1))
