"""GIFTbench (Maryam et al., 2025), diffusion variant: a genetic search over the initial noise latent.

Operators (``../shared/REFERENCE.md``, GIFTbench): initial population ``z0 + init_pert * N(0, 1)``; population 25,
the 10 lowest-fitness individuals survive; children by single-point crossover over the latent channel axis;
mutation adds ``pert * N(0, 1)`` only on genes that already differ from ``z0``; ``pert`` doubles when the best fitness
stagnates and resets when it improves; latents are clamped to the observed range of initial noise (1000 samples);
``pert = range * 1e-4`` (``low``) or ``range * 1e-3`` (``high``), ``init_pert = 2 * pert``. Fitness (multiclass) =
origin logit - best other logit; the search stops when it drops below 0. Images are sampled without gradients.

Other tasks (HyNeA's paper runs GIFTbench on its detection task too; REFERENCE.md states only the multiclass
fitness): the same margin in the task's terms, the SUT's :meth:`~hynea_pl.suts.SUT.decision_margin` (multiclass:
exactly the fitness above): binary, the tested attribute's logit signed toward the origin's decision; detection, the
suppressed class's best margin over the top-k detections. Each is negative exactly when the SUT's decision flipped,
so the stop rule is unchanged.

Per generation the history also records the appendix C diagnostics of HyNeA's paper: the fraction of latents whose
squared norm exceeds the 99th percentile of chi-square(d) and the Anderson-Darling statistic of the latent values.
"""

from __future__ import annotations

import math

import torch
from jsonargparse.typing import PositiveInt
from scipy import stats
from torch import Tensor

from hynea_pl.baselines.search import (
    PopulationSearchCase,
    draw_crossover_point,
    draw_parents,
    origin_margin,
    randn_like_on_cpu,
    single_point_crossover,
)
from hynea_pl.generators import DiffusionGenerator
from hynea_pl.suts import SUT

#: Perturbation factors of the two configs, as in the GIFTbench authors' code (REFERENCE.md). HyNeA's paper
#: (appendix C) prints them the other way round (low = 1e-3, high = 1e-4); we follow the code, and the method
#: names carry the factor (``giftbench-low-1e-4``, ``giftbench-high-1e-3``) so no table is ambiguous.
PERT_FACTORS = {"low": 1e-4, "high": 1e-3}


def factor_label(config: str) -> str:
    """``"1e-4"`` for ``low``, ``"1e-3"`` for ``high``."""
    mantissa, exponent = f"{PERT_FACTORS[config]:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


# ---------------------------------------------------------------------- pure operators
def observed_noise_range(latent_shape: tuple[int, ...], n_samples: int = 1000, seed: int = 0,
                         chunk: int = 100) -> tuple[float, float]:
    """``(min, max)`` over ``n_samples`` standard normal latents of ``latent_shape`` (seeded CPU draws)."""
    rng = torch.Generator("cpu").manual_seed(seed)
    low, high = math.inf, -math.inf
    for start in range(0, n_samples, chunk):
        x = torch.randn((min(chunk, n_samples - start), *latent_shape), generator=rng)
        low, high = min(low, float(x.min())), max(high, float(x.max()))
    return low, high


def perturbation_sizes(noise_range: float, config: str) -> tuple[float, float]:
    """``(pert, init_pert)`` for the ``low`` / ``high`` configs: ``pert = range * factor``, ``init_pert = 2 pert``."""
    if config not in PERT_FACTORS:
        raise ValueError(f"unknown GIFTbench config {config!r}; choose one of {sorted(PERT_FACTORS)}")
    pert = noise_range * PERT_FACTORS[config]
    return pert, 2 * pert


def initial_population(z0: Tensor, size: int, init_pert: float, rng: torch.Generator) -> Tensor:
    """``size`` copies of ``z0 (1, C, h, w)`` plus ``init_pert * N(0, 1)`` -> ``(size, C, h, w)``."""
    base = z0.expand(size, *z0.shape[1:])
    return base + init_pert * randn_like_on_cpu(base, rng)


def channel_crossover(mother: Tensor, father: Tensor, point: int) -> Tensor:
    """Single-point crossover of two latents ``(C, h, w)`` over the channel axis."""
    return single_point_crossover(mother, father, point, dim=0)


def masked_mutation(child: Tensor, origin: Tensor, pert: float, rng: torch.Generator) -> Tensor:
    """Add ``pert * N(0, 1)`` only where ``child`` differs from ``origin`` (the noise is drawn for every gene)."""
    mask = (child != origin).to(child.dtype)
    return child + pert * randn_like_on_cpu(child, rng) * mask


def update_pert(pert: float, base_pert: float, improved: bool) -> float:
    """Reset to ``base_pert`` when the best fitness improved, else double."""
    return base_pert if improved else 2 * pert


def clamp_latents(latents: Tensor, low: float, high: float) -> Tensor:
    """Clamp to the observed noise range."""
    return latents.clamp(low, high)


def margin_fitness(logits: Tensor, origin_label: int) -> Tensor:
    """Multiclass fitness ``(B,)``: origin logit minus the best other logit (< 0 once the SUT misclassifies)."""
    return origin_margin(logits, origin_label)


