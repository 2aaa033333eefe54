"""The pure validity verdict on crafted readings (the oracle run on images: tests/evaluation/test_evaluation_judge.py)."""

import pytest

from hynea_pl.metrics.functional.validity import verdict
from hynea_pl.verdicts import NOT_A_CLASS, UNDECIDED, reading_name


def test_multiclass_verdicts():
    assert verdict(False, 3, [3], 3) == "no_flip"  # an unchanged image: the SUT still reads 3
    assert verdict(False, 3, [8], 3) == "no_flip"  # no flip is never a failure, whatever the oracle reads
    assert verdict(True, 3, [3], 8) == "valid_failure"  # the SUT reads 8, the judge still sees a 3
    assert verdict(True, 3, [8], 8) == "semantic_change"  # the digit was redrawn as the SUT's new label
    assert verdict(True, 3, [5], 8) == "semantic_change"  # the judge reads a third class: the image changed class


def test_judges_must_be_unanimous():
    assert verdict(True, 3, [3, 3, 3, 3], 8) == "valid_failure"
    assert verdict(True, 3, [3, 3, 3, 8], 8) == "ambiguous", "one judge reads the SUT's label: a split vote"
    assert verdict(True, 3, [3, 5, 3, 3], 8) == "ambiguous"
    assert verdict(True, 3, [8, 8, 8, 8], 8) == "semantic_change"
    with pytest.raises(ValueError, match="at least one judge"):
        verdict(True, 3, [], 8)


def test_an_unrealistic_result_is_degraded_not_a_valid_failure():
    assert verdict(True, 3, [3, 3], 8, realistic=False) == "degraded"
    assert verdict(True, 3, [3, 3], 8, realistic=True) == "valid_failure"
    assert verdict(True, 3, [3, 3], 8, realistic=None) == "valid_failure", "no realism test configured"
    # realism never rescues or condemns another verdict
    assert verdict(True, 3, [8, 8], 8, realistic=False) == "semantic_change"
    assert verdict(True, 3, [3, 5], 8, realistic=False) == "ambiguous"
    assert verdict(False, 3, [3, 3], 3, realistic=False) == "no_flip"


def test_binary_and_detection_verdicts():
    # binary: the attribute's sign; detection: 1 while the class is still detected (no SUT argument: one rule)
    assert verdict(True, 1, [1], 0) == "valid_failure"  # the judge keeps the attribute's sign / still detects
    assert verdict(True, 1, [0], 0) == "semantic_change"  # the judge lost it too
    assert verdict(False, 1, [0], 1) == "no_flip"


def test_a_result_the_judge_reads_as_the_sut_does_is_never_a_valid_failure():
    # the judge already read the origin as the SUT's new decision: the flip corrected the SUT, it revealed no fault
    assert verdict(True, 0, [0], 0) == "semantic_change"
    assert verdict(True, 3, [3], 3) == "semantic_change"  # unconditional origin: the judge read a 3, the SUT now too
    assert verdict(True, 3, [3], 3, realistic=False) == "semantic_change"


def test_the_fifth_argument_is_the_realism_test_the_sut_argument_is_gone():
    assert verdict(True, 3, [3], 8, False) == "degraded" and verdict(True, 3, [3], 8, True) == "valid_failure"
    with pytest.raises(TypeError):
        verdict(True, 3, [3], 8, sut=None)


def test_an_undecided_panel_is_ambiguous_whatever_the_realism_test_says():
    for realistic in (None, True, False):
        assert verdict(True, 3, [UNDECIDED], 8, realistic=realistic) == "ambiguous"
    assert verdict(True, 3, [UNDECIDED], None) == "ambiguous"  # the SUT's label unknown
    assert verdict(False, 3, [UNDECIDED], 3) == "no_flip"
    assert verdict(True, 3, [UNDECIDED], 8, accepted=False) == "unaccepted"


def test_not_a_class_is_degraded_even_on_a_realistic_result():
    for realistic in (None, True, False):
        assert verdict(True, 3, [NOT_A_CLASS], 8, realistic=realistic) == "degraded"
    assert verdict(True, 1, [NOT_A_CLASS], 0) == "degraded"
    assert verdict(False, 3, [NOT_A_CLASS], 3) == "no_flip"
    assert verdict(True, 3, [NOT_A_CLASS], 8, accepted=False) == "unaccepted"
    # judges (one by one) that differ, one of them reading no digit: split, ambiguous
    assert verdict(True, 3, [3, NOT_A_CLASS], 8) == "ambiguous"
    assert verdict(True, 3, [NOT_A_CLASS, NOT_A_CLASS], 8) == "degraded"


def test_a_third_class_is_a_semantic_change_not_ambiguous():
    assert verdict(True, 3, [5], 8) == "semantic_change"
    assert verdict(True, 3, [5, 5, 5], 8, realistic=True) == "semantic_change"
    assert verdict(True, 3, [5], 8, realistic=False) == "semantic_change", "realism never condemns another verdict"
    assert verdict(True, 3, [5], None) == "semantic_change"
    assert verdict(True, 3, [3], None) == "valid_failure"  # the SUT's label unknown: the reference kept


def test_readings_are_named_for_people():
    assert reading_name(UNDECIDED) == "undecided" and reading_name(NOT_A_CLASS) == "not a digit"
    assert reading_name(7) == "7" and UNDECIDED != NOT_A_CLASS and min(UNDECIDED, NOT_A_CLASS) < 0


def test_a_flip_on_a_result_its_method_did_not_accept_is_unaccepted_never_a_failure():
    # judges unanimous on the origin's class and a realistic result: a valid failure, had the method accepted it
    assert verdict(True, 3, [3, 3, 3], 8, realistic=True, accepted=False) == "unaccepted"
    assert verdict(True, 3, [8, 8], 8, accepted=False) == "unaccepted"  # whatever the judges read
    assert verdict(True, 3, [3, 5], 8, realistic=False, accepted=False) == "unaccepted"
    assert verdict(True, 1, [1], 0, accepted=False) == "unaccepted"
    assert verdict(False, 3, [3], 3, accepted=False) == "no_flip"  # no flip stays no flip
    # an accepted result, or one not recorded (older records), keeps the verdicts above
    for accepted in (True, None):
        assert verdict(True, 3, [3, 3, 3], 8, realistic=True, accepted=accepted) == "valid_failure"
        assert verdict(True, 3, [3, 3], 8, realistic=False, accepted=accepted) == "degraded"
        assert verdict(True, 3, [8, 8], 8, accepted=accepted) == "semantic_change"
        assert verdict(True, 3, [3, 5], 8, accepted=accepted) == "ambiguous"
        assert verdict(False, 3, [3], 3, accepted=accepted) == "no_flip"


def test_unaccepted_is_a_flip_verdict_with_its_own_rate():
    from hynea_pl.schema import SUMMARY_KEYS
    from hynea_pl.verdicts import FLIP_VERDICTS, RATE_KEYS, UNACCEPTED, VERDICTS

    assert UNACCEPTED == "unaccepted"
    assert VERDICTS == ("valid_failure", "degraded", "semantic_change", "ambiguous", "unaccepted", "no_flip")
    assert FLIP_VERDICTS[-1] == UNACCEPTED and RATE_KEYS[UNACCEPTED] == "unaccepted_rate"
    assert "unaccepted_rate" in SUMMARY_KEYS
