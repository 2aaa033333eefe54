"""The truncation probes: schedules, the acceptance gate, the first flipping psi and the smallest flipping lambda on
a crafted generator and SUT (grey level = psi, class 0 above a threshold), the screening thresholds, the budget."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from tiny_stylegan import CraftedGAN, threshold_sut

from hynea_pl.baselines.truncation import (
    TruncationProbeCase,
    acceptance,
    bisect_smallest_flip,
    resolve_schedule,
    screen,
    style_mix,
    top_rivals,
)
from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.generators.stylegan import StyleGANGenerator


def run(case: TruncationProbeCase, budget: int = 2700) -> L.Trainer:
    trainer = L.Trainer(max_steps=5000, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                        callbacks=[FlipEarlyStopping(), SUTEvaluationBudget(budget)])
    trainer.fit(case)
    return trainer


def crafted_case(threshold: float, **kwargs) -> TruncationProbeCase:
    return TruncationProbeCase(StyleGANGenerator(network=CraftedGAN()), threshold_sut(threshold), origin_class=0,
                               seed=1, **kwargs)


def test_schedules_are_the_papers_and_bad_ones_fail():
    assert resolve_schedule("fixed") == (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
    assert resolve_schedule("adaptive") == (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5)
    assert resolve_schedule([1.0, 0.4]) == (1.0, 0.4)
    for bad in ([0.9, 0.5], [1.0, 0.7, 0.8], [1.0, 0.0]):
        with pytest.raises(ValueError, match="descends from 1.0"):
            resolve_schedule(bad)
    with pytest.raises(ValueError, match="unknown truncation schedule"):
        resolve_schedule("steep")


def test_acceptance_gate_and_rivals():
    probs = torch.tensor([0.05, 0.85, 0.10] + [0.0] * 7)
    assert acceptance(probs, 1, p_min=0.8, delta=0.5)["passed"]
    assert not acceptance(probs, 1, p_min=0.9, delta=0.5)["passed"]  # confidence
    assert not acceptance(probs, 1, p_min=0.8, delta=0.8)["passed"]  # margin 0.75
    assert not acceptance(probs, 2, p_min=0.0, delta=0.0)["passed"]  # another class is predicted
    assert top_rivals(probs, 1, 2) == [2, 0]


@pytest.mark.parametrize(("schedule", "psi_star", "probes"), [("fixed", 0.7, 3), ("adaptive", 0.75, 5)])
def test_first_flip_records_the_first_psi_that_flips_the_crafted_sut(schedule, psi_star, probes):
    case = crafted_case(0.77, schedule=schedule)  # grey level = psi: class 0 down to 0.77
    trainer = run(case)
    info = case.record_diagnostics()
    assert info["psi_star"] == psi_star and info["baseline"]["passed"] and info["salvaged_at"] is None
    assert case.result.found and int(case.result.output.argmax()) == 1
    assert case.result.image.mean().item() == pytest.approx(psi_star, abs=1e-6)
    # one SUT evaluation per probe (psi = 1.0 is the origin, read once and not counted), stop at the first flip
    assert case.sut_evals == probes == trainer.global_step == info["probes"] == case.sut.images_seen - 1
    assert case.method_name == f"truncation-first-flip-{schedule}"


def test_a_seed_that_never_flips_descends_the_whole_schedule():
    case = crafted_case(0.3)
    run(case)
    assert case.record_diagnostics()["psi_star"] is None and not case.result.found and case.sut_evals == 5


def test_a_seed_failing_the_gate_is_dropped_or_salvaged():
    def unsure_at_white(**kwargs) -> TruncationProbeCase:  # grey 1.0 reads class 0 at p ~ 0.6 only
        return TruncationProbeCase(StyleGANGenerator(network=CraftedGAN()), threshold_sut(0.3, cap=0.95),
                                   origin_class=0, seed=1, **kwargs)

    dropped = unsure_at_white()
    run(dropped)
    info = dropped.record_diagnostics()
    assert info["dropped"] == "baseline gate" and not info["baseline"]["passed"] and dropped.sut_evals == 0
    assert not dropped.result.found and torch.equal(dropped.result.image, dropped.origin_image)
    salvaged = unsure_at_white(salvage=True, schedule=[1.0, 0.9, 0.6, 0.2])
    run(salvaged)  # grey 0.9 passes the gate (the seed is salvaged there), 0.2 flips
    info = salvaged.record_diagnostics()
    assert info["salvaged_at"] == 0.9 and info["psi_star"] == 0.2 and salvaged.result.found
    assert salvaged.sut_evals == 3


def test_bisection_finds_the_smallest_flipping_lambda():
    calls: list[float] = []

    def flips(lam: float) -> bool:
        calls.append(lam)
        return lam > 0.3

    found = bisect_smallest_flip(flips, steps=8)
    assert 0.3 < found <= 0.3 + 2**-8 and len(calls) == 9 and calls[0] == 1.0
    assert bisect_smallest_flip(lambda lam: False, steps=8) is None


def test_style_mix_formula():
    w_c, w_r = torch.randn(2, 8, 4), torch.randn(2, 8, 4)
    mixed = style_mix(w_c, w_r, [3, 5], 0.25)
    assert torch.equal(mixed[:, [0, 1, 2, 4, 6, 7]], w_c[:, [0, 1, 2, 4, 6, 7]])
    assert torch.allclose(mixed[:, [3, 5]], 0.75 * w_c[:, [3, 5]] + 0.25 * w_r[:, [3, 5]])


def test_style_mix_finds_the_smallest_flipping_lambda_on_the_crafted_sut():
    # grey = 1 - lambda * |L| / 8; class 0 down to 0.85: one layer never flips; [5, 6] flips above lambda 0.6
    case = crafted_case(0.85, mode="style-mix", schedule=[1.0], top_k=1, search_steps=6)
    run(case)
    info = case.record_diagnostics()
    assert info["rival"] == 1 and info["layers"] == [5, 6] and info["frontier"] is True
    assert 0.6 < info["lambda"] <= 0.6 + 2**-6
    assert info["screening"]["passed"] and info["screening"]["l2"] <= 0.2 and info["screening"]["ssim"] >= 0.95
    # [7], [6], [5], [4], [3]: one evaluation each (lambda = 1 does not flip); [5, 6]: 1 + 6
    assert case.sut_evals == 5 + 7 and case.result.found and case.method_name == "truncation-style-mix"


def test_screening_thresholds():
    source = torch.full((1, 1, 32, 32), 1.0)
    near, far = torch.full_like(source, 0.85), torch.full_like(source, 0.75)
    assert screen(near, source)["passed"]  # L2 0.15, SSIM ~0.99
    result = screen(far, source)  # L2 0.25 > 0.2
    assert not result["passed"] and result["l2"] == pytest.approx(0.25, abs=1e-4)
    noisy = (source - 0.1 * torch.rand(source.shape, generator=torch.Generator().manual_seed(0)))
    low_ssim = screen(torch.rand_like(source), source, l2_max=1.0)
    assert not low_ssim["passed"] and low_ssim["ssim"] < 0.95
    assert screen(noisy, source, ssim_min=0.0)["passed"] and not screen(noisy, source, l2_max=0.01)["passed"]


def test_the_budget_stops_a_long_style_mix_search():
    case = crafted_case(0.0, mode="style-mix", schedule="adaptive", top_k=2)  # nothing ever flips
    trainer = run(case, budget=20)
    # every rival maps to the same grey image here: repeated images are free, so steps outnumber evaluations
    assert case.sut_evals == 20 < trainer.global_step and not case.result.found and case._next is not None


def test_the_probes_refuse_a_truncated_origin_and_unknown_modes():
    with pytest.raises(ValueError, match="truncation_psi 1.0"):
        TruncationProbeCase(StyleGANGenerator(network=CraftedGAN(), truncation_psi=0.7), threshold_sut(0.5))
    with pytest.raises(ValueError, match="unknown truncation probe mode"):
        crafted_case(0.5, mode="zigzag")


def test_table1_row_counts_seeds_frontiers_and_valid_inputs(tmp_path):
    from torchvision.utils import save_image

    from hynea_pl.baselines.truncation import table1_row
    from hynea_pl.schema import CaseRecord

    (tmp_path / "cases").mkdir()
    rows = []
    for i, (flipped, verdict, skipped, passed) in enumerate(
            [(True, "valid_failure", 0, True), (True, "semantic_change", 2, False), (False, "no_flip", 1, None),
             (True, "valid_failure", 0, False)]):
        save_image(torch.full((1, 32, 32), i / 4), tmp_path / "cases" / f"{i}.png")
        rows.append(CaseRecord(method="truncation-style-mix", run="r", task="multiclass", case_id=f"c0-{i}", seed=i,
                               origin_class=0, skipped_seeds=skipped, flipped=flipped, verdict=verdict,
                               result_image=f"cases/{i}.png",
                               diagnostics={"screening": None if passed is None else {"passed": passed}}))
    (tmp_path / "records.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in rows))
    row = table1_row(tmp_path, embedder=lambda images: images.flatten(1))
    assert (row["seeds"], row["frontiers"], row["screened"], row["valid"]) == (7, 3, 1, 2)
    assert row["valid_rate"] == pytest.approx(2 / 3) and row["fault_rate"] == pytest.approx(2 / 7)
    assert row["seeds_per_valid"] == pytest.approx(3.5)
    # grey 0 vs 0.75 over 32 x 32 pixels (save_image writes 3 channels): 0.75 * sqrt(3 * 1024)
    assert row["diversity"] == pytest.approx(0.75 * (3 * 1024) ** 0.5, rel=0.02)
