"""evaluate_run on hand-made run folders (records.jsonl + PNGs written here)."""

import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from hynea_pl.images import load_image
from hynea_pl.evaluation import evaluate_run, read_metrics
from hynea_pl.metrics import ms_ssim
from hynea_pl.schema import SCHEMA_VERSION


def _png(path, value, size=32, rgb=False):
    arr = np.full((size, size, 3) if rgb else (size, size), value, dtype=np.uint8)
    Image.fromarray(arr).save(path)
    return path.name


def _write(run_dir, records):
    with open(run_dir / "records.jsonl", "w") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")
        fh.write("\n")  # a trailing blank line is tolerated


def _record(i, origin_pred, result_pred, flipped, sut_evals, runtime, ms, origin_img, result_img, error=None):
    target = int(np.argsort(origin_pred)[-2])
    return {"schema_version": SCHEMA_VERSION, "method": "hynea", "run": "run", "task": "multiclass",
            "case_id": f"c{i}", "seed": i, "origin_class": int(np.argmax(origin_pred)), "target": target,
            "flipped": flipped, "target_reached": flipped and int(np.argmax(result_pred)) == target,
            "sut_evals": sut_evals, "steps": sut_evals, "runtime_s": runtime, "origin_pred": origin_pred,
            "result_pred": result_pred, "ms_ssim": ms, "origin_image": origin_img, "result_image": result_img,
            "error": error}


@pytest.fixture(autouse=True)
def _offline(offline):
    """evaluate_run must never reach the network (LPIPS / ResNet weights come from the cache or nowhere)."""


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    (d / "images").mkdir(parents=True)
    img = lambda name, v: "images/" + _png(d / "images" / name, v)  # noqa: E731
    records = [
        # flipped to the second most likely class: not an escape
        _record(0, [0.1, 0.7, 0.2], [0.1, 0.3, 0.6], True, 10, 1.0, 0.8, img("o0.png", 51), img("r0.png", 102)),
        # flipped to class 2, outside the origin's top-2 {0, 1}: escape; ms_ssim missing -> recomputed (identical -> 1)
        _record(1, [0.6, 0.3, 0.1], [0.2, 0.1, 0.7], True, 20, 2.0, None, img("o1.png", 102), img("r1.png", 102)),
        # not flipped
        _record(2, [0.5, 0.4, 0.1], [0.5, 0.3, 0.2], False, 30, 3.0, 0.9, img("o2.png", 153), img("r2.png", 204)),
        # crashed: counts as not flipped, excluded from image metrics (its images do not even exist)
        _record(3, [0.5, 0.4, 0.1], [0.1, 0.4, 0.5], True, 40, 4.0, None, "images/missing.png", "images/missing2.png",
                error="RuntimeError: CUDA out of memory"),
    ]
    _write(d, records)
    return d


def test_evaluate_run_hand_values(run_dir):
    l1 = lambda preds, target: (preds - target).abs().flatten(1).mean(1)  # noqa: E731
    mean_pixel = lambda images: images.mean(dim=(2, 3))  # noqa: E731 - (B, 1, H, W) -> (B, 1)
    row = evaluate_run(run_dir, embedder=mean_pixel, lpips_model=l1)
    assert row["method"] == "hynea" and row["task"] == "multiclass"
    assert (row["n_cases"], row["n_ok"], row["n_errors"], row["n_flipped"]) == (4, 3, 1, 2)
    assert row["misclassification_rate"] == pytest.approx(2 / 4)  # errors count as not flipped
    assert row["misclassification_rate"] == pytest.approx(row["flip_rate"])
    assert row["target_reached_rate"] == pytest.approx(1 / 4)  # case 0 reached its target, case 1 a third class
    assert row["misclassification_rate_ok"] == pytest.approx(2 / 3)
    assert row["flipped_mismatch"] == 0
    assert row["escape_ratio"] == pytest.approx(1 / 3)
    assert row["confidence_reduction"] is None
    # budget to find a failure: flipped valid cases only (10, 20); all cases (10, 20, 30, 40) separately
    assert row["median_sut_evals_flipped"] == 15 and row["mean_sut_evals_flipped"] == 15
    assert row["median_sut_evals_all"] == 25 and row["mean_sut_evals_all"] == 25 and row["total_sut_evals"] == 100
    assert row["mean_runtime_s"] == pytest.approx(2.5)
    # MS-SSIM: recorded 0.8 and 0.9, recomputed 1.0 for the identical pair
    assert row["ms_ssim_source"] == "records+recomputed"
    assert row["median_ms_ssim"] == pytest.approx(0.9, abs=1e-6)
    assert row["mean_ms_ssim"] == pytest.approx(0.9, abs=1e-6)
    assert (row["n_image_pairs"], row["n_images_missing"]) == (3, 0)
    # LPIPS stand-in: |result - origin| = 0.2, 0, 0.2
    assert row["lpips"] == pytest.approx(0.4 / 3, abs=1e-6)
    # embeddings = mean pixel: origins (0.2, 0.4, 0.6), results (0.4, 0.4, 0.8)
    assert row["diversity"] == pytest.approx(0.16 / 3, abs=1e-6)
    assert row["diversity_origins"] == pytest.approx(0.04, abs=1e-6)
    assert row["trace_difference"] == pytest.approx(0.16 / 3 - 0.04, abs=1e-6)
    on_disk = json.loads((run_dir / "metrics.json").read_text())
    assert on_disk == row


def test_read_metrics_gives_the_row_written_until_the_records_change(run_dir):
    import os

    assert read_metrics(run_dir) is None  # never scored
    row = evaluate_run(run_dir, lpips_model=lambda preds, target: (preds - target).abs().flatten(1).mean(1))
    assert read_metrics(run_dir) == row
    later = (run_dir / "metrics.json").stat().st_mtime_ns + 10**9
    os.utime(run_dir / "records.jsonl", ns=(later, later))  # records appended after the scoring
    assert read_metrics(run_dir) is None


