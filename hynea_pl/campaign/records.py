"""A run folder: its config, ``records.jsonl`` appended case by case, per-case PNGs and ``summary.json`` (its grids are
drawn by the report layer, :func:`hynea_pl.report.grid.write_grids`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torchvision.utils import save_image

from hynea_pl.campaign.summary import summarize_records
from hynea_pl.jsonl import drop_torn_tail
from hynea_pl.schema import CaseRecord, read_records

CONFIG_FILE = "config.yaml"


def difference_image(origin: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """``|result - origin|`` per pixel ``(C, H, W)``, stretched to [0, 1] (black: unchanged)."""
    diff = (result - origin).abs()
    return diff / diff.max().clamp_min(1e-8)


SHARD_GLOB = "records.rank-*.jsonl"


class RunFolder:
    """Writes a campaign's outputs to ``root/name``.

    An existing folder is resumed: the cases already in its ``records.jsonl`` are kept and not run again, so
    no result already written is lost. ``config.yaml`` is the parsed config of the run (``evaluate``, ``replay``
    and ``compare`` read it).

    A sharded campaign's process ``rank`` appends to its own ``records.rank-<rank>.jsonl``; :meth:`consolidate`
    (rank 0, at start and end) merges every shard into ``records.jsonl``. A rank that dies leaves its shard: its
    finished cases are kept by the next start, whatever the number of processes then.
    """

    def __init__(self, root: str | Path, name: str, rank: int | None = None) -> None:
        self.path = Path(root) / name
        self.cases_dir = self.path / "cases"
        self.cases_dir.mkdir(parents=True, exist_ok=True)
        self.records_path = self.path / "records.jsonl"
        self.append_path = self.records_path if rank is None else self.path / f"records.rank-{rank}.jsonl"

    def records(self) -> list[CaseRecord]:
        return read_records(self.records_path) if self.records_path.exists() else []

    def shard_paths(self) -> list[Path]:
        return sorted(self.path.glob(SHARD_GLOB))

    def consolidate(self, order: list[str] | None = None) -> list[CaseRecord]:
        """Merge ``records.jsonl`` and every rank's shard into ``records.jsonl`` (torn last lines dropped, a case
        recorded twice kept once), then remove the shards. Cases are kept in ``records.jsonl``'s order, then in
        ``order`` (the campaign's case order). Atomic: a kill leaves either the old files or the merged one."""
        paths = [self.records_path, *self.shard_paths()]
        for path in paths:
            drop_torn_tail(path)
        merged: dict[str, CaseRecord] = {}
        existing = self.records()
        for record in existing + [r for path in paths[1:] for r in read_records(path)]:
            merged.setdefault(record.case_id, record)
        rank = {cid: i for i, cid in enumerate(order or [])}
        known = list(dict.fromkeys(r.case_id for r in existing))
        new = sorted((r for cid, r in merged.items() if cid not in set(known)),
                     key=lambda r: rank.get(r.case_id, len(rank)))
        records = [merged[cid] for cid in known] + new
        if len(paths) > 1 or len(records) != len(existing):
            staging = self.records_path.with_suffix(".jsonl.tmp")
            with staging.open("w", encoding="utf-8") as stream:
                stream.write("".join(record.to_json() + "\n" for record in records))
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(staging, self.records_path)
            for path in paths[1:]:
                path.unlink()
        return records

    def done_case_ids(self) -> set[str]:
        return {r.case_id for r in self.records()}

    def write_config(self, text: str) -> None:
        """Keep the run's parsed config (the first one: a resumed run keeps what its first cases ran with)."""
        path = self.path / CONFIG_FILE
        if not path.exists():
            path.write_text(text)

    def save_case_images(self, case_id: str, origin: torch.Tensor, result: torch.Tensor) -> dict[str, str]:
        """Save origin, result and difference PNGs of images ``(C, H, W)``; returns paths relative to the run."""
        paths = {}
        for kind, image in (("origin", origin), ("result", result), ("diff", difference_image(origin, result))):
            relative = f"cases/{case_id}_{kind}.png"
            save_image(image, self.path / relative)
            paths[f"{kind}_image"] = relative
        return paths

    def adapter_dir(self, case_id: str) -> tuple[Path, str]:
        """Where a case's adapter goes: ``(absolute path, path relative to the run)``."""
        relative = f"cases/{case_id}_adapter"
        return self.path / relative, relative

    def append(self, record: CaseRecord) -> None:
        """Append one case's record (one JSON object per line) to this process's records file, flushed and
        fsync'd before returning."""
        drop_torn_tail(self.append_path)
        with self.append_path.open("a") as stream:
            stream.write(record.to_json() + "\n")
            stream.flush()
            os.fsync(stream.fileno())

    def finish(self) -> dict:
        """Write ``summary.json`` from the records; return the summary."""
        summary = summarize_records(self.records())
        (self.path / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary
