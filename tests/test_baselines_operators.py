"""GIFTbench and SINVAD operators against hand-worked examples (seeded generators, no models)."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats
from tiny_components import tiny_generator

from hynea_pl.baselines import giftbench as gb
from hynea_pl.baselines import sinvad as sv
from hynea_pl.baselines.search import (
    detection_margin, draw_crossover_point, draw_parents, origin_margin, select_survivors, single_point_crossover,
)
from hynea_pl.suts import BinaryAttributeSUT, ClassifierSUT


def rng(seed: int = 0) -> torch.Generator:
    return torch.Generator("cpu").manual_seed(seed)


# ---------------------------------------------------------------------- shared operators
def test_select_survivors_keeps_the_lowest_fitness_best_first_and_ties_in_population_order():
    fitness = torch.tensor([3.0, 1.0, 2.0, 1.0, math.inf])
    assert select_survivors(fitness, 2).tolist() == [1, 3]
    assert select_survivors(fitness, 3).tolist() == [1, 3, 2]
    with pytest.raises(ValueError):
        select_survivors(fitness, 6)


def test_single_point_crossover_takes_the_mother_before_the_point_and_the_father_from_it():
    mother, father = torch.zeros(4, 2, 2), torch.ones(4, 2, 2)
    child = single_point_crossover(mother, father, 1, dim=0)
    assert child[0].eq(0).all() and child[1:].eq(1).all()
    child = single_point_crossover(torch.arange(5.0), torch.arange(10.0, 15.0), 3)
    assert child.tolist() == [0.0, 1.0, 2.0, 13.0, 14.0]
    with pytest.raises(ValueError):
        single_point_crossover(mother, father, 5, dim=0)


def test_crossover_point_lies_strictly_inside_and_parents_are_distinct():
    gen = rng(1)
    points = {draw_crossover_point(4, gen) for _ in range(200)}
    assert points == {1, 2, 3}  # both parents always contribute
    assert draw_crossover_point(1, gen) == 0
    # the draw is the seeded generator's: same seed, same point
    assert draw_crossover_point(400, rng(7)) == int(torch.randint(1, 400, (1,), generator=rng(7)))
    assert all(len(set(draw_parents(10, gen))) == 2 for _ in range(50))


def test_origin_margin_is_own_logit_minus_best_other():
    logits = torch.tensor([[1.0, 3.0, 2.0], [5.0, 1.0, 0.0]])
    assert origin_margin(logits, 0).tolist() == [-2.0, 4.0]
    assert origin_margin(logits, 1).tolist() == [1.0, -4.0]


# ---------------------------------------------------------------------- GIFTbench
def test_detection_margin_is_negative_exactly_when_no_detection_predicts_the_class():
    from hynea_pl.suts import YOLODetectorSUT

    held = torch.tensor([[[0.0, 3.0, 1.0], [2.0, 0.5, 0.0]]])  # detection 0 predicts class 1 by 2
    gone = torch.tensor([[[2.0, 1.0, 0.0], [0.0, 0.5, 1.5]]])  # class 1 is nobody's argmax any more
    assert detection_margin(held, 1).item() == pytest.approx(2.0)
    assert detection_margin(gone, 1).item() == pytest.approx(-1.0)  # the closest detection lacks 1.0
    target = torch.tensor([1])
    flip = YOLODetectorSUT.is_flipped(None, torch.cat([held, gone]), held, target)
    assert flip.tolist() == [False, True]
    assert (detection_margin(torch.cat([held, gone]), 1) < 0).tolist() == flip.tolist()
    with pytest.raises(ValueError, match="detection logits"):
        detection_margin(torch.zeros(2, 3), 1)


def test_decision_margin_follows_the_task():
    logits = torch.tensor([[2.0, -1.0, 0.5]])
    classifier, attributes = ClassifierSUT(torch.nn.Identity()), BinaryAttributeSUT(torch.nn.Identity(), attribute=0)
    assert classifier.decision_margin(logits, logits, torch.tensor([2])).item() == pytest.approx(1.5)
    # binary: the case's tested attribute's logit signed toward the origin's decision
    target = torch.tensor([1])
    assert attributes.decision_margin(logits, torch.tensor([[0.0, 1.0, 0.0]]), target).item() == pytest.approx(-1.0)
    assert attributes.decision_margin(logits, torch.tensor([[0.0, -1.0, 0.0]]), target).item() == pytest.approx(1.0)


def test_giftbench_perturbation_sizes_low_and_high():
    assert gb.perturbation_sizes(10.0, "low") == pytest.approx((1e-3, 2e-3))
    assert gb.perturbation_sizes(10.0, "high") == pytest.approx((1e-2, 2e-2))
    with pytest.raises(ValueError):
        gb.perturbation_sizes(10.0, "medium")


def test_giftbench_noise_range_is_min_and_max_of_the_seeded_samples():
    low, high = gb.observed_noise_range((4, 8, 8), n_samples=1000, seed=3, chunk=1000)
    draws = torch.randn((1000, 4, 8, 8), generator=rng(3))
    assert (low, high) == (float(draws.min()), float(draws.max()))
    assert gb.observed_noise_range((4, 8, 8), 1000, seed=3) == gb.observed_noise_range((4, 8, 8), 1000, seed=3)
    assert -7 < low < -3 and 3 < high < 7


def test_giftbench_initial_population_is_origin_plus_init_pert_noise():
    z0 = torch.arange(8.0).reshape(1, 2, 2, 2)
    population = gb.initial_population(z0, 3, 0.5, rng(0))
    expected = z0 + 0.5 * torch.randn((3, 2, 2, 2), generator=rng(0))
    assert population.shape == (3, 2, 2, 2)
    torch.testing.assert_close(population, expected)


def test_giftbench_channel_crossover_splits_the_channel_axis():
    mother = torch.full((4, 2, 2), 1.0)
    father = torch.full((4, 2, 2), 2.0)
    child = gb.channel_crossover(mother, father, 3)
    assert child[:3].eq(1).all() and child[3].eq(2).all()


def test_giftbench_mutation_touches_only_genes_that_differ_from_the_origin():
    origin = torch.zeros(2, 2)
    child = torch.tensor([[0.0, 1.0], [0.0, -2.0]])  # genes (0, 1) and (1, 1) differ
    mutated = gb.masked_mutation(child, origin, 0.1, rng(0))
    noise = torch.randn((2, 2), generator=rng(0))
    expected = torch.tensor([[0.0, 1.0 + 0.1 * noise[0, 1]], [0.0, -2.0 + 0.1 * noise[1, 1]]])
    torch.testing.assert_close(mutated, expected)
    assert mutated[0, 0] == 0 and mutated[1, 0] == 0  # unchanged genes stay exactly at the origin
    untouched = gb.masked_mutation(origin.clone(), origin, 10.0, rng(0))
    assert torch.equal(untouched, origin)


def test_giftbench_pert_doubles_on_stagnation_and_resets_on_improvement():
    base = 0.001
    pert = gb.update_pert(base, base, improved=False)
    assert pert == pytest.approx(0.002)
    pert = gb.update_pert(pert, base, improved=False)
    assert pert == pytest.approx(0.004)
    assert gb.update_pert(pert, base, improved=True) == base


def test_giftbench_clamps_to_the_observed_range():
    z = torch.tensor([-5.0, -4.0, 0.5, 4.5, 7.0])
    assert gb.clamp_latents(z, -4.2, 4.2).tolist() == pytest.approx([-4.2, -4.0, 0.5, 4.2, 4.2])


def test_giftbench_fitness_sign_and_stop_rule():
    logits = torch.tensor([[4.0, 1.0, 3.5], [2.0, 2.5, 0.0]])
    fitness = gb.margin_fitness(logits, 0)
    assert fitness.tolist() == pytest.approx([0.5, -0.5])  # positive: still the origin class; negative: flipped
    assert not gb.should_stop(float(fitness[0])) and gb.should_stop(float(fitness.min()))
    assert not gb.should_stop(0.0)


def test_giftbench_ood_fraction_uses_the_chi_square_99th_percentile():
    d = 4
    threshold = stats.chi2.ppf(0.99, d)  # 13.28
    assert 13 < threshold < 14
    latents = torch.stack([torch.zeros(d), torch.full((d,), 2.0), torch.full((d,), 1.8), torch.full((d,), 1.9)])
    # squared norms 0, 16, 12.96, 14.44: two of four exceed the threshold
    assert gb.ood_fraction(latents.reshape(4, 1, 2, 2)) == 0.5


def test_giftbench_anderson_statistic_separates_gaussian_from_clamped_spread_noise():
    gaussian = torch.randn((25, 4, 8, 8), generator=rng(0))
    per_latent = [stats.anderson(row.double().numpy(), dist="norm", method="interpolate").statistic
                  for row in gaussian.reshape(25, -1)]
    assert gb.anderson_statistic(gaussian) == pytest.approx(sum(per_latent) / 25)
    assert gb.anderson_statistic(gaussian) < 1.092  # appendix C's p < 0.01 threshold
    clamped = (3 * torch.randn((25, 4, 8, 8), generator=rng(1))).clamp(-2, 2)
    assert gb.anderson_statistic(clamped) > 1.092


# ---------------------------------------------------------------------- SINVAD
def test_sinvad_fitness_signs_untargeted_targeted_and_differential():
    predictions = torch.tensor([3, 5, 3, 7])
    distance = torch.tensor([1.0, 2.0, 3.0, 4.0])
    inf = math.inf
    assert sv.search_fitness(predictions != 3, distance).tolist() == [inf, 2.0, inf, 4.0]  # eq. 1: left class 3
    assert sv.search_fitness(predictions == 7, distance).tolist() == [inf, inf, inf, 4.0]  # eq. 4: target 7
    probs = torch.tensor([[0.9, 0.1], [0.3, 0.7]])
    reference = torch.tensor([[0.8, 0.2], [0.6, 0.4]])
    found = torch.tensor([False, True])  # N' keeps class 0 on both; N left it only on the second
    fitness = sv.differential_fitness(found, probs, reference, 0, torch.tensor([1.0, 2.0]))
    assert fitness.tolist() == pytest.approx([inf, (2 + 0.3 - 0.6) * 2.0])


def test_sinvad_l1_distance_and_initial_population():
    z0 = torch.zeros(1, 2)
    genomes = torch.tensor([[1.0, -2.0], [0.0, 0.0]])
    assert sv.l1_distance(genomes, z0).tolist() == [3.0, 0.0]
    population = sv.initial_population(torch.ones(1, 3), 4, 0.7, rng(2))
    torch.testing.assert_close(population, 1 + 0.7 * torch.randn((4, 3), generator=rng(2)))


def test_sinvad_crossover_anywhere_in_the_flattened_genome():
    mother, father = torch.zeros(2, 2), torch.ones(2, 2)
    child = sv.flat_crossover(mother, father, 3)
    assert child.shape == (2, 2) and child.reshape(-1).tolist() == [0.0, 0.0, 0.0, 1.0]


def test_sinvad_mutation_only_on_changed_dimensions():
    origin = torch.tensor([0.0, 1.0, 2.0, 3.0])
    child = torch.tensor([0.0, 1.5, 2.0, 2.0])
    mutated = sv.masked_mutation(child, origin, 0.1, rng(4))
    noise = torch.randn(4, generator=rng(4))
    expected = torch.tensor([0.0, 1.5 + 0.1 * noise[1], 2.0, 2.0 + 0.1 * noise[3]])
    torch.testing.assert_close(mutated, expected)


def test_sinvad_reset_mask_is_bernoulli_half_and_resets_to_the_origin():
    mask = sv.reset_mask((4,), rng(0))
    assert torch.equal(mask, torch.bernoulli(torch.full((4,), 0.5), generator=rng(0)))
    big = sv.reset_mask((10_000,), rng(1))
    assert set(big.unique().tolist()) <= {0.0, 1.0} and 0.47 < float(big.mean()) < 0.53
    child = torch.tensor([5.0, 6.0, 7.0, 8.0])
    origin = torch.tensor([0.0, -1.0, -2.0, -3.0])
    assert sv.apply_reset(child, origin, torch.tensor([1.0, 0.0, 1.0, 0.0])).tolist() == [0.0, 6.0, -2.0, 8.0]


def test_sinvad_scale_decays_on_stagnation_resets_on_improvement_and_stops_below_1e_3():
    scale = sv.update_scale(0.1, 0.1, improved=False)
    assert scale == pytest.approx(0.07)
    assert sv.update_scale(scale, 0.1, improved=False) == pytest.approx(0.049)
    assert sv.update_scale(0.049, 0.1, improved=True) == 0.1
    scale, generations = 0.1, 0
    while not sv.should_stop(scale):
        scale, generations = sv.update_scale(scale, 0.1, improved=False), generations + 1
    assert generations == 13  # 0.1 * 0.7**12 = 1.38e-3, 0.1 * 0.7**13 = 9.7e-4
    assert not sv.should_stop(1e-3) and sv.should_stop(9.9e-4)


def test_sinvad_genomes_use_the_generators_scaling_convention():
    generator = tiny_generator(num_inference_steps=1)
    generator.vae.register_to_config(scaling_factor=0.5)
    images = torch.rand((2, 1, 32, 32), generator=rng(0))
    with torch.no_grad():
        mean = generator.vae.encode(images * 2 - 1).latent_dist.mean
        genomes = sv.encode_genome(generator, images)
        torch.testing.assert_close(genomes, mean * 0.5)
        decoded = sv.decode_genome(generator, genomes)
        torch.testing.assert_close(decoded, ((generator.vae.decode(mean).sample + 1) / 2).clamp(0, 1))