def test_evaluate_run_marks_unavailable_metrics(run_dir, empty_torch_home):
    row = evaluate_run(run_dir)  # real LPIPS (VGG) without cached weights, no embedder
    assert row["lpips"]["value"] is None and "vgg16" in row["lpips"]["unavailable"]
    assert row["diversity"] == {"value": None, "unavailable": row["diversity"]["unavailable"]}
    assert "embedder" in row["diversity"]["unavailable"]
    assert row["misclassification_rate"] == pytest.approx(0.5)  # task metrics unaffected
    text = (run_dir / "metrics.json").read_text()
    assert "NaN" not in text and "Infinity" not in text


def test_evaluate_run_rgb_images_and_flag_mismatch(tmp_path):
    d = tmp_path / "rgb"
    d.mkdir()
    o, r = _png(d / "o.png", 100, rgb=True), _png(d / "r.png", 100, rgb=True)
    # recorded flipped=False although the argmax changed: eq. 9 wins, the mismatch is reported
    _write(d, [_record(0, [0.9, 0.1], [0.2, 0.8], False, 5, 0.5, None, o, r)])
    assert load_image(d / o).shape == (3, 32, 32)
    row = evaluate_run(d, embedder=lambda x: x.mean(dim=(2, 3)), lpips_model=lambda a, b: (a - b).abs().mean((1, 2, 3)))
    assert row["misclassification_rate"] == 1.0 and row["flipped_mismatch"] == 1
    assert row["median_ms_ssim"] == pytest.approx(1.0, abs=1e-5) and row["ms_ssim_source"] == "recomputed"
    assert row["lpips"] == pytest.approx(0.0)
    assert row["diversity"] is None  # one sample: undefined (NaN -> null)
    assert row["escape_ratio"] == 0.0


def test_evaluate_run_binary_and_detection(tmp_path):
    b = tmp_path / "binary"
    b.mkdir()
    rec = _record(0, [1.0, -1.0, 2.0, 0.5], [1.0, 1.0, -2.0, 0.5], True, 3, 0.1, 0.7, "o.png", "r.png")
    rec.update(task="binary", target=2)  # the tested attribute
    _write(b, [rec])
    row = evaluate_run(b, write=False)
    assert not (b / "metrics.json").exists()
    assert row["misclassification_rate"] == 1.0
    assert row["escape_ratio"] == pytest.approx(1 / 3)  # attribute 1 of the 3 others flipped
    assert row["n_images_missing"] == 1 and row["lpips"]["value"] is None
    det = tmp_path / "det"
    det.mkdir()
    rec = _record(0, [0.9, 0.1], [0.3, 0.7], True, 3, 0.1, 0.7, "o.png", "r.png")
    rec.update(task="detection", target=0, origin_pred=[[2.0, -1.0], [-1.0, 1.0]],
               result_pred=[[-1.0, 1.0], [-1.0, 1.0]])  # raw logits, as the detector SUT records them
    _write(det, [rec])
    row = evaluate_run(det)
    assert row["misclassification_rate"] == pytest.approx(0.5)  # one of two detections changed class
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731 - class confidences are sigmoid(logit)
    assert row["confidence_reduction"] == pytest.approx((sig(2.0) - sig(-1.0)) / 2)  # class 0 drops, then 0
    assert row["escape_ratio"] is None


def test_ms_ssim_of_recomputed_constant_pair_matches_hand_value(tmp_path):
    a, b = load_image(tmp_path / _png(tmp_path / "a.png", 51)), load_image(tmp_path / _png(tmp_path / "b.png", 102))
    lum = (2 * 0.2 * 0.4 + 1e-4) / (0.04 + 0.16 + 1e-4)
    assert ms_ssim(b.unsqueeze(0), a.unsqueeze(0)).item() == pytest.approx(lum**0.2363, abs=1e-5)
    assert not math.isnan(ms_ssim(torch.zeros(1, 1, 32, 32), torch.zeros(1, 1, 32, 32)).item())


def test_validity_columns_count_unaccepted_flips_apart_from_failures():
    from hynea_pl.evaluation.rescore import stability_columns, validity_columns
    from hynea_pl.schema import CaseRecord

    def case(i, verdict, **fields):
        return CaseRecord(method="hynea", run="run", task="multiclass", case_id=f"c0-{i}", seed=i, origin_class=0,
                          flipped=verdict != "no_flip", verdict=verdict, stability_variants=6, stability_held=6,
                          sut_evals=10, **fields)

    cases = [case(0, "valid_failure", accepted=True), case(1, "unaccepted", accepted=False),
             case(2, "unaccepted", accepted=False), case(3, "no_flip", accepted=False)]
    columns = validity_columns(cases)
    assert columns["unaccepted_rate"] == pytest.approx(2 / 4) and columns["n_unaccepted"] == 2
    assert columns["valid_failure_rate"] == pytest.approx(1 / 4) and columns["n_valid_failures"] == 1
    assert columns["ambiguous_rate"] == columns["degraded_rate"] == columns["semantic_change_rate"] == 0
    assert columns["sut_evals_per_valid_failure"] == pytest.approx(40 / 1)
    stability = stability_columns(cases)  # every flip holds on its variants; only the valid failure is a failure
    assert stability["stable_failure_rate"] == pytest.approx(1 / 4)
    assert stability["stable_flip_rate"] == pytest.approx(3 / 4)
    assert validity_columns([case(0, None)])["unaccepted_rate"] is None  # no oracle: no verdict columns
