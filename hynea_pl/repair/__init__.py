"""From failures to a better model: fine-tune a SUT on the valid failures of test runs, beside a control fine-tuned
on as many real images, and measure what each learnt (``python -m hynea_pl repair``).

- :mod:`~hynea_pl.repair.failures`: the valid failures of run folders, labelled with their origin's class;
- :mod:`~hynea_pl.repair.module`: :class:`RepairModule`, the SUT's fine-tuning as a ``LightningModule``;
- :mod:`~hynea_pl.repair.measure`: accuracy and natural errors on real held-out images;
- :mod:`~hynea_pl.repair.command`: the command, its reuse of what exists, and the before / after table.
"""

from hynea_pl.repair.failures import Failures, collect_failures
from hynea_pl.repair.module import RepairModule

__all__ = ["Failures", "RepairModule", "collect_failures"]
