"""Sharding a campaign over processes: one single-device process per device and node, started by Lightning.

``--trainer.devices N --trainer.num_nodes M`` asks for ``N x M`` processes. Lightning Fabric's launcher starts them
(its subprocess launcher re-runs the same command with ``LOCAL_RANK`` set), or finds them already started by
``torchrun`` or SLURM through its cluster environments. The processes join one process group (gloo on CPU, nccl on
GPU) used only for barriers and for gathering small Python objects; no gradient is ever synchronised: each process
fits its own test cases with single-device Trainers on its own device.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from typing import Any

import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy
from lightning.fabric.utilities.rank_zero import rank_zero_only
from lightning.pytorch.strategies import SingleDeviceStrategy

#: Ranks wait at barriers for the slowest shard (a zoo build, an unlucky shard of long cases).
BARRIER_TIMEOUT = datetime.timedelta(days=3)
#: Trainer arguments the campaign owns: every case runs on one device of its process.
CAMPAIGN_TRAINER_KEYS = ("accelerator", "devices", "num_nodes", "strategy")
#: Strategies that mean "one process per device" (the campaign's meaning); anything else would sync gradients.
PROCESS_PER_DEVICE = ("auto", "ddp", "ddp_spawn", "ddp_fork", "ddp_notebook", None)


@dataclass
class Shard:
    """This process's place in the campaign: ``rank`` of ``world_size`` processes, on ``device``."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    fabric: Fabric | None = field(default=None, repr=False)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def prefix(self) -> str:
        """``"[rank 1/2] "`` on a sharded campaign, else empty."""
        return f"[rank {self.rank}/{self.world_size}] " if self.world_size > 1 else ""

    def barrier(self) -> None:
        if self.fabric is not None:
            self.fabric.barrier()

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order."""
        if self.fabric is None:
            return [obj]
        out: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out

    def take(self, items: list[Any]) -> list[Any]:
        """This rank's disjoint, deterministic share of ``items``: every ``world_size``-th item from ``rank``."""
        return items[self.rank::self.world_size]

    def case_trainer_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A case's Trainer arguments: the configured ones, on this process's single device. The strategy keeps the
        frozen components on the device between cases (Lightning's default teardown moves the model to the CPU)."""
        kwargs = {k: v for k, v in kwargs.items() if k not in CAMPAIGN_TRAINER_KEYS}
        devices = 1 if self.device.index is None else [self.device.index]
        return {**kwargs, "accelerator": self.device.type, "devices": devices, "num_nodes": 1,
                "strategy": ResidentSingleDeviceStrategy(device=self.device)}


class ResidentSingleDeviceStrategy(SingleDeviceStrategy):
    """A single-device strategy whose teardown leaves the module where it is: a campaign's frozen generator, SUT and
    reference are shared by every case of the process and stay on its device."""

    def teardown(self) -> None:
        module, self._lightning_module = self._lightning_module, None
        try:
            super().teardown()
        finally:
            self._lightning_module = module


def requested_world_size(trainer: Any) -> int:
    """``devices x num_nodes`` of the trainer config when ``devices`` is a count or a list; ``1`` for ``auto``
    unless a launcher (torchrun, SLURM, Lightning) has already started several processes."""
    devices, num_nodes = trainer.get("devices", 1), int(trainer.get("num_nodes", 1) or 1)
    if isinstance(devices, str):
        devices = devices.strip()
        if devices.isdigit():
            devices = int(devices)
        elif "," in devices:
            devices = [d for d in devices.split(",") if d.strip()]
    count = len(devices) if isinstance(devices, (list, tuple)) else devices if isinstance(devices, int) else None
    if count is None or count < 1:  # "auto" or -1: Lightning decides; only an external launcher makes it > 1
        return int(os.environ.get("WORLD_SIZE", "1"))
    return count * num_nodes


def launch(trainer: Any) -> Shard:
    """Start (or join) the campaign's processes for the trainer config and return this process's shard.

    One process needs no process group: the campaign runs as before, on the configured accelerator's first device.
    """
    strategy = trainer.get("strategy", "auto")
    if not isinstance(strategy, str) and strategy is not None:
        raise ValueError("trainer.strategy: a campaign runs each test case on one device; give 'auto' (or 'ddp') and "
                         "scale with --trainer.devices / --trainer.num_nodes")
    if strategy not in PROCESS_PER_DEVICE:
        raise ValueError(f"trainer.strategy {strategy!r} is not supported by a campaign: cases are independent and "
                         "never share gradients; use 'auto' (one process per device, --trainer.devices N)")
    accelerator = trainer.get("accelerator", "auto") or "auto"
    if requested_world_size(trainer) == 1:
        fabric = Fabric(accelerator=accelerator, devices=trainer.get("devices", 1) or 1, num_nodes=1)
        return Shard(device=fabric.device)
    fabric = Fabric(accelerator=accelerator, devices=trainer.get("devices", 1), num_nodes=trainer.get("num_nodes", 1),
                    strategy=DDPStrategy(timeout=BARRIER_TIMEOUT))
    fabric.launch()
    # every process logs its own cases: Lightning's rank-zero guards would turn ranks > 0 into silent no-op loggers
    rank_zero_only.rank = 0
    return Shard(fabric.global_rank, fabric.world_size, fabric.local_rank, fabric.device, fabric)


__all__ = ["Shard", "ResidentSingleDeviceStrategy", "launch", "requested_world_size"]
