"""The validity oracle run on cases (judge_case): real digits, a multi-label presence oracle for detection, the
binary premise, and the SUT's recorded decisions in the oracle's terms."""

import pytest
import torch


class NearestDigit(torch.nn.Module):
    """A perfect judge of the digits it stores: 1-nearest-neighbour, as one-hot logits ``(B, 10)``."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("images", images.flatten(1))
        self.register_buffer("labels", labels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nearest = torch.cdist(x.flatten(1), self.images).argmin(1)
        return torch.nn.functional.one_hot(self.labels[nearest], 10).float() * 10


def test_judge_case_on_real_digits():
    from hynea_pl.evaluation.judge import judge_case
    from hynea_pl.schema import CaseRecord
    from hynea_pl.suts import ClassifierSUT
    from hynea_pl.zoo.mnist.data import load_digits

    from hynea_pl.zoo.profiles import get_profile

    data = load_digits(get_profile("tiny").data).judges
    images, labels = data.test_images, data.test_labels
    oracle = ClassifierSUT(NearestDigit(images, labels))
    pick = {c: [i for i in range(len(labels)) if labels[i] == c] for c in (3, 5, 8)}
    three, other_three, five, eight = (images[pick[3][0]:pick[3][0] + 1], images[pick[3][1]:pick[3][1] + 1],
                                       images[pick[5][0]:pick[5][0] + 1], images[pick[8][0]:pick[8][0] + 1])

    def case(flipped, result_label):
        return CaseRecord(method="m", run="r", task="multiclass", case_id="c3-0", seed=1, origin_class=3,
                          flipped=flipped, result_label=result_label)

    unchanged = judge_case(oracle, case(False, 3), three, three)
    assert unchanged["verdict"] == "no_flip" and unchanged["oracle_result_label"] == 3
    assert judge_case(oracle, case(True, 8), three, eight)["verdict"] == "semantic_change"  # another real digit
    fields = judge_case(oracle, case(True, 5), three, other_three)
    assert fields["verdict"] == "valid_failure" and fields["oracle_origin_label"] == 3
    assert 0.99 < fields["oracle_result_confidence"] <= 1.0
    assert judge_case(oracle, case(True, 8), three, five)["verdict"] == "semantic_change"  # a third digit
    # the same valid failure on a result its method did not accept: unaccepted, the judges' reading still recorded
    unaccepted = judge_case(oracle, case(True, 5).model_copy(update={"accepted": False}), three, other_three)
    assert unaccepted["verdict"] == "unaccepted" and unaccepted["oracle_result_label"] == 3
    assert judge_case(oracle, case(True, 5).model_copy(update={"accepted": True}), three,
                      other_three)["verdict"] == "valid_failure"
    with pytest.raises(ValueError, match="judges multiclass outputs"):
        judge_case(oracle, CaseRecord(method="m", run="r", task="binary", case_id="u-0", seed=1, origin_class=None,
                                      target=0), three, three)


class InkPresence(torch.nn.Module):
    """A crafted multi-label judge: logit k = +5 when the image's quadrant k (0-3) holds ink, else -5."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2] // 2, x.shape[-1] // 2
        quads = [x[..., :h, :w], x[..., :h, w:], x[..., h:, :w], x[..., h:, w:]]
        present = torch.stack([q.flatten(1).amax(1) > 0.5 for q in quads], 1).float()
        return present * 10 - 5


def test_a_detection_case_is_judged_by_a_multilabel_presence_oracle():
    from hynea_pl.evaluation.judge import judge_case, judges_task
    from hynea_pl.schema import CaseRecord
    from hynea_pl.suts import BinaryAttributeSUT

    assert judges_task("binary", "detection") and judges_task("detection", "detection")
    assert not judges_task("multiclass", "detection") and not judges_task("detection", "binary")
    oracle = BinaryAttributeSUT(InkPresence(), attribute=0, attribute_names=["q0", "q1", "q2", "q3"])
    origin = torch.zeros(1, 1, 8, 8)
    origin[..., 1, 1] = 1.0  # ink in quadrant 0
    kept = origin.clone()
    kept[..., 6, 6] = 1.0  # quadrant 0 still inked
    erased = torch.zeros(1, 1, 8, 8)

    def case(flipped):  # the detector no longer finds class 0 (flipped) or still does
        return CaseRecord(method="m", run="r", task="detection", case_id="c0-0", seed=1, origin_class=0, target=0,
                          flipped=flipped, result_label=3)

    fields = judge_case(oracle, case(True), origin, kept)
    assert fields["verdict"] == "valid_failure" and fields["oracle_origin_label"] == 1
    assert judge_case(oracle, case(True), origin, erased)["verdict"] == "semantic_change"  # the digit is gone
    assert judge_case(oracle, case(False), origin, kept)["verdict"] == "no_flip"


def test_a_binary_case_keeps_the_suts_premise_not_the_judges_reading_of_the_origin():
    """The SUT read attribute 0 present in the origin and absent in the result. A judge that sees no such thing in
    either image agrees with the SUT's result: the flip revealed no fault (before, the two 0 readings matched and the
    case counted as valid)."""
    from hynea_pl.evaluation.judge import judge_case
    from hynea_pl.schema import CaseRecord
    from hynea_pl.suts import BinaryAttributeSUT

    oracle = BinaryAttributeSUT(InkPresence(), attribute=0, attribute_names=["q0", "q1", "q2", "q3"])
    blank, inked = torch.zeros(1, 1, 8, 8), torch.zeros(1, 1, 8, 8)
    inked[..., 1, 1] = 1.0  # ink in quadrant 0
    record = CaseRecord(method="m", run="r", task="binary", case_id="c1-0", seed=1, origin_class=1, target=0,
                        flipped=True, origin_label=1, result_label=0)
    fields = judge_case(oracle, record, blank, blank)
    assert fields["oracle_origin_label"] == 0 and fields["verdict"] == "semantic_change"
    assert judge_case(oracle, record, blank, inked)["verdict"] == "valid_failure"  # the result shows it: a fault
    assert judge_case(oracle, record, inked, inked)["verdict"] == "valid_failure"
    assert judge_case(oracle, record, inked, blank)["verdict"] == "semantic_change"


def test_a_binary_verdict_reads_the_cases_tested_logit():
    """The premise is the sign of the case's ``target`` logit, whatever attribute the SUT's ``prediction`` reports."""
    from hynea_pl.evaluation.judge import sut_decisions
    from hynea_pl.schema import CaseRecord

    record = CaseRecord(method="m", run="r", task="binary", case_id="c1-0", seed=1, origin_class=1, target=2,
                        flipped=True, origin_label=0, result_label=0, origin_pred=[-1.0, 0.5, 2.0],
                        result_pred=[-1.0, 0.5, -0.5])
    assert sut_decisions(record) == (1, 0)
    assert sut_decisions(record.model_copy(update={"origin_pred": None})) == (0, 0)  # the recorded labels
