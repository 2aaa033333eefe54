"""A reference model that must keep the origin's decision: HyNeA's steering member / differential testing, and
SINVAD's differential variant (eq. 3)."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from test_baselines_cases import SwitchSUT, counting_sut
from test_hynea_case import make_case, make_trainer
from tiny_components import ScriptedFlipSUT, ThirdClassSUT, tiny_generator, tiny_sut

from hynea_pl.baselines.sinvad import SINVADCase
from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.methods.hynea_options import PaperSearch, Steering
from hynea_pl.zoo.labelled.classifier import SmallCNN


def reads_a_third_class() -> ThirdClassSUT:
    torch.manual_seed(1)
    return ThirdClassSUT(SmallCNN(channels=(4, 8), hidden=16))


def test_hynea_stops_only_when_the_sut_reaches_its_target_and_the_reference_keeps_the_origin():
    kept = make_case(ScriptedFlipSUT(SmallCNN(channels=(4, 8), hidden=16), flip_on=2),
                     steering=Steering(model=tiny_sut(seed=3)))
    stopper = FlipEarlyStopping()
    make_trainer(6, [stopper]).fit(kept)
    assert stopper.flipped_at == 2 and kept.result.found and kept.result.step == 2
    # a reference that reads every image after the origin as another class never agrees: no step is found
    lost = make_case(ScriptedFlipSUT(SmallCNN(channels=(4, 8), hidden=16), flip_on=2),
                     steering=Steering(model=reads_a_third_class()))
    stopper = FlipEarlyStopping()
    make_trainer(4, [stopper]).fit(lost)
    assert stopper.flipped_at is None and not lost.result.found and lost.sut_evals == 4
    assert lost.record_diagnostics()["reference_origin_label"] == 0
    assert lost.record_diagnostics()["reference_result_label"] == 2
    # steering.stop: false keeps the reference out of the stop rule
    free = make_case(ScriptedFlipSUT(SmallCNN(channels=(4, 8), hidden=16), flip_on=2),
                     steering=Steering(model=reads_a_third_class(), stop=False))
    stopper = FlipEarlyStopping()
    make_trainer(4, [stopper]).fit(free)
    assert stopper.flipped_at == 2


def test_the_preservation_term_changes_the_loss_and_keeps_gradients_flowing():
    losses = {}
    for weight in (0.0, 5.0):
        case = make_case(steering=Steering(model=tiny_sut(seed=3), weight=weight),
                         search=PaperSearch(lr_min=1e-2, lr_max=1e-1))
        trainer = make_trainer(3)
        trainer.fit(case)
        losses[weight] = float(trainer.callback_metrics["loss"])
        assert ("keep" in trainer.callback_metrics) == (weight > 0)
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in case.hypernet.parameters())
    assert losses[5.0] != pytest.approx(losses[0.0], rel=1e-6)


def test_stop_on_flip_accepts_any_class_but_the_origins():
    case = make_case(reads_a_third_class(), search=PaperSearch(lr_min=1e-3, lr_max=1e-2, stop_on="flip"))  # origin 0, every later image 2, target 1
    stopper = FlipEarlyStopping()
    make_trainer(4, [stopper]).fit(case)
    assert stopper.flipped_at == 1
    with pytest.raises(ValueError, match="stop_on"):
        PaperSearch(stop_on="valid")


def test_differential_sinvad_needs_the_sut_to_leave_what_the_reference_keeps():
    sut = counting_sut(SwitchSUT)  # origin class 0, every individual class 1
    reference = counting_sut()  # a random SmallCNN: some label c on the origin
    case = SINVADCase(tiny_generator(num_inference_steps=1), sut, reference=reference, population_size=4,
                      survivors=2, origin_class=3, seed=5)
    assert case.method_name == "sinvad-differential"
    L.Trainer(max_steps=3, max_epochs=-1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
              enable_model_summary=False, enable_progress_bar=False,
              callbacks=[FlipEarlyStopping(), SUTEvaluationBudget(100)]).fit(case)
    # the SUT reads class 1 everywhere: an individual is found where the reference still reads its origin label
    reference_labels = case.reference.prediction(case.reference_outputs)
    expected = (reference_labels == case.reference_label) & (case.reference_label != 1)
    sut_reads_one = torch.nn.functional.one_hot(torch.ones(4, dtype=torch.long), 10).float()
    assert case.is_found(sut_reads_one).tolist() == expected.tolist()
    assert case.sut_evals == len(sut.distinct) - 1  # the reference's evaluations are not SUT evaluations
    with pytest.raises(ValueError, match="not both"):
        SINVADCase(tiny_generator(num_inference_steps=1), sut, reference=reference, targeted=True)
