"""A shared layer for population-based baselines: one Lightning training step = one generation.

:class:`PopulationSearchCase` has the same contract as :class:`hynea_pl.methods.HyNeACase`, so the same callbacks
(``FlipEarlyStopping``, ``SUTEvaluationBudget``, ``CaseImageLogger``) and the campaign runner drive it:

- ``setup()`` builds the origin exactly like HyNeA: ``generator.initial_noise(seed)`` then
  ``generator.sample(noise, origin_class)``; the SUT reads it once (not counted, as in HyNeA);
- ``sut_evals`` counts one SUT evaluation per image the SUT has not scored before in this case: survivors and
  any repeated genome keep their output and fitness (a per-case score cache keyed by the genome's bytes), so
  ``evals_per_step`` is the whole population in the first generation and the children afterwards;
- ``result`` is a :class:`hynea_pl.methods.CaseResult`: the best individual of the first generation in which one
  is ``found`` (by default: the SUT's decision flipped), or the best individual seen so far when none is;
- ``training_step`` returns ``{"loss": best fitness of the generation (a detached tensor), "found": bool}``
  and steps Lightning's no-op optimizer once, so ``trainer.global_step`` counts generations.

Subclasses define the genome and operators through four hooks: :meth:`initial_population`, :meth:`render`,
:meth:`fitness` and :meth:`next_generation` (plus :meth:`is_found` when the search looks for something other than
a flip, e.g. a target class).

:class:`ProbeSearchCase` is the one-image-per-step variant (the truncation probes, ``cfg-first-flip``): its search
is a plan that yields one genome at a time and reads each one's SUT output.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Generator, Sequence
from typing import Any

import torch
from jsonargparse.typing import PositiveInt
from torch import Tensor
from torch.utils.data import DataLoader

from hynea_pl.generators import DiffusionGenerator
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.methods.origin import register_origin
from hynea_pl.suts import SUT

# the margins behind each SUT's decision_margin (hynea_pl.suts), still importable from here
from hynea_pl.suts.binary import attribute_margin  # noqa: F401
from hynea_pl.suts.classifier import origin_margin  # noqa: F401
from hynea_pl.suts.detector import detection_margin  # noqa: F401


# ---------------------------------------------------------------------- shared pure operators
def select_survivors(fitness: Tensor, k: int) -> Tensor:
    """Indices of the ``k`` lowest-fitness individuals, best first (ties keep population order)."""
    if not 1 <= k <= fitness.numel():
        raise ValueError(f"cannot keep {k} survivors of a population of {fitness.numel()}")
    return torch.sort(fitness, stable=True).indices[:k]


def draw_crossover_point(length: int, rng: torch.Generator) -> int:
    """A single crossover point in ``[1, length - 1]`` (both parents contribute); 0 when ``length == 1``."""
    if length < 2:
        return 0
    return int(torch.randint(1, length, (1,), generator=rng))


def single_point_crossover(mother: Tensor, father: Tensor, point: int, dim: int = 0) -> Tensor:
    """``mother`` before ``point`` and ``father`` from ``point`` on, along ``dim``."""
    if mother.shape != father.shape:
        raise ValueError(f"parents differ in shape: {tuple(mother.shape)} vs {tuple(father.shape)}")
    size = mother.shape[dim]
    if not 0 <= point <= size:
        raise ValueError(f"crossover point {point} outside [0, {size}]")
    return torch.cat([mother.narrow(dim, 0, point), father.narrow(dim, point, size - point)], dim=dim)


def draw_parents(n_parents: int, rng: torch.Generator) -> tuple[int, int]:
    """Two distinct parent indices drawn uniformly (the same one twice when there is a single parent)."""
    if n_parents < 2:
        return 0, 0
    first, second = torch.randperm(n_parents, generator=rng)[:2].tolist()
    return first, second


def randn_like_on_cpu(x: Tensor, rng: torch.Generator) -> Tensor:
    """Standard normal noise shaped like ``x`` drawn from a CPU generator (identical on every device)."""
    return torch.randn(x.shape, generator=rng, dtype=torch.float32).to(x.device, x.dtype)


def descends_from(values: Sequence[float], start: float) -> bool:
    """Whether a probe schedule starts at ``start`` (the origin's setting) and strictly descends from there."""
    return bool(values) and values[0] == start and all(b < a for a, b in zip(values, values[1:]))


# ---------------------------------------------------------------------- the Lightning search case
class PopulationSearchCase(TestCaseModule):
    """Base of a population-based test case (manual optimisation, one training step = one generation).

    Args:
        generator: the frozen latent diffusion generator (origin generation; subclasses render with it).
        sut: the system under test.
        origin_class: conditioning class of the origin (set per case by the campaign).
        seed: seed of the stored initial noise (set per case by the campaign).
        target: explicit target class; default: the origin's second most likely class (as HyNeA). Untargeted
            methods only record it (escape ratio).
        population_size: individuals evaluated per generation.
        survivors: individuals kept per generation.
        search_seed: seed of the search's own random draws; default ``seed``.
        chunk_size: render and evaluate the population in chunks of this many individuals (memory); default all.
    """

    method_name = "population"

    def __init__(
        self,
        generator: DiffusionGenerator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        population_size: PositiveInt = 25,
        survivors: PositiveInt = 10,
        search_seed: int | None = None,
        chunk_size: PositiveInt | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["generator", "sut", "reference"])  # also collects the subclass's init args
        if not 1 <= survivors <= population_size:
            raise ValueError(f"survivors ({survivors}) must be in [1, population_size={population_size}]")
        self.automatic_optimization = False
        self.generator = generator
        self.sut = sut
        self.population_size = population_size
        self.survivors = survivors
        self.search_seed = seed if search_seed is None else search_seed
        self.chunk_size = chunk_size
        self.reference: SUT | None = None  # a second model scored on every fresh image (e.g. SINVAD's N')
        self._scores: dict[bytes, Tensor] = {}  # genome digest -> SUT output (this case's images already scored)
        self._reference_scores: dict[bytes, Tensor] = {}  # the same for a reference model (differential testing)
        self.reference_outputs: Tensor | None = None  # the reference on the generation evaluated last
        self.population: Tensor | None = None  # the generation evaluated last
        self.fitness_values: Tensor | None = None  # its fitness (P,)
        self.best_fitness = math.inf  # best fitness seen so far
        self.rng: torch.Generator | None = None
        self._origin_ready = False
        self._improved = True
        self._best_key: tuple[float, float] = (math.inf, math.inf)

    @property
    def evals_per_step(self) -> int:
        """At most the images the next generation has not scored: all of the first, then the children."""
        return self.population_size if self.population is None else self.population_size - self.survivors

    # ------------------------------------------------------------------ case setup
    @torch.no_grad()
    def setup(self, stage: str) -> None:
        """Generate the origin from the stored noise and condition (exactly as HyNeA), read the SUT, fix target."""
        if self._origin_ready:
            return
        register_origin(self, self.seed, self.origin_class, self.target_class)
        self.check_task(self.sut.task, self.method_name)
        self.origin_label = int(self.sut.prediction(self.origin_output)[0])
        self.rng = torch.Generator("cpu").manual_seed(self.search_seed)
        self.setup_search()
        self._origin_ready = True

    def train_dataloader(self) -> DataLoader:
        """No data: each training step is one generation."""
        return DataLoader(range(self.trainer.max_steps if self.trainer.max_steps > 0 else 1), batch_size=None)

    def configure_optimizers(self) -> None:
        """Nothing is trained: the search changes genomes, not parameters (Lightning's no-op optimizer)."""
        return None

    # ------------------------------------------------------------------ hooks for subclasses
    def setup_search(self) -> None:
        """Called once the origin exists (e.g. encode the origin, measure the noise range)."""

    def initial_population(self) -> Tensor:
        raise NotImplementedError

    def render(self, genomes: Tensor) -> Tensor:
        """Genomes ``(n, ...)`` -> images ``(n, C, H, W)`` in [0, 1] (called without gradients)."""
        raise NotImplementedError

    def fitness(self, genomes: Tensor, outputs: Tensor, found: Tensor) -> Tensor:
        """``(P,)`` fitness, lower is better."""
        raise NotImplementedError

    def next_generation(self, survivors: Tensor, improved: bool) -> Tensor:
        """The next population ``(P, ...)`` from the survivors ``(S, ...)`` (best first)."""
        raise NotImplementedError

    def should_stop(self) -> bool:
        """The method's own stop rule, checked after each generation."""
        return False

    def is_found(self, outputs: Tensor) -> Tensor:
        """``(P,)`` bool, what the search looks for; default: the SUT's decision flipped (``SUT.is_flipped``)."""
        return self.sut.is_flipped(outputs, self.origin_output, self.target)

    def diagnostics(self, population: Tensor) -> dict[str, float]:
        """Extra per-generation numbers for the history (e.g. GIFTbench's OOD diagnostics)."""
        return {}

    def record_diagnostics(self) -> dict[str, Any]:
        """What the campaign writes into the case's record: generations run and the per-generation diagnostics of
        the first and the last generation (none before any generation)."""
        history = self.result.history
        if not history:
            return {}
        skip = {"step", "found"}
        return {"generations": len(history),
                "first": {k: v for k, v in history[0].items() if k not in skip},
                "last": {k: v for k, v in history[-1].items() if k not in skip}}

    # ------------------------------------------------------------------ one generation
    @staticmethod
    def _digest(genome: Tensor) -> bytes:
        return hashlib.blake2b(genome.detach().float().cpu().contiguous().numpy().tobytes(), digest_size=16).digest()

    @torch.no_grad()
    def evaluate(self, genomes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """SUT outputs ``(P, ...)`` of every genome; only genomes not scored before in this case are rendered and
        evaluated (one SUT evaluation each). Returns ``(outputs, fresh (P,) bool, images of the fresh ones)``."""
        keys = [self._digest(genome) for genome in genomes]
        fresh_index: list[int] = []
        pending: set[bytes] = set()
        for i, key in enumerate(keys):
            if key not in self._scores and key not in pending:
                pending.add(key)
                fresh_index.append(i)
        chunk = self.chunk_size or max(len(fresh_index), 1)
        images = []
        for start in range(0, len(fresh_index), chunk):
            idx = fresh_index[start:start + chunk]
            imgs = self.render(genomes[idx])
            for i, output in zip(idx, self.sut(imgs), strict=True):
                self._scores[keys[i]] = output
            if self.reference is not None:  # not a SUT evaluation
                for i, output in zip(idx, self.reference(imgs), strict=True):
                    self._reference_scores[keys[i]] = output
            images.append(imgs)
            self.sut_evals += len(idx)
        outputs = torch.stack([self._scores[key] for key in keys])
        if self.reference is not None:
            self.reference_outputs = torch.stack([self._reference_scores[key] for key in keys])
        fresh = torch.zeros(len(keys), dtype=torch.bool, device=outputs.device)
        fresh[fresh_index] = True
        return outputs, fresh, (torch.cat(images) if images else genomes.new_zeros(0))

    def training_step(self, batch: Any, batch_idx: int) -> dict:
        with torch.no_grad():
            if self.population is None:
                population = self.initial_population()
            else:
                order = select_survivors(self.fitness_values, self.survivors)
                population = self.next_generation(self.population[order], self._improved)
            if population.shape[0] != self.population_size:
                raise RuntimeError(f"a generation has {population.shape[0]} individuals, "
                                   f"expected {self.population_size}")
            outputs, fresh, images = self.evaluate(population)
            found = self.is_found(outputs)
            fitness = self.fitness(population, outputs, found).float()
            margin = self.margin(outputs)
        generation_best = float(fitness.min())
        self._improved = generation_best < self.best_fitness
        self.best_fitness = min(self.best_fitness, generation_best)
        self.population, self.fitness_values = population, fitness
        any_found = bool(found.any())
        # scored survivors were candidates before: only the fresh individuals can improve the kept result
        self._keep_result(images, outputs[fresh], fitness[fresh], margin[fresh], found[fresh])
        step = self.global_step + 1
        entry = {"step": step, "best_fitness": generation_best, "found": any_found,
                 "n_found": int(found.sum()), "n_scored": int(fresh.sum()), **self.diagnostics(population)}
        self.result.history.append(entry)
        self.log_dict({"best_fitness": generation_best, "found": float(any_found)}, prog_bar=True,
                      on_step=True, on_epoch=False)
        if self._trainer is not None:
            # one generation = one optimisation step: advances ``trainer.global_step`` (``max_steps``, records)
            self.optimizers().step()
            if self.should_stop():
                self.trainer.should_stop = True
        return {"loss": torch.tensor(generation_best), "found": any_found}

    def margin(self, outputs: Tensor) -> Tensor:
        """Tie-breaker between equal fitness values (lower = closer to a flip): the SUT's
        :meth:`~hynea_pl.suts.SUT.decision_margin` (zeros for an output it cannot read, ``SUT.has_margin``)."""
        if self.sut.has_margin(outputs):
            return self.sut.decision_margin(outputs, self.origin_output, self.target)
        return torch.zeros(outputs.shape[0], device=outputs.device)

    def _keep_result(self, images: Tensor, outputs: Tensor, fitness: Tensor, margin: Tensor, found: Tensor) -> None:
        """Keep the best found individual of the first generation with one, else the best individual so far
        (arguments: the generation's freshly scored individuals)."""
        result = self.result
        if result.found or found.numel() == 0:
            return
        candidates = found if bool(found.any()) else torch.ones_like(found)
        fit = torch.where(candidates, fitness, torch.full_like(fitness, math.inf))
        ties = candidates & (fit == fit.min())
        idx = int(torch.where(ties, margin.float(), torch.full_like(margin.float(), math.inf)).argmin())
        key = (float(fitness[idx]), float(margin[idx]))
        is_found = bool(found[idx])
        if is_found or key < self._best_key:
            self._best_key = key
            result.image, result.output = images[idx:idx + 1].detach(), outputs[idx:idx + 1].detach()
            result.behaviour_loss = float(self.sut.behaviour_loss(result.output, self.objective, self.target))
            result.found, result.step = is_found, self.global_step + 1


# ---------------------------------------------------------------------- one probe image per step
#: A probe: the genome ``(1, ...)`` to render and score, and its entry for the step's history.
Probe = tuple[Tensor, dict[str, Any]]


class ProbeSearchCase(PopulationSearchCase):
    """Base of a probe search (the truncation probes, ``cfg-first-flip``): one Lightning training step renders one
    genome ``(1, ...)`` and costs at most one SUT evaluation (a genome already scored in the case is free).

    A subclass writes its search as :meth:`plan`, a Python generator that yields :data:`Probe` s and is sent each
    probe's SUT output ``(K,)``; meanwhile ``probe_image (1, C, H, W)`` / ``probe_output (K,)`` hold the last probe.
    :meth:`keep_probe` makes a probe the case's result; until then the result is the origin (step 0). ``info`` is
    what the record's ``diagnostics`` hold; ``info["probes"]`` counts the images rendered. The case stops when the
    plan ends (or the budget / ``max_steps`` first).
    """

    method_name = "probe"

    def __init__(
        self,
        generator: DiffusionGenerator,
        sut: SUT,
        origin_class: int | None = 0,
        seed: int = 0,
        target: int | None = None,
        search_seed: int | None = None,
    ) -> None:
        super().__init__(generator, sut, origin_class=origin_class, seed=seed, target=target, population_size=1,
                         survivors=1, search_seed=search_seed)
        self.info: dict[str, Any] = {}
        self.probe_image: Tensor | None = None
        self.probe_output: Tensor | None = None
        self._plan: Generator[Probe, Tensor, None] | None = None
        self._next: Probe | None = None

    @property
    def evals_per_step(self) -> int:
        return 1

    # ------------------------------------------------------------------ hooks for subclasses
    def setup_probes(self) -> None:
        """Called once the origin exists, before the plan starts (fill ``info``, precompute latents)."""

    def plan(self) -> Generator[Probe, Tensor, None]:
        """Yield probes, receive each one's SUT output ``(K,)``; return to end the case."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared machinery
    def setup_search(self) -> None:
        self.setup_probes()
        self.info.setdefault("probes", 0)
        result = self.result  # until a probe is kept, the case's result is its origin
        result.image, result.output, result.step = self.origin_image, self.origin_output, 0
        result.behaviour_loss = float(self.sut.behaviour_loss(self.origin_output, self.objective, self.target))
        self._plan = self.plan()
        self._next = next(self._plan, None)

    def probe_flipped(self, output: Tensor) -> bool:
        """Whether one probe's output ``(K,)`` left the origin's decision (``SUT.is_flipped``, the shared test)."""
        return bool(self.sut.is_flipped(output[None], self.origin_output, self.target)[0])

    def keep_probe(self, found: bool, image: Tensor | None = None, output: Tensor | None = None) -> None:
        """Make ``image (1, C, H, W)`` / ``output (K,)`` (default: the last probe's) the case's result."""
        result = self.result
        result.image = (self.probe_image if image is None else image).detach()
        result.output = (self.probe_output if output is None else output)[None].detach()
        result.behaviour_loss = float(self.sut.behaviour_loss(result.output, self.objective, self.target))
        result.found, result.step = found, self.global_step + 1

    def training_step(self, batch: Any, batch_idx: int) -> dict:
        if self._next is None:  # the plan is over (or ended before any probe)
            if self._trainer is not None:
                self.trainer.should_stop = True
            return {"loss": torch.tensor(0.0), "found": self.result.found}
        genome, meta = self._next
        with torch.no_grad():
            outputs, fresh, images = self.evaluate(genome)
            self.probe_image = images[:1] if bool(fresh[0]) else self.render(genome)
            self.probe_output = outputs[0]
            self.info["probes"] += 1
            try:
                self._next = self._plan.send(self.probe_output)
            except StopIteration:
                self._next = None
        entry = {"step": self.global_step + 1, **meta, "label": int(self.sut.prediction(outputs)[0]),
                 "found": self.result.found, "n_scored": int(fresh.sum())}
        self.result.history.append(entry)
        if self._trainer is not None:
            self.optimizers().step()  # one probe = one optimisation step (``trainer.global_step``)
            if self._next is None:
                self.trainer.should_stop = True
        return {"loss": torch.tensor(float(self.result.behaviour_loss)), "found": self.result.found}

    def record_diagnostics(self) -> dict[str, Any]:
        return dict(self.info)
