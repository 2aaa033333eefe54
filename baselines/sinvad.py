"""SINVAD (Kang et al., 2020): a genetic search in an autoencoder's latent space.

Operators (``../shared/REFERENCE.md``, SINVAD; the SINVAD paper, section 5): genome = the autoencoder latent of the
origin image; population 50, 20 survive; initial population ``encode(origin) + 0.7 * N(0, 1)``; fitness infinite
while the SUT still predicts the origin's label, else the L1 distance to the origin encoding (eq. 1); targeted
variant infinite unless the prediction is the target (eq. 4); children by single-point crossover anywhere in z,
mutation ``scale * N(0, 1)`` only on genes that differ from the origin encoding, then a Bernoulli(0.5) mask resets
genes back to the origin encoding; the mutation scale (0.1) is multiplied by 0.7 when the best fitness stagnates and
reset when it improves; the search stops when the scale falls below 1e-3, usually long before the budget.
``restart_until_budget`` (off by default) offers the budget-matched comparison instead: when the scale decays, the
search starts over from a fresh initial population around the origin encoding with the scale reset, until it
flips or the SUT-evaluation budget is spent (evaluations count across restarts).

Here the autoencoder is the generator's (``generator.vae``); genomes live in the generator's *scaled* latent space
(``(mean - shift_factor) * scaling_factor``, what :meth:`DiffusionGenerator.decode` takes), where latents are
roughly unit-variance, so SINVAD's 0.7 and 0.1 spreads keep their meaning.
"""

from __future__ import annotations

import math

import torch
from jsonargparse.typing import ClosedUnitInterval, PositiveFloat, PositiveInt
from torch import Tensor

from hynea_pl.baselines.search import (
    PopulationSearchCase,
    draw_crossover_point,
    draw_parents,
    randn_like_on_cpu,
    single_point_crossover,
)
from hynea_pl.generators import AUTOENCODER, DiffusionGenerator, require
from hynea_pl.suts import SUT

INFINITE_FITNESS = math.inf  # SINVAD's code uses 999; with large latents an L1 distance can exceed 999


# ---------------------------------------------------------------------- autoencoder conventions
@torch.no_grad()
def encode_genome(generator: DiffusionGenerator, images: Tensor) -> Tensor:
    """Images in [0, 1] -> the autoencoder's latent in the generator's scaled convention (``generator.encode``)."""
    return generator.encode(images)


@torch.no_grad()
def decode_genome(generator: DiffusionGenerator, genomes: Tensor) -> Tensor:
    """Scaled latents -> images in [0, 1] (``generator.decode`` undoes scaling and shift)."""
    return generator.decode(genomes)


# ---------------------------------------------------------------------- pure operators
def initial_population(z0: Tensor, size: int, spread: float, rng: torch.Generator) -> Tensor:
    """``size`` copies of ``z0 (1, ...)`` plus ``spread * N(0, 1)``."""
    base = z0.expand(size, *z0.shape[1:])
    return base + spread * randn_like_on_cpu(base, rng)


def l1_distance(genomes: Tensor, z0: Tensor) -> Tensor:
    """``(P,)`` L1 distance of each genome to the origin encoding ``z0 (1, ...)``."""
    return (genomes - z0).abs().reshape(genomes.shape[0], -1).sum(dim=1)


def search_fitness(found: Tensor, distance: Tensor) -> Tensor:
    """Eqs. 1 and 4: infinite until the individual is ``found`` (untargeted: the SUT's decision flipped; targeted:
    it is the target), else its L1 distance to the origin encoding."""
    return torch.where(found, distance, torch.full_like(distance, INFINITE_FITNESS))


def differential_fitness(found: Tensor, probs: Tensor, reference_probs: Tensor, reference_label: int,
                         distance: Tensor) -> Tensor:
    """Eq. 3 (differential testing of N against N'): ``m * L1`` with ``m = 2 + N_p(i)[c] - N'_p(i)[c]`` and
    ``c = N'(i0)``, infinite until ``found``. Eq. 3 is finite as soon as N leaves ``c``; here ``found`` also asks
    N' to keep ``c`` (see :meth:`SINVADCase.is_found`), so every input found is a disagreement of the two."""
    m = 2 + probs[:, reference_label] - reference_probs[:, reference_label]
    return torch.where(found, m * distance, torch.full_like(distance, INFINITE_FITNESS))


