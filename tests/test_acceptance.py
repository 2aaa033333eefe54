"""A method checks its own result before it stops (hynea_pl.methods.acceptance), tries again within its budget when a
run ends without an accepted result (the case loop's attempts), and may not learn from the verdict's data."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from test_cli import tiny_args
from test_hynea_case import make_case, make_trainer
from tiny_components import ScriptedFlipSUT
from torch import nn

from hynea_pl.callbacks import FlipEarlyStopping
from hynea_pl.campaign import Campaign, run_campaign
from hynea_pl.campaign.config import parse_config
from hynea_pl.campaign.validation import check_verdict_independent
from hynea_pl.methods import Acceptance
from hynea_pl.methods.acceptance import AcceptanceTest
from hynea_pl.zoo.augment import gaussian_blur
from hynea_pl.zoo.labelled.classifier import SmallCNN
from hynea_pl.zoo.mnist.data import load_digits
from hynea_pl.zoo.profiles import get_profile


class Pooled(nn.Module):
    """Fixed features: 4x4 average pooling ``(B, 1, 32, 32) -> (B, 64)``."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(images, 4).flatten(1)


@pytest.fixture(scope="module")
def digits():
    return load_digits(get_profile("tiny").data).method


@pytest.fixture(scope="module")
def acceptance(digits) -> AcceptanceTest:
    return AcceptanceTest(Pooled(), digits.train_images, digits.train_labels, quantile=0.99)


def test_real_digits_pass_and_blobs_noise_and_smears_do_not(acceptance, digits):
    real = acceptance.readings(digits.test_images, digits.test_labels)  # real digits it was not fitted on
    assert real["passed"].double().mean() >= 0.9
    smeared = gaussian_blur(digits.test_images, 3.0)
    assert acceptance(smeared, digits.test_labels).double().mean() <= 0.1
    assert not acceptance(torch.rand(10, 1, 32, 32, generator=torch.Generator().manual_seed(0)) * 0.3,
                          torch.arange(10)).any()
    ys, xs = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    blob = torch.exp(-((ys - 16) ** 2 + (xs - 16) ** 2) / 150.0).expand(10, 1, 32, 32)  # a smear of ink
    assert acceptance(blob, torch.arange(10)).sum() <= 1  # 4x4-pooled features read a round smear as a 0 at most


def test_a_faded_or_lit_digit_is_read_at_its_own_levels_and_a_blank_is_refused(acceptance, digits):
    """People read a digit whatever its contrast or lighting: the test sets each image to its own levels first. An
    image whose stroke hardly stands above its background (less than ``min_contrast``) is refused."""
    real = acceptance.readings(digits.test_images, digits.test_labels)
    kept = real["passed"]
    images, labels = digits.test_images[kept], digits.test_labels[kept]
    faded = acceptance.readings(images * 0.6, labels)
    assert faded["passed"].all()
    assert torch.allclose(faded["contrast"], real["contrast"][kept] * 0.6, atol=1e-6)
    lit = acceptance.readings(0.4 + 0.6 * images, labels)  # a lighter background, the same digit
    assert lit["passed"].all()
    assert torch.allclose(lit["ink"], real["ink"][kept], atol=1e-3)
    blank = acceptance.readings(images * 0.2, labels)
    assert not blank["passed"].any() and (blank["contrast"] < acceptance.min_contrast).all()


def test_bad_fitting_data_is_one_line(digits):
    with pytest.raises(ValueError, match="quantile must be in"):
        AcceptanceTest(Pooled(), digits.train_images, digits.train_labels, quantile=1.0)
    with pytest.raises(ValueError, match=">= 2 images of every class"):
        AcceptanceTest(Pooled(), digits.train_images[:5], digits.train_labels[:5])
    with pytest.raises(ValueError, match="min_contrast must be in"):
        AcceptanceTest(Pooled(), digits.train_images, digits.train_labels, min_contrast=1.0)