def should_stop(best_fitness: float) -> bool:
    """GIFTbench stops as soon as the best fitness drops below 0."""
    return best_fitness < 0


def ood_fraction(latents: Tensor, quantile: float = 0.99) -> float:
    """Fraction of latents ``(N, ...)`` whose squared norm exceeds the ``quantile`` of chi-square(d), d = numel."""
    flat = latents.reshape(latents.shape[0], -1).double()
    threshold = stats.chi2.ppf(quantile, flat.shape[1])
    return float(((flat ** 2).sum(dim=1) > threshold).double().mean())


def anderson_statistic(latents: Tensor) -> float:
    """Anderson-Darling normality statistic (scipy, normal with estimated mean and std) of each latent's values
    ``(N, ...)``, averaged over the N latents. Per latent, because a population is N near-copies of one latent:
    pooling their values would test ties, not normality. Above 1.092: not normal at p < 0.01 (appendix C)."""
    rows = latents.detach().reshape(latents.shape[0], -1).double().cpu().numpy()
    return float(sum(stats.anderson(row, dist="norm", method="interpolate").statistic for row in rows) / len(rows))


# ---------------------------------------------------------------------- the case
class GIFTbenchCase(PopulationSearchCase):
    """One GIFTbench test case: genome = the diffusion model's initial noise latent.

    Args:
        generator, sut, origin_class, seed, target, population_size, survivors, search_seed, chunk_size: see
            :class:`hynea_pl.baselines.search.PopulationSearchCase`.
        config: ``"low"`` (pert = range * 1e-4) or ``"high"`` (pert = range * 1e-3), the authors' code; HyNeA's
            paper prints the factors the other way round (see :data:`PERT_FACTORS`).
        range_samples: noise samples that fix the observed range.
        range_seed: seed of those samples.
        diagnostics_every: record the OOD fraction and Anderson-Darling statistic every n generations (0: never).
    """

    method_name = "giftbench"
    supported_tasks = None  # every task: the fitness is the SUT's decision margin

    def __init__(
        self,
        generator: DiffusionGenerator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        config: str = "low",
        population_size: PositiveInt = 25,
        survivors: PositiveInt = 10,
        range_samples: PositiveInt = 1000,
        range_seed: int = 0,
        search_seed: int | None = None,
        chunk_size: PositiveInt | None = None,
        diagnostics_every: PositiveInt = 1,
    ) -> None:
        if config not in PERT_FACTORS:
            raise ValueError(f"unknown GIFTbench config {config!r}; choose one of {sorted(PERT_FACTORS)}")
        super().__init__(generator, sut, origin_class=origin_class, seed=seed, target=target,
                         population_size=population_size, survivors=survivors, search_seed=search_seed,
                         chunk_size=chunk_size)
        self.config = config
        self.range_samples = range_samples
        self.range_seed = range_seed
        self.diagnostics_every = diagnostics_every
        self.method_name = self.display_name({"config": config})

    @classmethod
    def display_name(cls, init_args: dict) -> str:
        """``giftbench-low-1e-4`` / ``giftbench-high-1e-3``."""
        config = init_args.get("config", "low")
        return f"giftbench-{config}-{factor_label(config)}"

    def setup_search(self) -> None:
        self.noise_low, self.noise_high = observed_noise_range(self.generator.latent_shape, self.range_samples,
                                                               self.range_seed)
        self.base_pert, self.init_pert = perturbation_sizes(self.noise_high - self.noise_low, self.config)
        self.pert = self.base_pert

    def initial_population(self) -> Tensor:
        population = initial_population(self.noise, self.population_size, self.init_pert, self.rng)
        return clamp_latents(population, self.noise_low, self.noise_high)

    def render(self, genomes: Tensor) -> Tensor:
        return self.generator.sample(genomes, self.condition)

    def fitness(self, genomes: Tensor, outputs: Tensor, found: Tensor) -> Tensor:
        """The SUT's decision margin (multiclass: :func:`margin_fitness`, the origin logit minus the best other)."""
        return self.sut.decision_margin(outputs, self.origin_output, self.target)

    def next_generation(self, survivors: Tensor, improved: bool) -> Tensor:
        self.pert = update_pert(self.pert, self.base_pert, improved)
        children = []
        origin = self.noise[0]
        for _ in range(self.population_size - survivors.shape[0]):
            i, j = draw_parents(survivors.shape[0], self.rng)
            point = draw_crossover_point(survivors.shape[1], self.rng)
            child = channel_crossover(survivors[i], survivors[j], point)
            child = masked_mutation(child, origin, self.pert, self.rng)
            children.append(clamp_latents(child, self.noise_low, self.noise_high))
        return torch.cat([survivors, torch.stack(children)]) if children else survivors

    def should_stop(self) -> bool:
        return should_stop(self.best_fitness)

    def diagnostics(self, population: Tensor) -> dict[str, float]:
        step = self.global_step + 1
        if self.diagnostics_every <= 0 or step % self.diagnostics_every:
            return {"pert": self.pert}
        return {"pert": self.pert, "ood_fraction": ood_fraction(population),
                "anderson_statistic": anderson_statistic(population)}
