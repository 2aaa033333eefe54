"""A method of your own: a random walk on the case's starting noise until the SUT's decision flips."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from hynea_pl.generators import Generator
from hynea_pl.methods import TestCaseModule
from hynea_pl.methods.origin import register_origin
from hynea_pl.suts import SUT


class NoiseWalkCase(TestCaseModule):
    """Each step moves the starting noise ``(1, C, h, w)`` by ``step_size`` times a Gaussian draw, samples the
    image and asks the SUT; the result is the image closest to the flip, the first flip ends the case."""

    method_name = "noise-walk"

    def __init__(self, generator: Generator, sut: SUT, origin_class: int | None = 0, seed: int = 0,
                 step_size: float = 0.1) -> None:
        super().__init__()
        self.generator, self.sut = generator, sut
        self.save_hyperparameters(ignore=["generator", "sut"])
        self.automatic_optimization = False  # nothing is trained: no optimiser, no backward

    def setup(self, stage: str) -> None:
        register_origin(self, self.hparams.seed, self.hparams.origin_class, None)  # noise, origin, target
        self.walk, self.rng = self.noise.clone(), torch.Generator().manual_seed(self.hparams.seed)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(range(max(self.trainer.max_steps, 1)), batch_size=None)  # one item per step

    def configure_optimizers(self) -> None:
        return None  # nothing is trained

    @torch.no_grad()
    def training_step(self, batch: int, batch_idx: int) -> dict:
        self.walk += self.hparams.step_size * torch.randn(self.walk.shape, generator=self.rng).to(self.walk)
        image = self.generator.sample(self.walk, self.condition)
        output = self.sut(image)
        self.sut_evals += 1  # every image the SUT scores counts against the budget
        margin = float(self.sut.decision_margin(output, self.origin_output, self.target).max())
        found = bool(self.sut.is_flipped(output, self.origin_output, self.target).all())
        if found or margin < self.result.behaviour_loss:  # keep the image closest to the flip
            self.result.image, self.result.output, self.result.behaviour_loss = image, output, margin
            self.result.found, self.result.step = found, self.global_step + 1
        return {"loss": torch.tensor(margin), "found": found}