class RejectsUntil(nn.Module):
    """A scripted acceptance test: refuses the first ``rejections`` results it is asked about."""

    def __init__(self, rejections: int) -> None:
        super().__init__()
        self.rejections, self.asked = rejections, 0

    def forward(self, images: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
        self.asked += 1
        return torch.full((len(images),), self.asked > self.rejections)


def test_the_search_goes_on_past_a_rejected_flip():
    sut = ScriptedFlipSUT(SmallCNN(channels=(4, 8), hidden=16), flip_on=2)
    acceptance = RejectsUntil(2)
    case = make_case(sut=sut, acceptance=Acceptance(test=acceptance))
    trainer = make_trainer(10, [FlipEarlyStopping()])
    trainer.fit(case)
    assert acceptance.asked == 3, "asked at steps 2, 3 and 4: only steps the SUT flipped"
    assert trainer.global_step == 4 and case.result.found and case.result.step == 4


def attempts_args(tmp_path, name: str, *extra: str) -> list[str]:
    return tiny_args(tmp_path, name, "--model.init_args.steering.model", "null", *extra)[1:]


def records(run) -> list[dict]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("batch_size", [1, 2])
def test_a_run_without_an_accepted_result_restarts_and_the_budget_holds_across_runs(batch_size, tiny_zoo, tmp_path):
    """The tiny SUT does not flip in 3 steps: every run ends without a result, so each case runs again, aimed at the
    origin's next most likely class, until its 7 evaluations are spent (3 + 3 + 1 steps of one evaluation), each at
    the same learning rates. In a batch a case's next run takes the next free slot (one after the other: two cases
    fill the two slots)."""
    campaign = Campaign.from_config(parse_config(attempts_args(
        tmp_path, "restarts", "--model.init_args.retries.attempts", "4", "--budget.max_evals", "7",
        "--cases.batch_size", str(batch_size))))
    run_campaign(campaign)
    for record in records(tmp_path / "restarts"):
        assert record["error"] is None and record["sut_evals"] == 7 and record["steps"] == 7
        attempts = record["diagnostics"]["attempts"]
        assert [a["attempt"] for a in attempts] == [0, 1, 2]
        assert [a["sut_evals"] for a in attempts] == [3, 3, 1]
        assert [a["stop_reason"] for a in attempts] == ["max_steps", "max_steps", "budget"]
        ranked = sorted(range(10), key=lambda k: -record["origin_pred"][k])
        assert [a["target"] for a in attempts] == ranked[1:4], "the second, third, fourth most likely class"
        assert len({a["lr_max"] for a in attempts}) == 1
        assert not any(a["found"] for a in attempts)


def test_without_retarget_every_run_aims_at_the_same_class(tiny_zoo, tmp_path):
    campaign = Campaign.from_config(parse_config(attempts_args(
        tmp_path, "same", "--model.init_args.retries.attempts", "3", "--budget.max_evals", "6",
        "--model.init_args.retries.retarget", "false", "--cases.classes", "[1]")))
    run_campaign(campaign)
    (record,) = records(tmp_path / "same")
    targets = [a["target"] for a in record["diagnostics"]["attempts"]]
    assert targets == [targets[0]] * 2 and [a["lr_max"] for a in record["diagnostics"]["attempts"]][0] > 0


def test_the_budget_ends_the_runs_and_the_targets_come_round_again(tiny_zoo, tmp_path):
    """More runs allowed than the budget pays for: the budget ends a case that finds nothing; past the last
    candidate the targets come round again."""
    campaign = Campaign.from_config(parse_config(attempts_args(
        tmp_path, "budget", "--model.init_args.retries.attempts", "50", "--trainer.max_steps", "1",
        "--budget.max_evals", "11", "--cases.classes", "[1]")))
    run_campaign(campaign)
    (record,) = records(tmp_path / "budget")
    attempts = record["diagnostics"]["attempts"]
    assert record["sut_evals"] == 11 and len(attempts) == 11
    targets = [a["target"] for a in attempts]
    assert len(set(targets[:9])) == 9 and targets[9:] == targets[:2]


def test_a_found_result_ends_the_case_without_another_run(tiny_zoo, tmp_path):
    from tiny_components import DIGIT_CENTROIDS

    campaign = Campaign.from_config(parse_config(attempts_args(
        tmp_path, "found", *DIGIT_CENTROIDS, "--model.init_args.retries.attempts", "3", "--model.init_args.acceptance.test", "null",
        "--model.init_args.search.lr_max", "0.1", "--trainer.max_steps", "8", "--budget.max_evals", "100")))
    run_campaign(campaign)
    found = [r for r in records(tmp_path / "found") if r["diagnostics"]["stop_reason"] == "flipped"]
    assert found, "the nearest-centroid SUT reaches its target within 8 steps at lr 0.1"
    for record in found:
        assert record["flipped"] and "attempts" not in record["diagnostics"] and record["steps"] <= 8
        assert record["sut_evals"] == record["steps"]


class Tagged(nn.Module):
    """A model that names the data it learnt from and its family."""

    def __init__(self, data: set[str], family: str = "cnn") -> None:
        super().__init__()
        self.training_data, self.family = data, family


def test_a_method_model_that_learnt_from_the_verdicts_data_is_refused():
    judges, realism = Tagged({"zoo-digits:judges"}, "resnet"), Tagged({"zoo-digits:held_out"}, "typicality")
    check_verdict_independent({"reference": Tagged({"zoo-digits:method"})}, judges, realism)
    for data in ("zoo-digits:judges", "zoo-digits:held_out"):
        with pytest.raises(ValueError, match=f"model.init_args.acceptance.test learnt from {data}"):
            check_verdict_independent({"acceptance.test": Tagged({data})}, judges, realism)
    with pytest.raises(ValueError, match="family resnet, like the model.init_args.acceptance.test"):
        check_verdict_independent({"acceptance.test": Tagged({"zoo-digits:method"}, "resnet")}, judges, realism)


def test_the_zoo_acceptance_fitted_on_the_judges_digits_is_refused(tiny_zoo, tmp_path):
    acceptance = ["--model.init_args.acceptance.test", "hynea_pl.zoo.labelled.acceptance.ZooAcceptance",
                  "--model.init_args.acceptance.test.init_args.profile", "tiny"]
    campaign = Campaign.from_config(parse_config(attempts_args(tmp_path, "ok", *acceptance)))
    assert campaign.method_models["acceptance.test"].training_data == {"zoo-digits:method"}
    with pytest.raises(ValueError, match="acceptance.test learnt from zoo-digits:judges, which the verdict"):
        Campaign.from_config(parse_config(attempts_args(
            tmp_path, "refused", *acceptance, "--model.init_args.acceptance.test.init_args.split", "judges")))
    assert not (tmp_path / "refused").exists()


def test_the_paper_overlay_drops_what_the_default_adds():
    config = parse_config(["--config", "configs/mnist.yaml", "--config", "configs/overlays/hynea_paper.yaml"]).config
    hynea = config.model.init_args
    assert hynea.steering.model is None and hynea.acceptance.test is None and hynea.retries.attempts == 1
    assert hynea.acceptance.margin == 0 and hynea.acceptance.margin_ratio == 0
    assert hynea.views is None and hynea.prior.weight == 0  # one SUT evaluation per step, no realism prior
    assert config.output.method == "hynea-paper"
    default = parse_config(["--config", "configs/mnist.yaml"]).config.model.init_args
    assert default.acceptance.test is not None and default.retries.attempts > 1 and default.acceptance.margin_ratio > 0
    assert default.views is None and default.retries.retarget  # one SUT evaluation a step; each run a fresh target
    assert default.search == hynea.search, "the paper's overlay keeps the default's search"
    views = parse_config(["--config", "configs/mnist.yaml", "--config", "configs/overlays/hynea_views.yaml"]).config
    assert views.model.init_args.views.count == 6 and views.output.method == "hynea-views"
