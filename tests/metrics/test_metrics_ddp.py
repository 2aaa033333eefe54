"""A real two-process (gloo) sync: states registered with dist_reduce_fx give the single-process result.

The workers are forked so they inherit the imports (a fresh interpreter would spend seconds importing torch)."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from hynea_pl.metrics import EmbeddingDiversity, EscapeRatio, MisclassificationRate, MultiScaleSSIM, SUTEvaluations
from hynea_pl.schema import CaseRecord


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _data():
    g = torch.Generator().manual_seed(0)
    origin, result = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    images = torch.rand(6, 1, 32, 32, generator=g)
    cases = [CaseRecord(method="m", run="r", task="multiclass", case_id=f"c0-{i}", seed=i, origin_class=0, target=0,
                        origin_pred=o.tolist(), result_pred=r.tolist(), error="E" if i == 3 else None)
             for i, (o, r) in enumerate(zip(origin, result))]
    return cases, origin, images, (images * 0.8).clamp(0, 1)


def _metrics():
    return {
        "mr": MisclassificationRate(),
        "escape": EscapeRatio(),
        "msssim": MultiScaleSSIM(),
        "div": EmbeddingDiversity(),
        "budget": SUTEvaluations(),
    }


def _feed(metrics, rows):
    cases, origin, images, others = _data()
    for record in cases[rows]:
        metrics["mr"].update(record)
        metrics["escape"].update(record)
    metrics["msssim"].update(others[rows], images[rows])
    metrics["div"].update(origin[rows])
    metrics["budget"].update(torch.arange(6.0)[rows])


def _worker(rank, port, out_path):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        metrics = _metrics()
        _feed(metrics, slice(0, 2) if rank == 0 else slice(2, 6))  # uneven shards
        values = {k: m.compute() for k, m in metrics.items()}
        if rank == 0:
            torch.save(values, out_path)
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available")
def test_two_process_sync_equals_single_process(tmp_path):
    out = tmp_path / "rank0.pt"
    mp.start_processes(_worker, args=(_free_port(), str(out)), nprocs=2, start_method="fork", join=True)
    synced = torch.load(out, weights_only=False)
    single = _metrics()
    _feed(single, slice(0, 6))
    for key, metric in single.items():
        expected = metric.compute()
        if isinstance(expected, dict):
            assert synced[key] == pytest.approx(expected, nan_ok=True), key
        else:
            assert torch.allclose(synced[key].double(), expected.double(), equal_nan=True, atol=1e-6), key
