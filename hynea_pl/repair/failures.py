"""The valid failures of run folders: each result image labelled with its origin's class (what the judges read in
it), the case seeds they came from, and the class count of the SUT that failed on them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from hynea_pl.images import load_image
from hynea_pl.schema import read_records
from hynea_pl.suts import ClassifierSUT


@dataclass(frozen=True)
class Failures:
    """``images (N, C, H, W)`` in [0, 1], ``labels (N,)`` (the origins' classes), ``sources`` (``run/case_id``
    each), ``seeds`` (the runs' ``cases.seed``) and ``num_classes`` (the length of the runs' SUT outputs)."""

    images: torch.Tensor
    labels: torch.Tensor
    sources: list[str]
    seeds: list[int]
    num_classes: int

    def __len__(self) -> int:
        return len(self.labels)

    def with_channels(self, channels: int) -> Failures:
        """The failures as ``channels``-channel images (a grey image saved as RGB back to 1 channel, or grey to 3)."""
        images = self.images
        if images.shape[1] != channels:
            images = images.mean(1, keepdim=True) if channels == 1 else images.expand(-1, channels, -1, -1)
        return Failures(images, self.labels, self.sources, self.seeds, self.num_classes)


def run_case_seed(run: Path) -> int:
    """The ``cases.seed`` a run's ``config.yaml`` was run with (0 when it names none)."""
    from hynea_pl.report.compare import run_config

    return int(((run_config(run) or {}).get("cases") or {}).get("seed") or 0)


def collect_failures(runs: list[Path | str]) -> Failures:
    """The valid failures of every run in ``runs``; a one-line error for a folder without records, a run with no
    valid failure, a multi-label or detection run, or runs of different class counts."""
    images, labels, sources, seeds, counts = [], [], [], set(), set()
    for run in map(Path, runs):
        if not (run / "records.jsonl").is_file():
            raise ValueError(f"{run} is not a run folder (no records.jsonl)")
        records = [r for r in read_records(run / "records.jsonl") if r.verdict == "valid_failure"]
        if not records:
            raise ValueError(f"{run} has no valid failure: nothing to repair with (leave it out)")
        if any(r.task != ClassifierSUT.task for r in records):
            raise ValueError(f"{run} is a {records[0].task} run: repair fine-tunes {ClassifierSUT.task} classifiers "
                             "only")
        for record in records:
            images.append(load_image(run / record.result_image))
            labels.append(record.origin_class)
            sources.append(f"{run.name}/{record.case_id}")
            counts.add(len(record.origin_pred))
        seeds.add(run_case_seed(run))
    if len(counts) > 1:
        raise ValueError(f"the runs' SUTs have different class counts {sorted(counts)}: repair one SUT's runs")
    shapes = {tuple(image.shape) for image in images}
    if len(shapes) > 1:
        raise ValueError(f"the runs' images have different shapes {sorted(shapes)}: repair one SUT's runs")
    return Failures(torch.stack(images), torch.tensor(labels), sources, sorted(seeds), counts.pop())


__all__ = ["Failures", "collect_failures", "run_case_seed"]
