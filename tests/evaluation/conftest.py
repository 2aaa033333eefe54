"""Fixtures of the evaluation tests: one thread, as the metrics tests' (``offline`` and ``empty_torch_home`` come
from tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """These tests use tiny tensors: one intra-op thread (see ``single_thread``)."""
