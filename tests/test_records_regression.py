"""A refactor changes no record: every MNIST method's tiny-zoo campaign gives the records in ``tests/golden/``
(written by ``tests/records_regression.py`` before the refactor; wall times aside, floats to 1e-3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from records_regression import METHODS, differences, run_method

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.slow
@pytest.mark.parametrize("method", list(METHODS))
def test_the_records_match_the_golden_records(method, tiny_zoo, tmp_path):
    expected = [json.loads(line) for line in (GOLDEN / f"{method}.jsonl").read_text().splitlines()]
    actual = run_method(method, tmp_path)
    found = [f"record {i}{where}" for i, (e, a) in enumerate(zip(expected, actual)) for where in differences(e, a)]
    assert len(actual) == len(expected) and not found, "\n".join(found[:20])


def test_the_comparison_sees_a_changed_field():
    record = {"verdict": "valid_failure", "distance": 1.0, "diagnostics": {"psi": [0.7, 0.5]}}
    assert list(differences(record, json.loads(json.dumps(record)))) == []
    assert list(differences(record, {**record, "distance": 1.0 + 1e-7})) == []
    assert list(differences(record, {**record, "distance": 1.1})) == [".distance: 1.0 != 1.1"]
    assert list(differences(record, {**record, "verdict": "no_flip"}))
    assert list(differences(record, {**record, "diagnostics": {"psi": [0.7]}}))