def flat_crossover(mother: Tensor, father: Tensor, point: int) -> Tensor:
    """Single-point crossover anywhere in the flattened genome (shape kept)."""
    child = single_point_crossover(mother.reshape(-1), father.reshape(-1), point, dim=0)
    return child.reshape(mother.shape)


def masked_mutation(child: Tensor, origin: Tensor, scale: float, rng: torch.Generator) -> Tensor:
    """Add ``scale * N(0, 1)`` only on genes that differ from the origin encoding."""
    mask = (child != origin).to(child.dtype)
    return child + scale * randn_like_on_cpu(child, rng) * mask


def reset_mask(shape: torch.Size | tuple[int, ...], rng: torch.Generator, p: float = 0.5) -> Tensor:
    """Bernoulli(p) mask: 1 where a gene is reset to the origin encoding."""
    return torch.bernoulli(torch.full(tuple(shape), p), generator=rng)


def apply_reset(child: Tensor, origin: Tensor, mask: Tensor) -> Tensor:
    """``mask * origin + (1 - mask) * child``."""
    mask = mask.to(child.device, child.dtype)
    return mask * origin + (1 - mask) * child


def update_scale(scale: float, base_scale: float, improved: bool, decay: float = 0.7) -> float:
    """Reset to ``base_scale`` when the best fitness improved, else multiply by ``decay``."""
    return base_scale if improved else scale * decay


def should_stop(scale: float, min_scale: float = 1e-3) -> bool:
    """SINVAD stops once the mutation scale falls below ``min_scale``."""
    return scale < min_scale


