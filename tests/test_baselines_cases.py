"""GIFTbench and SINVAD cases driven by a Lightning Trainer with HyNeA's callbacks (tiny components)."""

from __future__ import annotations

import math

import lightning as L
import pytest
import torch
from tiny_components import tiny_generator, tiny_sut

from hynea_pl.baselines.giftbench import GIFTbenchCase
from hynea_pl.baselines.sinvad import SINVADCase
from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.methods import HyNeACase
from hynea_pl.suts import ClassifierSUT, Preprocess
from hynea_pl.zoo.labelled.classifier import SmallCNN

CASE = {"origin_class": 3, "seed": 5}


def make_trainer(callbacks: list, max_steps: int = 10) -> L.Trainer:
    return L.Trainer(max_steps=max_steps, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                     enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                     callbacks=callbacks)


class CountingSUT(ClassifierSUT):
    """Counts every image the SUT sees (the origin included) and the distinct ones among them."""

    def __init__(self, model: torch.nn.Module, **kwargs) -> None:
        super().__init__(model, **kwargs)
        self.images_seen = 0
        self.distinct: set[bytes] = set()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.images_seen += images.shape[0]
        self.distinct.update(image.numpy().tobytes() for image in images)
        return super().forward(images)


class SwitchSUT(CountingSUT):
    """Predicts class 0 for the origin (first call), class 1 for everything after it."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = super().forward(images)
        label = 0 if self.images_seen == images.shape[0] else 1
        return torch.nn.functional.one_hot(torch.full_like(logits[:, 0], label).long(), 10).float() * 5 + logits * 0


def counting_sut(cls: type = CountingSUT) -> ClassifierSUT:
    torch.manual_seed(0)
    model = SmallCNN(channels=(4, 8), hidden=16, dropout=0.0)
    return cls(model, preprocess=Preprocess(size=32, channels=1, mean=[0.5], std=[0.5]))


@pytest.fixture(scope="module")
def hynea_origin() -> torch.Tensor:
    case = HyNeACase(tiny_generator(num_inference_steps=2), tiny_sut(), **CASE)
    case.setup("fit")
    return case.origin_image


@pytest.mark.parametrize("config", ["low", "high"])
def test_giftbench_runs_three_generations_within_the_budget_from_hyneas_origin(config, hynea_origin):
    sut = counting_sut()
    case = GIFTbenchCase(tiny_generator(num_inference_steps=2), sut, config=config, **CASE)
    budget = SUTEvaluationBudget(60)  # pays for 25 + 15 + 15 new images (survivors are not scored again), not 70
    trainer = make_trainer([FlipEarlyStopping(), budget])
    trainer.fit(case)
    factor = {"low": "1e-4", "high": "1e-3"}[config]
    assert case.evals_per_step == 15 and case.method_name == f"giftbench-{config}-{factor}"
    assert trainer.global_step == 3 and case.sut_evals == 55 <= budget.max_evals
    # one evaluation per image never scored before (+ the uncounted origin): survivors keep their fitness
    assert sut.images_seen - 1 == case.sut_evals == len(sut.distinct) - 1
    assert torch.equal(case.origin_image, hynea_origin)
    assert torch.equal(case.noise, case.generator.initial_noise(5))
    history = case.result.history
    assert [h["step"] for h in history] == [1, 2, 3] and [h["n_scored"] for h in history] == [25, 15, 15]
    assert all(0 <= h["ood_fraction"] <= 1 and h["anderson_statistic"] > 0 for h in history)
    assert case.result.image.shape == (1, 1, 32, 32) and case.result.step in (1, 2, 3)
    assert case.population.shape == (25, 4, 8, 8)
    assert case.population.min() >= case.noise_low and case.population.max() <= case.noise_high
    assert case.hparams.config == config and case.hparams.seed == 5


def test_sinvad_runs_four_generations_within_the_budget_from_hyneas_origin(hynea_origin):
    sut = counting_sut()
    case = SINVADCase(tiny_generator(num_inference_steps=2), sut, **CASE)
    budget = SUTEvaluationBudget(149)  # 50 + 30 + 30 + 30 new images; a fifth generation would need 170
    trainer = make_trainer([FlipEarlyStopping(), budget])
    trainer.fit(case)
    assert case.evals_per_step == 30
    assert trainer.global_step == 4 and case.sut_evals == 140 <= budget.max_evals
    assert sut.images_seen - 1 == case.sut_evals == len(sut.distinct) - 1
    assert torch.equal(case.origin_image, hynea_origin)
    assert case.population.shape == (50, *case.origin_genome.shape[1:])
    assert [h["mutation_scale"] for h in case.result.history][0] == 0.1
    assert case.result.image is not None and case.result.image.shape == (1, 1, 32, 32)


def test_budget_stops_a_search_exactly_at_its_limit():
    case = GIFTbenchCase(tiny_generator(num_inference_steps=1), tiny_sut(), population_size=5, survivors=2, **CASE)
    trainer = make_trainer([SUTEvaluationBudget(14)], max_steps=50)  # 5 + 3 + 3 + 3 new images
    trainer.fit(case)
    assert case.sut_evals == 14 and trainer.global_step == 4


def test_a_repeated_genome_is_scored_once():
    sut = counting_sut()
    case = GIFTbenchCase(tiny_generator(num_inference_steps=1), sut, population_size=4, survivors=2, **CASE)
    case.setup("fit")
    genomes = case.initial_population()
    outputs, fresh, images = case.evaluate(torch.cat([genomes[:3], genomes[:1]]))
    assert fresh.tolist() == [True, True, True, False] and images.shape[0] == 3 and case.sut_evals == 3
    torch.testing.assert_close(outputs[3], outputs[0], atol=0, rtol=0)  # the same stored output, not a re-run
    again, fresh, _ = case.evaluate(genomes)
    assert fresh.tolist() == [False, False, False, True] and case.sut_evals == 4
    torch.testing.assert_close(again[:3], outputs[:3], atol=0, rtol=0)


@pytest.mark.parametrize("method", ["giftbench", "sinvad", "sinvad-targeted"])
def test_a_flip_stops_the_search_and_keeps_the_flipped_image(method):
    sut = counting_sut(SwitchSUT)  # the origin is class 0, every individual is class 1
    generator = tiny_generator(num_inference_steps=1)
    if method == "giftbench":
        case = GIFTbenchCase(generator, sut, population_size=4, survivors=2, target=1, **CASE)
    else:
        case = SINVADCase(generator, sut, population_size=4, survivors=2, targeted=method.endswith("targeted"),
                          target=1, **CASE)
    trainer = make_trainer([FlipEarlyStopping(), SUTEvaluationBudget(100)])
    trainer.fit(case)
    assert case.origin_label == 0 and int(case.target[0]) == 1
    assert trainer.global_step == 1 and case.sut_evals == 4
    assert case.result.found and case.result.step == 1
    assert int(case.result.output.argmax(-1)) == 1
    if method != "giftbench":  # the kept image is the flipped individual closest to the origin encoding
        best = int(case.fitness_values.argmin())
        assert case.fitness_values[best] == case.result.history[0]["best_fitness"] < math.inf
        torch.testing.assert_close(case.result.image, case.render(case.population[best:best + 1]))


def test_a_targeted_sinvad_does_not_flip_on_another_class():
    sut = counting_sut(SwitchSUT)
    case = SINVADCase(tiny_generator(num_inference_steps=1), sut, population_size=4, survivors=2, targeted=True,
                      target=2, **CASE)
    make_trainer([FlipEarlyStopping(), SUTEvaluationBudget(8)]).fit(case)
    assert not case.result.found and case.sut_evals == 8
    assert all(h["best_fitness"] == math.inf for h in case.result.history)


def test_sinvad_stops_by_its_own_rule_when_the_mutation_scale_falls_below_the_minimum():
    case = SINVADCase(tiny_generator(num_inference_steps=1), tiny_sut(), population_size=4, survivors=2,
                      min_scale=0.08, **CASE)  # no flip: 0.1 -> 0.07 < 0.08 after the first generation
    trainer = make_trainer([SUTEvaluationBudget(100)])
    trainer.fit(case)
    assert not case.result.found
    assert trainer.global_step == 1 and case.sut_evals == 4
