"""A campaign's W&B run carries its summary's numbers as W&B metrics (the run's history and summary), read back from
the offline run's transaction log (``run-<id>.wandb``: W&B's LevelDB-style log of protobuf records)."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import tiny_args

from hynea_pl.cli import main

BLOCK, HEADER = 32768, 7  # the log's block size; a chunk's header: crc32 (4 bytes), length (2), type (1)


def wandb_records(path: Path) -> Iterator:
    """The protobuf records of an offline run's ``.wandb`` file (chunks of a record joined: types 1 full, 4 last)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "a W&B transaction log"
    pos, record = HEADER, b""
    while pos + HEADER <= len(data):
        if BLOCK - pos % BLOCK < HEADER:  # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if pos + HEADER + length > len(data):  # a chunk still being written
            return
        record += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (1, 4):
            parsed = wandb_internal_pb2.Record()
            parsed.ParseFromString(record)
            record = b""
            yield parsed


def finished_log(run: Path, timeout: float = 60.0) -> list:
    """The records of an offline run's log once it holds the run's ``exit`` record (W&B's service process writes
    the log in the background, and may still be writing when ``finish()`` has returned)."""
    deadline = time.monotonic() + timeout
    while True:
        records = list(wandb_records(next(run.glob("*.wandb"))))
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.1)


def logged(records: list, kind: str) -> dict:
    """``{key: value}`` of a run's ``history`` (its metrics) or ``summary`` records, later ones winning."""
    out = {}
    for record in records:
        if record.WhichOneof("record_type") == kind:
            for item in record.history.item if kind == "history" else record.summary.update:
                out[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return out


@pytest.mark.slow
def test_the_campaign_run_logs_the_summary_as_wandb_metrics(tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    args = tiny_args(tmp_path, "wb", "--cases.classes", "[1]",
                     "--trainer.logger", "lightning.pytorch.loggers.WandbLogger",
                     "--trainer.logger.init_args.offline", "true",
                     "--trainer.logger.init_args.project", "hynea_pl_test",
                     "--trainer.logger.init_args.save_dir", str(tmp_path))
    assert main(args) == 0
    assert json.loads((tmp_path / "wb" / "records.jsonl").read_text())["error"] is None
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 2, "the case's run and the campaign's run"
    assert any(list(run.glob("files/media/images/case/*.png")) for run in runs), "the case image panel was logged"
    logs = [finished_log(run) for run in runs]
    names = [[r.run.display_name for r in log if r.WhichOneof("record_type") == "run"] for log in logs]
    assert sorted(names) == [["wb/c1-0"], ["wb/campaign"]], [[r.WhichOneof("record_type") for r in log] for log in logs]
    campaign = logs[names.index(["wb/campaign"])]

    summary = json.loads((tmp_path / "wb" / "summary.json").read_text())
    numbers = {k: v for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert {"n_cases", "flip_rate", "misclassification_rate", "mean_sut_evals_all", "mean_runtime_s"} <= set(numbers)
    metrics = logged(campaign, "history")
    assert {k: metrics.get(k) for k in numbers} == pytest.approx(numbers), "every number of the summary is a metric"
    run_summary = logged(campaign, "summary")
    assert run_summary["flip_rate"] == pytest.approx(summary["flip_rate"]) and run_summary["method"] == "hynea"
