"""Realism of a run folder (run_realism): FID / KID of its results, valid failures and origins read from its PNGs, and
the unavailable paths."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from hynea_pl.evaluation import run_realism
from hynea_pl.schema import CaseRecord

KEYS = {"fid", "kid_mean", "kid_std", "kid_subset_size", "kid_subsets", "precision", "recall", "density", "coverage",
        "prdc_nearest_k", "n_images", "n_reference", "features"}


def test_run_realism_reports_unavailable_entries(tmp_path, empty_torch_home, offline):
    base = {"method": "hynea", "run": "r", "task": "multiclass", "origin_class": 1}
    records = [CaseRecord(**base, case_id=f"c1-{i}", seed=i, origin_image=f"cases/{i}_o.png",
                          result_image=f"cases/{i}_r.png") for i in range(3)]
    reference = torch.rand(8, 1, 32, 32)
    out = run_realism(tmp_path, records, "inception", reference)
    assert out["results"]["value"] is None and "inception_v3" in out["results"]["unavailable"]
    assert "no reference" in run_realism(tmp_path, records, nn.Flatten(), None)["origins"]["unavailable"]
    assert ">= 2 cases" in run_realism(tmp_path, records[:1], nn.Flatten(), reference)["results"]["unavailable"]


class GreyPool(nn.Module):
    """Known features of ``(B, 1|3, H, W)`` images: the grey level of each 2x2 quadrant -> ``(B, 4)``."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return nn.functional.adaptive_avg_pool2d(images.mean(1, keepdim=True), 2).flatten(1)


def test_run_realism_scores_results_and_origins_of_a_run_folder(tmp_path):
    from PIL import Image

    (tmp_path / "cases").mkdir()
    rng = np.random.default_rng(0)
    base = {"method": "hynea", "run": "r", "task": "multiclass", "origin_class": 1}
    records = []
    for i in range(12):
        origin = rng.integers(0, 128, (32, 32, 3), dtype=np.uint8)
        Image.fromarray(origin).save(tmp_path / f"cases/{i}_o.png")
        Image.fromarray(origin + 100).save(tmp_path / f"cases/{i}_r.png")  # results: brighter than the reference
        verdict = "valid_failure" if i < 5 else "no_flip"
        records.append(CaseRecord(**base, case_id=f"c1-{i}", seed=i, origin_image=f"cases/{i}_o.png",
                                  result_image=f"cases/{i}_r.png", verdict=verdict))
    records.append(CaseRecord(**base, case_id="c1-99", seed=99, error="oom"))  # an error case is left out
    reference = torch.rand(40, 1, 32, 32) * 0.5
    out = run_realism(tmp_path, records, GreyPool(), reference, kid_subsets=10)
    assert set(out["results"]) == KEYS and out["results"]["n_images"] == 12 and out["results"]["kid_subsets"] == 10
    assert out["valid_failures"]["n_images"] == 5, "the valid failures alone, with their own sample size"
    for r in records[1:5]:
        r.verdict = "semantic_change"
    assert ">= 2 of them" in run_realism(tmp_path, records, GreyPool(), reference)["valid_failures"]["unavailable"]
    assert out["results"]["features"] == "GreyPool" and out["origins"]["n_reference"] == 40
    assert out["results"]["fid"] > out["origins"]["fid"] and out["results"]["kid_mean"] > out["origins"]["kid_mean"]
