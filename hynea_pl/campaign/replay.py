"""Replay a found failure: regenerate a case's result image from its saved adapter and seed, and check it."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torchvision.utils import save_image

from hynea_pl.campaign.campaign import Campaign
from hynea_pl.campaign.case_types import TestCase
from hynea_pl.campaign.config import quiet_lightning_info
from hynea_pl.campaign.records import CONFIG_FILE, RECORDS_FILE, check_run_folder, load_origin_noise
from hynea_pl.campaign.runner import ATTEMPT_SEED_STRIDE
from hynea_pl.images import as_saved, check_run_image, load_image
from hynea_pl.methods.base import RUN_FILE
from hynea_pl.schema import CaseRecord, read_records
from hynea_pl.zoo.cache import current_class_paths

#: A replayed image matches when no pixel differs by more than one 8-bit level from the stored PNG.
PIXEL_TOLERANCE = 1 / 255


@dataclass
class ReplayResult:
    """How the regenerated image compares to the stored one."""

    record: CaseRecord
    image: torch.Tensor  # (1, C, H, W) in [0, 1]
    max_abs_diff: float  # against the stored PNG, in [0, 1] (after the same 8-bit quantisation)
    result_label: int  # the SUT's decision on the regenerated image, as it would be saved (8-bit)
    stored_label: int  # the SUT's decision on the stored PNG: the failure as saved

    @property
    def matches(self) -> bool:
        """The regenerated image is the stored one and the SUT decides on both as the record says."""
        return (self.max_abs_diff <= PIXEL_TOLERANCE + 1e-9
                and self.result_label == self.record.result_label == self.stored_label)


def find_record(run_dir: Path, case_id: str) -> CaseRecord:
    """The record of ``case_id`` in a run folder, if it saved an adapter (one-line errors otherwise)."""
    records = {r.case_id: r for r in read_records(check_run_folder(run_dir) / RECORDS_FILE)}
    if case_id not in records:
        raise ValueError(f"no case {case_id!r} in {run_dir / RECORDS_FILE} (cases: {', '.join(sorted(records))})")
    record = records[case_id]
    if record.adapter is None:
        raise ValueError(f"case {case_id} has no saved adapter: run it with --model.init_args.save_adapters true "
                         "(only flipped cases of a method with an adapter, e.g. HyNeA, are saved)")
    return record


@torch.no_grad()
def replay_case(run_dir: Path | str, case_id: str) -> ReplayResult:
    """Rebuild the run's campaign (generator, SUT, ...) from its ``config.yaml`` and :func:`replay` the case."""
    run_dir = Path(run_dir)
    record = find_record(run_dir, case_id)
    config = run_dir / CONFIG_FILE
    quiet_lightning_info()
    text = config.read_text()
    current = current_class_paths(text)  # a run written before a class moved names its old path
    if current == text:
        return replay(Campaign.from_config(config), record, run_dir)
    with tempfile.TemporaryDirectory() as folder:
        upgraded = Path(folder) / CONFIG_FILE
        upgraded.write_text(current)
        return replay(Campaign.from_config(upgraded), record, run_dir)


def check_layout(record: CaseRecord, condition: Any) -> None:
    """Refuse (one line) to replay a scene whose recorded layout is not the one its seed draws now."""
    if record.layout is None:
        return
    drawn = condition.as_dict() if hasattr(condition, "as_dict") else None
    recorded = {key: record.layout.get(key) for key in ("size", "classes", "squares")}
    if drawn != recorded:
        raise ValueError(f"case {record.case_id}: its recorded layout {recorded} is not the layout seed {record.seed} "
                         f"draws with this generator ({drawn})")


@dataclass
class SavedRun:
    """Which run of its case saved an adapter (its folder's ``run.json``, :data:`~hynea_pl.methods.base.RUN_FILE`)."""

    number: int = 0  # the run's number (0: the first), seeded with ``case.seed + number * ATTEMPT_SEED_STRIDE``
    arguments: dict[str, Any] = field(default_factory=dict)  # the init arguments that built it besides the case's
    target: int | None = None  # the run's target; None: not recorded (an adapter saved before run.json)

    @classmethod
    def read(cls, adapter: Path) -> SavedRun:
        """The run an adapter folder names; a folder without ``run.json`` (saved before it existed) holds the case's
        first run."""
        path = adapter / RUN_FILE
        if not path.is_file():
            return cls()
        try:
            run = json.loads(path.read_text())
            return cls(int(run.get("run", 0)), dict(run.get("arguments") or {}), run.get("target"))
        except (ValueError, TypeError, AttributeError) as error:
            raise ValueError(f"{path} is no run description: {error}") from None


def check_target(record: CaseRecord, run: SavedRun, model: Any) -> None:
    """Refuse (one line) to replay a run whose rebuilt target is not the one it saved."""
    if run.target is None:
        return
    rebuilt = int(model.target[0])
    if rebuilt != int(run.target):
        raise ValueError(f"case {record.case_id}: run {run.number} saved target {run.target}, but rebuilt with "
                         f"{run.arguments} it aims at {rebuilt}")


@torch.no_grad()
def replay(campaign: Campaign, record: CaseRecord, run_dir: Path | str) -> ReplayResult:
    """Build the run of ``record``'s case whose adapter was saved (:class:`SavedRun`: seeded and built as the case
    loop did) in ``campaign``, load that adapter from ``run_dir``, regenerate its result and compare it with the
    stored PNG."""
    run_dir = Path(run_dir)
    # an origin inverted from a real image starts from its saved noise, not the seed's
    case = TestCase(record.case_id, record.origin_class, record.seed, record.skipped_seeds,
                    noise=load_origin_noise(run_dir, record))
    adapter = run_dir / record.adapter
    run = SavedRun.read(adapter)
    L.seed_everything(case.seed + ATTEMPT_SEED_STRIDE * run.number, verbose=False)
    model = campaign.build_module(case, **run.arguments)
    model.setup("fit")
    check_layout(record, model.condition)
    check_target(record, run, model)
    model.load_adapter(adapter)
    image = model.generate().detach()
    with tempfile.TemporaryDirectory() as tmp:  # the same 8-bit quantisation the stored PNG went through
        save_image(image[0].cpu(), Path(tmp) / "replay.png")
        replayed = load_image(Path(tmp) / "replay.png")
    # the regenerated image has the run's size: a stored PNG of another size is one line naming it
    stored = check_run_image(run_dir / record.result_image, load_image(run_dir / record.result_image),
                             tuple(replayed.shape))
    device = image.device
    sut = campaign.sut

    def decision(images: torch.Tensor) -> int:
        return int(sut.prediction(sut(images.to(device)))[0])

    stored_image = stored[: image.shape[1]][None] if stored.shape[0] != image.shape[1] else stored[None]
    return ReplayResult(record, image, float((replayed - stored).abs().max()), decision(as_saved(image)),
                        decision(stored_image))
