"""The pure validity verdict on crafted readings (the oracle run on images: tests/evaluation/test_evaluation_judge.py)."""

import pytest

from hynea_pl.metrics.functional.validity import verdict
from hynea_pl.suts import BinaryAttributeSUT, YOLODetectorSUT


def test_multiclass_verdicts():
    assert verdict(False, 3, [3], 3) == "no_flip"  # an unchanged image: the SUT still reads 3
    assert verdict(False, 3, [8], 3) == "no_flip"  # no flip is never a failure, whatever the oracle reads
    assert verdict(True, 3, [3], 8) == "valid_failure"  # the SUT reads 8, the judge still sees a 3
    assert verdict(True, 3, [8], 8) == "semantic_change"  # the digit was redrawn as the SUT's new label
    assert verdict(True, 3, [5], 8) == "ambiguous"  # the judge reads a third class


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


def test_binary_and_detection_verdicts_have_no_third_class():
    assert verdict(True, 1, [1], 0, sut=BinaryAttributeSUT) == "valid_failure"  # the judge keeps the attribute's sign
    assert verdict(True, 1, [0], 0, sut=BinaryAttributeSUT) == "semantic_change"
    assert verdict(True, 1, [1], 0, sut=YOLODetectorSUT) == "valid_failure"  # the judge still detects the class
    assert verdict(True, 1, [0], 0, sut=YOLODetectorSUT) == "semantic_change"
    assert verdict(False, 1, [0], 1, sut=YOLODetectorSUT) == "no_flip"


def test_a_result_the_judge_reads_as_the_sut_does_is_never_a_valid_failure():
    # the judge already read the origin as the SUT's new decision: the flip corrected the SUT, it revealed no fault
    assert verdict(True, 0, [0], 0, sut=BinaryAttributeSUT) == "semantic_change"
    assert verdict(True, 3, [3], 3) == "semantic_change"  # unconditional origin: the judge read a 3, the SUT now too


def test_a_flip_on_a_result_its_method_did_not_accept_is_unaccepted_never_a_failure():
    # judges unanimous on the origin's class and a realistic result: a valid failure, had the method accepted it
    assert verdict(True, 3, [3, 3, 3], 8, realistic=True, accepted=False) == "unaccepted"
    assert verdict(True, 3, [8, 8], 8, accepted=False) == "unaccepted"  # whatever the judges read
    assert verdict(True, 3, [3, 5], 8, realistic=False, accepted=False) == "unaccepted"
    assert verdict(True, 1, [1], 0, sut=YOLODetectorSUT, accepted=False) == "unaccepted"
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
