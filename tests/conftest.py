"""Shared fixtures: offline guards, the fixed tiny zoo (``tests/data/tiny_zoo``) in a temporary cache."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from offline_guard import network_blocked
from tiny_zoo import install

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

# The tests' models are tiny: they gain nothing from intra-op threads, and two threads per process oversubscribe
# a shared 2-core machine (measured by a helper: 0.2 s -> 3-10 s per test while another job ran).
torch.set_num_threads(1)


@pytest.fixture
def no_network() -> Iterator[None]:
    with network_blocked():
        yield


@pytest.fixture(scope="session")
def tiny_zoo_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A cache folder holding the fixed tiny zoo (``tests/data/tiny_zoo``: the base zoo, the StyleGAN and the scene
    models but the detector), copied once per session, never trained (:mod:`tiny_zoo`)."""
    cache = tmp_path_factory.mktemp("hynea_cache")
    previous = os.environ.get("HYNEA_PL_CACHE")
    os.environ["HYNEA_PL_CACHE"] = str(cache)
    try:
        install(cache)
        yield str(cache)
    finally:
        if previous is None:
            os.environ.pop("HYNEA_PL_CACHE", None)
        else:
            os.environ["HYNEA_PL_CACHE"] = previous


@pytest.fixture
def tiny_zoo(tiny_zoo_cache: str, monkeypatch: pytest.MonkeyPatch):
    """The tiny zoo, with ``HYNEA_PL_CACHE`` pointing at it for the test."""
    monkeypatch.setenv("HYNEA_PL_CACHE", tiny_zoo_cache)
    from hynea_pl.zoo import load_zoo

    return load_zoo("tiny")


@pytest.fixture
def empty_torch_home(tmp_path, monkeypatch):
    """TORCH_HOME pointing to an empty folder: no cached weights."""
    home = tmp_path / "torch_home"
    home.mkdir()
    monkeypatch.setenv("TORCH_HOME", str(home))
    return home


@pytest.fixture
def single_thread() -> Iterator[None]:
    """One intra-op thread for tests of tiny tensors: on a shared, busy CPU more threads cost far more than they give."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def offline(monkeypatch):
    """Any download or outgoing connection fails the test (metrics and evaluation never touch the network)."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError(f"no network access allowed here: {args[:2]}")

    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