# ---------------------------------------------------------------------- the case
class SINVADCase(PopulationSearchCase):
    """One SINVAD test case: genome = the generator autoencoder's latent of the origin image.

    Args:
        generator, sut, origin_class, seed, target, population_size, survivors, search_seed, chunk_size: see
            :class:`hynea_pl.baselines.search.PopulationSearchCase`.
        targeted: eq. 4 (flip = the prediction is ``target``) instead of eq. 1 (flip = the prediction changed).
        reference: differential testing (eq. 3): a second multiclass model N'; an individual is found when the SUT
            leaves N''s reading of the origin while N' keeps it (the two disagree). Its evaluations are not SUT
            evaluations.
        initial_spread: std of the initial population around the origin encoding.
        mutation_scale: initial (and reset) mutation scale.
        decay: factor on the mutation scale when the best fitness stagnates.
        min_scale: stop when the mutation scale falls below it.
        reset_probability: Bernoulli probability of resetting a gene to the origin encoding.
        restart_until_budget: when the mutation scale falls below ``min_scale``, restart the search (fresh initial
            population, scale reset) instead of stopping, so only a flip or the budget ends the case; the
            record's ``diagnostics["restarts"]`` counts the restarts. Default: stop (the paper's rule).
    """

    method_name = "sinvad"

    def __init__(
        self,
        generator: DiffusionGenerator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        targeted: bool = False,
        reference: SUT | None = None,
        population_size: PositiveInt = 50,
        survivors: PositiveInt = 20,
        initial_spread: PositiveFloat = 0.7,
        mutation_scale: PositiveFloat = 0.1,
        decay: PositiveFloat = 0.7,
        min_scale: PositiveFloat = 1e-3,
        reset_probability: ClosedUnitInterval = 0.5,
        restart_until_budget: bool = False,
        search_seed: int | None = None,
        chunk_size: PositiveInt | None = None,
    ) -> None:
        super().__init__(generator, sut, origin_class=origin_class, seed=seed, target=target,
                         population_size=population_size, survivors=survivors, search_seed=search_seed,
                         chunk_size=chunk_size)
        require(generator, AUTOENCODER, "SINVAD")
        if targeted and reference is not None:
            raise ValueError("SINVAD is either targeted (eq. 4) or differential (eq. 3, reference), not both")
        self.targeted = targeted
        self.reference = reference
        self.initial_spread = initial_spread
        self.base_scale = mutation_scale
        self.scale = mutation_scale
        self.decay = decay
        self.min_scale = min_scale
        self.reset_probability = reset_probability
        self.restart_until_budget = restart_until_budget
        self.starts = 0  # initial populations drawn: 1 + the restarts that ran
        self.method_name = self.display_name({"targeted": targeted, "reference": reference,
                                              "restart_until_budget": restart_until_budget})

    @classmethod
    def display_name(cls, init_args: dict) -> str:
        if init_args.get("reference") is not None:
            name = "sinvad-differential"
        else:
            name = "sinvad-targeted" if init_args.get("targeted") else "sinvad"
        return f"{name}-restart" if init_args.get("restart_until_budget") else name

    def setup_search(self) -> None:
        self.register_buffer("origin_genome", encode_genome(self.generator, self.origin_image), persistent=False)
        if self.reference is not None:
            self.reference.to(self.origin_image.device)
            self.reference_label = int(self.reference.prediction(self.reference(self.origin_image))[0])

    def initial_population(self) -> Tensor:
        self.starts += 1
        return initial_population(self.origin_genome, self.population_size, self.initial_spread, self.rng)

    def render(self, genomes: Tensor) -> Tensor:
        return decode_genome(self.generator, genomes)

    def is_found(self, outputs: Tensor) -> Tensor:
        """Untargeted: the SUT's decision flipped (eq. 1); targeted: it reached the target (eq. 4); differential:
        the SUT left the reference's reading of the origin while the reference keeps it (eq. 3)."""
        if self.targeted:
            return self.sut.reaches_target(outputs, self.origin_output, self.target)
        if self.reference is not None:
            label = self.reference_label
            return (self.sut.prediction(outputs) != label) & (self.reference.prediction(self.reference_outputs) == label)
        return self.sut.is_flipped(outputs, self.origin_output, self.target)

    def fitness(self, genomes: Tensor, outputs: Tensor, found: Tensor) -> Tensor:
        """Infinite until ``found`` (eq. 1 / 3 / 4), else the L1 distance to the origin encoding (eq. 3: times m)."""
        distance = l1_distance(genomes.float(), self.origin_genome.float())
        if self.reference is not None:
            return differential_fitness(found, outputs.float().softmax(-1), self.reference_outputs.float().softmax(-1),
                                        self.reference_label, distance)
        return search_fitness(found, distance)

    def next_generation(self, survivors: Tensor, improved: bool) -> Tensor:
        self.scale = update_scale(self.scale, self.base_scale, improved, self.decay)
        origin = self.origin_genome[0]
        children = []
        for _ in range(self.population_size - survivors.shape[0]):
            i, j = draw_parents(survivors.shape[0], self.rng)
            point = draw_crossover_point(survivors[0].numel(), self.rng)
            child = flat_crossover(survivors[i], survivors[j], point)
            child = masked_mutation(child, origin, self.scale, self.rng)
            child = apply_reset(child, origin, reset_mask(child.shape, self.rng, self.reset_probability))
            children.append(child)
        return torch.cat([survivors, torch.stack(children)]) if children else survivors

    def should_stop(self) -> bool:
        """SINVAD's rule on the scale the next generation would use (it checks the scale after updating it at the
        end of a generation); with ``restart_until_budget`` a decayed scale restarts the search instead."""
        decayed = should_stop(update_scale(self.scale, self.base_scale, self._improved, self.decay), self.min_scale)
        if decayed and self.restart_until_budget:
            self.restart()
            return False
        return decayed

    def restart(self) -> None:
        """Start the search over: the next generation is a fresh initial population around the origin encoding with
        the scale reset; the kept result, the scored images and the SUT evaluations carry over."""
        self.population = self.fitness_values = None
        self.best_fitness = math.inf
        self._improved = True
        self.scale = self.base_scale

    def diagnostics(self, population: Tensor) -> dict[str, float]:
        return {"mutation_scale": self.scale}

    def record_diagnostics(self) -> dict:
        """The search's diagnostics and ``restarts``: the fresh initial populations a decayed scale made the search
        draw and evaluate (``restart_until_budget``)."""
        return {**super().record_diagnostics(), "restarts": max(self.starts - 1, 0)}
