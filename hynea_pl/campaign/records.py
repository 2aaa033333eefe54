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
from hynea_pl.verdicts import VERDICT_CEILING

_NOISE_KEY = "noise"


def load_origin_noise(run_dir: str | Path, record: CaseRecord) -> torch.Tensor | None:
    """The inversion noise a real-image case saved (:meth:`RunFolder.save_real_origin`); ``None`` for an origin
    drawn from its seed."""
    if record.origin_noise is None:
        return None
    from safetensors.torch import load_file

    return load_file(str(Path(run_dir) / record.origin_noise))[_NOISE_KEY]


#: What a campaign from real images read (``cases.images``): counts of files read, skipped and converted.
TEST_IMAGES_FILE = "test_images.json"
#: Where a failed case's full traceback goes (``errors/<case_id>.txt``; its record's ``error`` names the file).
ERRORS_DIR = "errors"

CONFIG_FILE = "config.yaml"
RECORDS_FILE = "records.jsonl"


def check_run_folder(path: str | Path) -> Path:
    """``path`` when it is a run folder (what ``fit`` writes: a ``config.yaml`` and a ``records.jsonl`` with at least
    one record), else one line naming the folder and what it lacks (``evaluate``, ``compare``, ``report`` and
    ``replay`` read only run folders)."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such folder (a run folder, as fit writes it)")
    for name in (RECORDS_FILE, CONFIG_FILE):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path} is no run folder: it has no {name}")
    with open(path / RECORDS_FILE, encoding="utf-8") as stream:
        if not any(line.strip() for line in stream):
            raise ValueError(f"{path} is no run folder yet: its {RECORDS_FILE} holds no record")
    return path


def difference_image(origin: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """``|result - origin|`` per pixel ``(C, H, W)``, stretched to [0, 1] (black: unchanged)."""
    diff = (result - origin).abs()
    return diff / diff.max().clamp_min(1e-8)


SHARD_GLOB = "records.rank-*.jsonl"


#: The run folder this process opened last (what an interrupted command reports).
_OPENED: RunFolder | None = None


def last_opened() -> RunFolder | None:
    """The run folder this process opened last, or ``None``."""
    return _OPENED


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
        self.records_path = self.path / RECORDS_FILE
        self.append_path = self.records_path if rank is None else self.path / f"records.rank-{rank}.jsonl"
        global _OPENED
        _OPENED = self

    def n_kept(self) -> int:
        """How many cases have a record in the folder (``records.jsonl`` and every shard), e.g. after an interrupt."""
        ids: set[str] = set()
        for path in [self.records_path, *self.shard_paths()]:
            try:
                ids |= {r.case_id for r in read_records(path)} if path.exists() else set()
            except Exception:  # noqa: BLE001 - a torn last line of a killed write: count what can be read
                continue
        return len(ids)

    def records(self) -> list[CaseRecord]:
        return read_records(self.records_path) if self.records_path.exists() else []

    def shard_paths(self) -> list[Path]:
        return sorted(self.path.glob(SHARD_GLOB))

    def consolidate(self, order: list[str] | None = None) -> list[CaseRecord]:
        """Merge ``records.jsonl`` and every rank's shard into ``records.jsonl`` (torn last lines dropped, a case
        recorded twice kept once: its last record, so a failed case retried on resume is superseded), then remove the
        shards. Cases are kept in ``records.jsonl``'s order, then in
        ``order`` (the campaign's case order). Atomic: a kill leaves either the old files or the merged one."""
        paths = [self.records_path, *self.shard_paths()]
        for path in paths:
            drop_torn_tail(path)
        merged: dict[str, CaseRecord] = {}
        existing = self.records()
        for record in existing + [r for path in paths[1:] for r in read_records(path)]:
            merged[record.case_id] = record  # the last record of a case supersedes a failed earlier one
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
        """The cases finished without an error (a failed case is run again on resume; its last record counts)."""
        last = {r.case_id: r for r in self.records()}
        return {cid for cid, r in last.items() if not r.error}

    def write_config(self, text: str, replace: bool = False) -> None:
        """Keep the run's parsed config: the first one (a resumed run keeps what its first cases ran with) unless
        ``replace`` (a rerun forced with ``--output.resume force``)."""
        path = self.path / CONFIG_FILE
        if replace or not path.exists():
            staging = path.with_suffix(".yaml.tmp")
            staging.write_text(text)
            os.replace(staging, path)

    def save_case_images(self, case_id: str, origin: torch.Tensor, result: torch.Tensor) -> dict[str, str]:
        """Save origin, result and difference PNGs of images ``(C, H, W)``; returns paths relative to the run."""
        paths = {}
        for kind, image in (("origin", origin), ("result", result), ("diff", difference_image(origin, result))):
            relative = f"cases/{case_id}_{kind}.png"
            save_image(image, self.path / relative)
            paths[f"{kind}_image"] = relative
        return paths

    def save_real_origin(self, case_id: str, real: torch.Tensor, noise: torch.Tensor) -> dict[str, str]:
        """Save a real-image case's real image ``(C, H, W)`` (PNG) and its inversion's noise (safetensors, what
        replay starts from); returns the record's ``real_image`` and ``origin_noise`` paths."""
        from safetensors.torch import save_file

        paths = {"real_image": f"cases/{case_id}_real.png", "origin_noise": f"cases/{case_id}_noise.safetensors"}
        (self.path / "cases").mkdir(parents=True, exist_ok=True)
        save_image(real, self.path / paths["real_image"])
        save_file({_NOISE_KEY: noise.detach().float().cpu().contiguous()}, str(self.path / paths["origin_noise"]))
        return paths

    def adapter_dir(self, case_id: str) -> tuple[Path, str]:
        """Where a case's adapter goes: ``(absolute path, path relative to the run)``."""
        relative = f"cases/{case_id}_adapter"
        return self.path / relative, relative

    def write_traceback(self, case_id: str, trace: str) -> str:
        """Write a failed case's full traceback ``trace`` to ``errors/<case_id>.txt``; return that path, relative to
        the run."""
        relative = f"{ERRORS_DIR}/{case_id}.txt"
        (self.path / ERRORS_DIR).mkdir(parents=True, exist_ok=True)
        (self.path / relative).write_text(trace)
        return relative

    def append(self, record: CaseRecord) -> None:
        """Append one case's record (one JSON object per line) to this process's records file, flushed and
        fsync'd before returning."""
        drop_torn_tail(self.append_path)
        with self.append_path.open("a") as stream:
            stream.write(record.to_json() + "\n")
            stream.flush()
            os.fsync(stream.fileno())

    def write_test_images(self, source: str, read: int, skipped: dict[str, int], converted: dict[str, int]) -> None:
        """Write ``test_images.json``: how many files of ``cases.images`` were read, skipped and converted."""
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / TEST_IMAGES_FILE).write_text(json.dumps(
            {"source": source, "read": read, "skipped": dict(skipped), "converted": dict(converted)}, indent=2))

    def finish(self, verdict_ceiling: float | None = None) -> dict:
        """Write ``summary.json`` from the records (and ``test_images.json``'s skipped files, and the campaign's
        ``verdict_ceiling``: :meth:`hynea_pl.suts.SUT.verdict_ceiling`); return the summary."""
        summary = summarize_records(self.records())
        summary[VERDICT_CEILING] = verdict_ceiling
        if (self.path / TEST_IMAGES_FILE).is_file():
            summary["skipped_files"] = sum(json.loads((self.path / TEST_IMAGES_FILE).read_text())["skipped"].values())
        (self.path / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary


#: Config keys a rerun into an existing run folder may change: where it goes, how it is logged, on which devices
#: and how many processes it runs (a case's result does not depend on its shard), how many cases adapt together (nor
#: on its batch, tests/test_batched_cases.py, unless its later runs took spare slots: ``cases.spare_slots``), and
#: which cases it selects (a case's origin depends only on its
#: class, index and the base seed).
RESUMABLE_KEYS = ("output", "trainer.logger", "trainer.enable_progress_bar", "trainer.accelerator", "trainer.devices",
                  "trainer.num_nodes", "trainer.strategy", "cases.classes", "cases.n_per_class", "cases.case_ids",
                  "cases.batch_size", "cases.spare_slots")


def _flatten(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict) and value:
        flat: dict[str, object] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def config_differences(folder: str | Path, text: str) -> list[str]:
    """The keys in which the config ``text`` differs from the run folder's ``config.yaml`` (none when there is none
    yet), except :data:`RESUMABLE_KEYS` and what is below them; the saved config's moved class paths are read as
    they are now (:func:`hynea_pl.zoo.cache.current_class_paths`, as ``replay`` reads them)."""
    import yaml

    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        return []
    from hynea_pl.zoo.cache import current_class_paths  # a run written before a class moved names its old path

    def flat(content: str) -> dict[str, object]:
        return _flatten(yaml.safe_load(content) or {})

    old, new = flat(current_class_paths(path.read_text())), flat(text)

    def resumable(key: str) -> bool:
        return any(key == k or key.startswith(f"{k}.") for k in RESUMABLE_KEYS)

    return sorted(key for key in old.keys() | new.keys() if not resumable(key) and old.get(key) != new.get(key))
