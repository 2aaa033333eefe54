"""A refactor changes no record: every MNIST method's tiny campaign gives the records in ``tests/golden/`` (written by
``tests/records_regression.py`` on the fixed tiny zoo before the refactor): decisions exactly, floats within the
tolerances measured between kernel paths. And a change of rule does change them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from records_regression import METHODS, differences, record_differences, run_method

GOLDEN = Path(__file__).parent / "golden"
#: record fields that are decisions (compared exactly): a change of rule must change one of them
DECISIONS = ("flipped", "steps", "sut_evals", "result_step", "target_reached", "result_label", "verdict",
             "stop_reason")
#: a change of each kind to the paper's HyNeA, each of which its golden records must catch
CHANGES = {
    "step rule: the peak learning rate": ("--model.init_args.search.lr_max", "1e-2"),
    "stop rule: the logit margin": ("--model.init_args.acceptance.margin", "3.0"),
    "budget: SUT evaluations": ("--budget.max_evals", "5"),
}


def golden(method: str) -> list[dict]:
    return [json.loads(line) for line in (GOLDEN / f"{method}.jsonl").read_text().splitlines()]


def mismatches(expected: list[dict], actual: list[dict]) -> list[str]:
    found = [f"record {i}{where}" for i, (e, a) in enumerate(zip(expected, actual))
             for where in record_differences(e, a)]
    return found + ([f"{len(actual)} records, {len(expected)} expected"] if len(actual) != len(expected) else [])


@pytest.mark.slow
@pytest.mark.parametrize("method", list(METHODS))
def test_the_records_match_the_golden_records(method, tiny_zoo, tmp_path):
    found = mismatches(golden(method), run_method(method, tmp_path))
    assert not found, "\n".join(found[:20])


@pytest.mark.slow
@pytest.mark.parametrize("change", list(CHANGES))
def test_the_golden_records_catch_a_changed_rule(change, tiny_zoo, tmp_path):
    found = mismatches(golden("hynea-paper"), run_method("hynea-paper", tmp_path, *CHANGES[change]))
    decisions = [line for line in found if line.split(":")[0].rsplit(".", 1)[-1] in DECISIONS]
    assert decisions, f"{change}: no decision changed ({found[:5]})"


def test_the_golden_records_hold_decisions_a_rule_could_change():
    """The fixture is not degenerate: its searches flip (HyNeA both ways, and a genetic search), the paper's HyNeA stops
    on a flip before its last step, and the default runs a case more than once, each run at another target."""
    flips = {method: sum(r["flipped"] for r in golden(method)) for method in METHODS}
    assert flips["hynea"] and flips["hynea-paper"] and flips["sinvad"], flips
    assert any(len(r["diagnostics"].get("attempts", [])) > 1 for r in golden("hynea"))
    assert all(r["sut_evals"] == r["steps"] for r in golden("hynea"))  # one SUT evaluation a step
    assert any(len({a["target"] for a in r["diagnostics"].get("attempts", [])}) > 1 for r in golden("hynea"))
    assert any(r["diagnostics"]["stop_reason"] == "flipped" and r["steps"] < 8 for r in golden("hynea-paper"))


def test_the_comparison_sees_a_changed_field():
    record = {"verdict": "valid_failure", "distance": 1.0, "diagnostics": {"psi": [0.7, 0.5]}}
    assert list(differences(record, json.loads(json.dumps(record)))) == []
    assert list(differences(record, {**record, "distance": 1.0 + 1e-7})) == []
    assert list(differences(record, {**record, "distance": 1.1})) == [".distance: 1.0 != 1.1"]
    assert list(differences(record, {**record, "verdict": "no_flip"}))
    assert list(differences(record, {**record, "diagnostics": {"psi": [0.7]}}))


def test_a_search_that_did_not_flip_may_keep_another_of_its_tied_candidates():
    kept = {"flipped": False, "result_step": 3, "distance": 1e-3, "diagnostics": {"alphas": [0.1, 0.9]}}
    other = {**kept, "result_step": 1, "diagnostics": {"alphas": [0.8, 0.2]}}
    assert record_differences(kept, other) == []
    assert record_differences(kept, {**other, "distance": 2e-3})  # the kept result itself must still match
    flipped = {**kept, "flipped": True}
    assert record_differences(flipped, {**other, "flipped": True}) == [".diagnostics.alphas[0]: 0.1 != 0.8",
                                                                      ".diagnostics.alphas[1]: 0.9 != 0.2",
                                                                      ".result_step: 3 != 1"]
