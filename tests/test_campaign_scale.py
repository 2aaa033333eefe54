"""Campaigns at scale: sharding over processes, components shared by a process's cases, crash-safe resume, W&B."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from records_regression import differences
from test_cli import comparable, read_records, tiny_args

from hynea_pl.campaign.distributed import Shard, requested_world_size
from hynea_pl.campaign.records import RunFolder, drop_torn_tail
from hynea_pl.cli import main
from hynea_pl.schema import CaseRecord

REPO = Path(__file__).resolve().parents[1]
SIX_CASES = ("--cases.classes", "[1, 7, 3]", "--cases.n_per_class", "2")


def record(case_id: str, **fields) -> CaseRecord:
    return CaseRecord(method="m", run="r", task="multiclass", case_id=case_id, seed=0, origin_class=0, **fields)


def by_case(records: list[dict]) -> dict[str, dict]:
    return {r["case_id"]: r for r in comparable(records)}


def fit_process(args: list[str], cache: str, **popen) -> subprocess.Popen:
    """``python -m hynea_pl`` + ``args`` in a real child process (its own session, so a kill reaches every rank)."""
    env = {**os.environ, "HYNEA_PL_CACHE": cache, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled",
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    return subprocess.Popen([sys.executable, "-m", "hynea_pl", *args], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def finish(process: subprocess.Popen, timeout: float = 600) -> str:
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out[-3000:]
    return out


# ------------------------------------------------------------------ unit: shards, torn lines, merging
def test_shards_take_disjoint_deterministic_slices_covering_every_case():
    items = list(range(11))
    parts = [Shard(rank, 3).take(items) for rank in range(3)]
    assert sorted(sum(parts, [])) == items and parts[1] == [1, 4, 7, 10]


@pytest.mark.parametrize(("devices", "nodes", "world"), [(1, 1, 1), (2, 1, 2), ("2", 2, 4), ([0, 1], 1, 2),
                                                         ("0,1,", 1, 2), ("auto", 1, 1)])
def test_world_size_is_devices_times_nodes(devices, nodes, world, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert requested_world_size({"devices": devices, "num_nodes": nodes}) == world


def test_a_torn_last_line_is_cut_with_a_warning_and_complete_lines_are_kept(tmp_path):
    path = tmp_path / "records.jsonl"
    whole = record("c0-0").to_json() + "\n"
    path.write_text(whole + record("c0-1").to_json()[:40])
    with pytest.warns(UserWarning, match="torn last line"):
        assert drop_torn_tail(path) == 40
    assert path.read_text() == whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert drop_torn_tail(path) == 0  # a complete file is left alone, silently


def test_consolidate_merges_shards_once_per_case_in_campaign_order(tmp_path):
    folder = RunFolder(tmp_path, "run")
    folder.append(record("c0-0"))
    for rank, ids in ((0, ["c1-0", "c0-0"]), (1, ["c2-0", "c0-1"])):  # c0-0 twice: kept once
        shard = RunFolder(tmp_path, "run", rank=rank)
        for cid in ids:
            shard.append(record(cid))
    (tmp_path / "run" / "records.rank-1.jsonl").open("a").write('{"case_id": "c9-9", "tor')
    with pytest.warns(UserWarning, match="torn"):
        merged = folder.consolidate(order=["c0-0", "c0-1", "c1-0", "c2-0"])
    assert [r.case_id for r in merged] == ["c0-0", "c0-1", "c1-0", "c2-0"]
    assert [r.case_id for r in folder.records()] == ["c0-0", "c0-1", "c1-0", "c2-0"]
    assert not folder.shard_paths(), "the merged shards are removed"


# ------------------------------------------------------------------ one process: shared components, resume
@pytest.mark.slow
def test_cases_share_no_state(tiny_zoo, tmp_path):
    """A 6-case run in one process (one generator, SUT and reference for all cases) gives exactly the records of
    each case run alone in its own campaign."""
    assert main(tiny_args(tmp_path, "together", *SIX_CASES)) == 0
    together = by_case(read_records(tmp_path / "together"))
    assert len(together) == 6
    for cid in together:
        assert main(tiny_args(tmp_path, f"alone-{cid}", *SIX_CASES, "--cases.case_ids", f"[{cid}]")) == 0
        alone = by_case(read_records(tmp_path / f"alone-{cid}"))
        assert {k: v for k, v in alone[cid].items() if k != "run"} == {
            k: v for k, v in together[cid].items() if k != "run"}, cid


@pytest.mark.slow
def test_a_torn_last_record_is_skipped_and_its_case_runs_again(tiny_zoo, tmp_path, capsys):
    assert main(tiny_args(tmp_path, "torn")) == 0
    path = tmp_path / "torn" / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1][: len(lines[1]) // 2])  # killed while writing the second record
    with pytest.warns(UserWarning, match="torn last line"):
        assert main(tiny_args(tmp_path, "torn")) == 0
    assert "1 case(s) already recorded are kept" in capsys.readouterr().out
    assert comparable(read_records(tmp_path / "torn")) == comparable([json.loads(line) for line in lines])


# ------------------------------------------------------------------ several processes (real subprocesses)
@pytest.fixture(scope="module")
def one_process_run(tiny_zoo_cache: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The six cases in one uninterrupted process, one case at a time: the folder of the run that the multi-process
    and killed runs below must reproduce (run once for them all)."""
    root = tmp_path_factory.mktemp("one_process")
    finish(fit_process(tiny_args(root, "one", *SIX_CASES), tiny_zoo_cache))
    return root / "one"


@pytest.mark.slow
def test_two_cpu_processes_give_the_records_of_one(one_process_run, tiny_zoo_cache, tmp_path):
    two = fit_process(tiny_args(tmp_path, "two", *SIX_CASES, "--trainer.accelerator", "cpu",
                                "--trainer.devices", "2"), tiny_zoo_cache)
    out = finish(two)
    assert "[rank 0/2]" in out and "[rank 1/2]" in out, "each rank reports its own cases"
    a, b = read_records(one_process_run), read_records(tmp_path / "two")
    assert [r["case_id"] for r in b] == [r["case_id"] for r in a], "merged in the campaign's case order"
    assert by_case(a) == by_case(b)
    for r in a:  # the same images, pixel for pixel (PNG bytes)
        for kind in ("origin_image", "result_image"):
            assert (one_process_run / r[kind]).read_bytes() == (tmp_path / "two" / r[kind]).read_bytes()
    assert not list((tmp_path / "two").glob("records.rank-*.jsonl")), "rank 0 merged the shards"


@pytest.mark.slow
def test_two_simulated_nodes_through_torchrun(tiny_zoo_cache, tmp_path):
    """2 "nodes" x 1 process on this machine, joined by torchrun's c10d rendezvous on localhost."""
    torchrun = Path(sys.executable).with_name("torchrun")
    port = str(29400 + random.Random(str(tmp_path)).randrange(500))
    args = tiny_args(tmp_path, "nodes", *SIX_CASES, "--trainer.accelerator", "cpu", "--trainer.devices", "1",
                     "--trainer.num_nodes", "2")
    env = {**os.environ, "HYNEA_PL_CACHE": tiny_zoo_cache, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    nodes = [subprocess.Popen([str(torchrun), "--nnodes", "2", "--node-rank", str(rank), "--nproc-per-node", "1",
                               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"localhost:{port}", "-m", "hynea_pl",
                               *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in (0, 1)]
    for node in nodes:
        finish(node)
    records = read_records(tmp_path / "nodes")
    assert sorted(r["case_id"] for r in records) == sorted(f"c{c}-{i}" for c in (1, 7, 3) for i in range(2))
    assert all(r["error"] is None for r in records)


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 4])
def test_sigkill_at_three_random_points_then_resume_gives_every_case_once(batch_size, one_process_run,
                                                                         tiny_zoo_cache, tmp_path):
    """Kill the whole campaign (every rank) with SIGKILL three times at random points, resuming each time with a
    different number of processes; the final records are exactly the planned cases, once each, with the results
    of an uninterrupted run (one case at a time). With ``cases.batch_size 4`` the cases adapt in batches (cases that
    end at once are written together), and the results are those of the uninterrupted run within float tolerance."""
    reference = by_case(read_records(one_process_run))
    run = tmp_path / "killed"
    rng = random.Random(2026)
    kills = 0
    for attempt, devices in enumerate(("2", "1", "2", "1")):
        process = fit_process(tiny_args(tmp_path, "killed", *SIX_CASES, "--trainer.accelerator", "cpu",
                                        "--trainer.devices", devices, "--cases.batch_size", str(batch_size)),
                              tiny_zoo_cache)
        if attempt == 3:  # the last start runs to the end
            finish(process)
            break
        done_before = sum(len(p.read_text().splitlines()) for p in run.glob("records*.jsonl")) if run.exists() else 0
        wait_for = done_before + rng.randrange(0, 2)  # kill after 0 or 1 more finished case(s) ...
        delay = rng.uniform(0.0, 0.6)  # ... plus a random fraction of a case
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            written = sum(len(p.read_text().splitlines()) for p in run.glob("records*.jsonl")) if run.exists() else 0
            if written >= wait_for and (run / "config.yaml").exists():
                time.sleep(delay)
                break
            time.sleep(0.05)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            kills += 1
        process.communicate()
    assert kills >= 2, "the campaign was really killed (it is not faster than the kill points)"
    records = read_records(run)
    assert sorted(r["case_id"] for r in records) == sorted(reference), "every planned case exactly once"
    assert len(records) == len(reference)
    if batch_size == 1:
        assert by_case(records) == reference
    else:
        found = [f"{cid}{where}" for cid, r in by_case(records).items() for where in differences(reference[cid], r)]
        assert not found, found[:10]
    assert not list(run.glob("records.rank-*.jsonl"))


# ------------------------------------------------------------------ W&B
@pytest.mark.slow
def test_wandb_offline_campaign_run_has_the_case_table_with_images(tiny_zoo, tmp_path, monkeypatch):
    from hynea_pl.campaign.tracking import CASE_COLUMNS

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb-data"))
    args = tiny_args(tmp_path, "wb", "--cases.classes", "[1]", "--cases.n_per_class", "3",
                     "--trainer.logger", "lightning.pytorch.loggers.WandbLogger",
                     "--trainer.logger.init_args.offline", "true",
                     "--trainer.logger.init_args.project", "hynea_pl_test",
                     "--trainer.logger.init_args.save_dir", str(tmp_path))
    assert main(args) == 0
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 4, "one run per case and one for the campaign"
    campaign = [r for r in runs if b"wb/campaign" in next(r.glob("*.wandb")).read_bytes()]
    assert len(campaign) == 1
    log = next(campaign[0].glob("*.wandb")).read_bytes()
    assert b"misclassification_rate" in log and b"valid_failure_rate" in log, "the summary is in the run"
    # the table's media are staged as the run's artifact: its JSON lists every case with its two images
    tables = []
    for path in (tmp_path / "wandb-data" / "artifacts" / "staging").iterdir():
        try:
            data = json.loads(path.read_bytes())
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if data.get("_type") == "table" and data.get("columns") == list(CASE_COLUMNS):
            tables.append(data)
    assert tables and all(t["data"] == tables[0]["data"] for t in tables), "one table (wandb may stage copies)"
    rows = tables[0]["data"]
    assert sorted(row[0] for row in rows) == ["c1-0", "c1-1", "c1-2"]
    staged = [path.read_bytes() for path in (tmp_path / "wandb-data" / "artifacts" / "staging").iterdir()]
    assert sum(data.startswith(b"\x89PNG") for data in staged) >= 3, "the images are staged"
    for row in rows:
        for image in row[-2:]:
            assert image["_type"] == "image-file" and image["path"].endswith(".png")
    assert any(b"wb/c1-0" in next(r.glob("*.wandb")).read_bytes() for r in runs), "per-case runs are named"
