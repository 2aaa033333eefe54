"""HyNeACase: frozen weights, trainable parameters, early stop, budget, OneCycle, NaN losses, targets."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from tiny_components import NaNAfterOriginSUT, ScriptedFlipSUT, tiny_generator, tiny_sut

from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.methods import Acceptance, HyNeACase, NonFiniteLossError, PaperSearch, RealismPrior, Retries
from hynea_pl.zoo.labelled.classifier import SmallCNN


def make_trainer(max_steps: int, callbacks: list | None = None) -> L.Trainer:
    return L.Trainer(max_steps=max_steps, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                     enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                     callbacks=callbacks or [])


def make_case(sut=None, **kwargs) -> HyNeACase:
    torch.manual_seed(0)
    settings = {"origin_class": 3, "seed": 5, "search": PaperSearch(lr_min=1e-3, lr_max=1e-2), **kwargs}
    return HyNeACase(tiny_generator(num_inference_steps=2), sut if sut is not None else tiny_sut(), **settings)


def test_only_hypernet_and_projector_train_and_frozen_weights_stay_bit_identical():
    case = make_case()
    frozen_before = {k: v.clone() for k, v in [*case.generator.state_dict().items(),
                                                  *case.sut.state_dict().items()]}
    hypernet_before = {k: v.clone() for k, v in case.hypernet.state_dict().items()}
    make_trainer(3).fit(case)
    trainable = {name.split(".")[0] for name, p in case.named_parameters() if p.requires_grad}
    assert trainable == {"hypernet", "projector"}
    frozen_after = {**case.generator.state_dict(), **case.sut.state_dict()}
    assert frozen_before.keys() == frozen_after.keys()
    assert all(torch.equal(frozen_before[k], frozen_after[k]) for k in frozen_before)
    zero_layers = [case.hypernet.state_dict()[k] for k in hypernet_before if "controlnet_down_blocks" in k]
    assert any(layer.abs().sum() > 0 for layer in zero_layers), "the zero layers must have been trained"
    assert case.sut_evals == 3 and len(case.result.history) == 3


def test_fresh_case_reproduces_the_origin_before_any_update():
    case = make_case()
    case.setup("fit")
    with torch.no_grad():
        image = case.generate()
    torch.testing.assert_close(image, case.origin_image, atol=1e-5, rtol=0)


def test_flip_early_stopping_stops_at_the_exact_step():
    sut = ScriptedFlipSUT(SmallCNN(channels=(4, 8), hidden=16), flip_on=3)
    stopper = FlipEarlyStopping()
    case = make_case(sut=sut)
    trainer = make_trainer(10, [stopper])
    trainer.fit(case)
    assert trainer.global_step == 3 and case.sut_evals == 3 and stopper.flipped_at == 3
    assert case.result.found and case.result.step == 3


@pytest.mark.parametrize("budget", [1, 4])
def test_budget_stops_at_exactly_its_limit(budget):
    case = make_case()
    trainer = make_trainer(10, [SUTEvaluationBudget(budget)])
    trainer.fit(case)
    assert case.sut_evals == budget and trainer.global_step == budget


class ThreeEvaluationsPerStep(HyNeACase):
    """Stands in for a population method that spends 3 SUT evaluations per step."""

    evals_per_step = 3

    def training_step(self, batch, batch_idx):
        outputs = super().training_step(batch, batch_idx)
        self.sut_evals += 2
        return outputs


def test_budget_never_starts_a_step_that_would_overrun():
    torch.manual_seed(0)
    case = ThreeEvaluationsPerStep(tiny_generator(num_inference_steps=2), tiny_sut(), origin_class=3, seed=5)
    trainer = make_trainer(10, [SUTEvaluationBudget(7)])
    trainer.fit(case)
    assert trainer.global_step == 2 and case.sut_evals == 6


class LearningRates(L.Callback):
    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])


def test_learning_rate_follows_one_cycle_every_step():
    steps = 8
    recorder = LearningRates()
    case = make_case(search=PaperSearch(lr_min=1e-4, lr_max=1e-2, pct_start=0.3))
    make_trainer(steps, [recorder]).fit(case)
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=1e-4)
    reference = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=steps, pct_start=0.3,
                                                    div_factor=100.0, cycle_momentum=False)
    expected = []
    for _ in range(steps):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    assert recorder.lrs == pytest.approx(expected)
    assert recorder.lrs[0] == pytest.approx(1e-4) and max(recorder.lrs) == pytest.approx(1e-2, rel=0.05)


def test_non_finite_loss_raises_a_named_error():
    sut = NaNAfterOriginSUT(SmallCNN(channels=(4, 8), hidden=16))
    with pytest.raises(NonFiniteLossError, match="step 1"):
        make_trainer(3).fit(make_case(sut=sut))


def test_default_target_is_second_most_likely_and_explicit_target_wins():
    case = make_case()
    case.setup("fit")
    ranking = case.origin_output[0].argsort(descending=True)
    assert int(case.target[0]) == int(ranking[1])
    assert torch.equal(case.control, torch.nn.functional.one_hot(case.target, 10).float())
    explicit = make_case(target=7)
    explicit.setup("fit")
    assert int(explicit.target[0]) == 7


def test_the_denoiser_prior_enters_the_loss_and_reaches_the_hypernet():
    case = make_case(prior=RealismPrior(weight=1.0))
    case.setup("fit")
    latents = case.generate_latents()
    prior = case.prior_loss(latents)
    assert prior.dim() == 0 and torch.isfinite(prior) and prior > 0
    prior.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in case.hypernet.parameters())
    assert all(p.grad is None for p in case.generator.parameters()), "the generator stays frozen"
    # the same case and step draw the same timestep and noise
    torch.testing.assert_close(case.prior_loss(latents.detach()), case.prior_loss(latents.detach()))
    logged = {}
    case.log_dict = lambda values, **kwargs: logged.update(values)
    case.training_step(0, 0)
    assert "prior" in logged


def test_the_sut_reads_the_image_as_saved_during_the_search():
    seen = []

    class Recording(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = SmallCNN(channels=(4, 8), hidden=16)

        def forward(self, images):
            seen.append(images.detach())
            return self.net(images)

    from hynea_pl.suts import ClassifierSUT

    case = make_case(sut=ClassifierSUT(Recording()))
    make_trainer(2).fit(case)
    for images in seen[1:]:  # after the origin: every image the search shows the SUT is an 8-bit image
        torch.testing.assert_close(images * 255, (images * 255).round(), atol=1e-3, rtol=0)


class ScriptedMarginSUT(ScriptedFlipSUT):
    """Reaches the target from step 3 on, and is one logit further past the boundary at every step after step 2."""

    def decision_margin(self, output, origin_output, target):
        return torch.full(output.shape[:1], float(2 - self.calls))


@pytest.mark.parametrize(("stop_margin", "found_at"), [(0.0, 3), (2.5, 5)])
def test_stop_margin_waits_until_the_sut_is_that_far_past_its_boundary(stop_margin, found_at):
    sut = ScriptedMarginSUT(SmallCNN(channels=(4, 8), hidden=16), flip_on=3)
    case = make_case(sut=sut, acceptance=Acceptance(margin=stop_margin))
    trainer = make_trainer(10, [FlipEarlyStopping()])
    trainer.fit(case)
    assert trainer.global_step == found_at and case.result.found and case.result.step == found_at


def test_stop_margin_ratio_scales_with_the_origins_own_margin():
    """The scripted SUT holds the origin by 2 logits: a ratio of 1.25 asks for 2.5 past the boundary, as stop_margin
    2.5 does; the same ratio on a SUT twice as sure of its origin would ask for twice as much."""
    sut = ScriptedMarginSUT(SmallCNN(channels=(4, 8), hidden=16), flip_on=3)
    case = make_case(sut=sut, acceptance=Acceptance(margin_ratio=1.25))
    trainer = make_trainer(10, [FlipEarlyStopping()])
    trainer.fit(case)
    assert case.required_margin == pytest.approx(2.5)
    assert trainer.global_step == 5 and case.result.found and case.result.step == 5


def test_each_run_aims_at_the_origins_next_most_likely_class():
    """Run ``n`` of a case aims at the SUT's ``n + 2``-th most likely class on the origin (round again after the
    last); with ``retarget`` off, or an explicit target, every run aims at the same class."""
    def target(retarget: bool = True, **kwargs) -> int:
        case = make_case(retries=Retries(attempts=10, retarget=retarget), **kwargs)
        case.setup("fit")
        return int(case.target[0])

    first = make_case(retries=Retries(attempts=3))
    first.setup("fit")
    ranked = first.origin_output[0].argsort(descending=True).tolist()
    assert [target(attempt=n) for n in (0, 1, 2, 9)] == [ranked[1], ranked[2], ranked[3], ranked[1]]
    assert target(attempt=2, retarget=False) == ranked[1]
    assert target(attempt=2, target=ranked[5]) == ranked[5]
    assert first.next_attempt() == {"attempt": 1}
    assert make_case(retries=Retries(attempts=2), attempt=1).next_attempt() is None


def test_attempts_out_of_range_are_refused():
    with pytest.raises(ValueError, match="attempt must be in 0..retries.attempts-1"):
        make_case(retries=Retries(attempts=2), attempt=2)
    with pytest.raises(ValueError, match="retries.attempts must be >= 1"):
        Retries(attempts=0)


def test_a_negative_stop_margin_is_refused():
    with pytest.raises(ValueError, match="acceptance.margin and margin_ratio must be >= 0"):
        Acceptance(margin=-1.0)
