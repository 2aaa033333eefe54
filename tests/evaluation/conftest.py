"""Fixtures of the evaluation tests: no network, no cached weights, one thread (as the metrics tests')."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def empty_torch_home(tmp_path, monkeypatch):
    """TORCH_HOME pointing to an empty folder: no cached weights."""
    home = tmp_path / "torch_home"
    home.mkdir()
    monkeypatch.setenv("TORCH_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def _single_thread():
    """These tests use tiny tensors: on a shared, busy CPU intra-op threads cost far more than they give."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def offline(monkeypatch):
    """Any download or outgoing connection fails the test."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError(f"evaluation must not touch the network: {args[:2]}")

    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
