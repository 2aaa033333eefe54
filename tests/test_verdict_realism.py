"""The verdict's realism test, the judges' panel on a real ensemble (unanimity, a vote, a "not a digit" answer that
takes the realism test's part), the family check and the saved image."""

from __future__ import annotations

import pytest
import torch

from hynea_pl.campaign.validation import check_verdict_independent
from hynea_pl.evaluation.judge import judge_case
from hynea_pl.images import as_saved, load_image
from hynea_pl.metrics.functional.typicality import knn_radius, percentile_rank, typicality_score
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.schema import CaseRecord
from hynea_pl.suts import ClassifierSUT, EnsembleClassifierSUT
from hynea_pl.suts.family import model_families
from hynea_pl.verdicts import NOT_A_CLASS
from hynea_pl.zoo.labelled.classifier import SmallCNN
from hynea_pl.zoo.labelled.oracle import OracleClassifier, OracleNet
from hynea_pl.zoo.mnist.data import DataConfig, load_digits


@pytest.fixture(scope="module")
def digits():
    """600 training digits (the judges' split) and 300 held-out test digits."""
    data = load_digits(DataConfig(sut=1, method=1, judges=600, held_out=300)).judges
    return data


@pytest.fixture(scope="module")
def pixel_test(digits) -> TypicalityTest:
    return TypicalityTest(digits.test_images, features=None, k=1, quantile=0.95)


def scribble(seed: int = 1) -> torch.Tensor:
    """``(1, 1, 32, 32)``: three random 2-px strokes of 12 steps each, no digit's shape."""
    generator, image = torch.Generator().manual_seed(seed), torch.zeros(1, 1, 32, 32)
    for _ in range(3):
        y, x = torch.randint(6, 26, (2,), generator=generator).tolist()
        for _ in range(12):
            dy, dx = torch.randint(-1, 2, (2,), generator=generator).tolist()
            y, x = min(max(y + dy, 4), 27), min(max(x + dx, 4), 27)
            image[0, 0, y:y + 2, x:x + 2] = 1.0
    return image


def test_knn_radius_and_percentiles():
    reference = torch.tensor([[0.0], [1.0], [3.0]])
    assert knn_radius(torch.tensor([[0.5]]), reference).item() == pytest.approx(0.5)
    assert knn_radius(torch.tensor([[0.5]]), reference, k=2).item() == pytest.approx(0.5)
    loo = knn_radius(reference, reference, exclude_self=True)
    assert loo.tolist() == pytest.approx([1.0, 1.0, 2.0])
    ranks = percentile_rank(torch.tensor([0.0, 1.5, 9.0]), loo)
    assert ranks.tolist() == pytest.approx([0.0, 2 / 3, 1.0])
    combined = typicality_score({"a": torch.tensor([0.0]), "b": torch.tensor([9.0])}, {"a": loo, "b": loo})
    assert combined.item() == 1.0, "an image must be typical in every space"
    with pytest.raises(ValueError, match="more than 3 reference rows"):
        knn_radius(reference, reference, k=3, exclude_self=True)


def test_realism_passes_real_digits_and_fails_scribbles_and_noise(digits, pixel_test):
    # calibrated on the reference itself (leave-one-out): its quantile passes by construction
    assert pixel_test.held_out_pass_rate == pytest.approx(0.95, abs=0.01)
    assert pixel_test.pass_rate(digits.test_images) == 1.0, "a reference image is its own nearest real digit"
    # real digits it never saw pass at about the same rate
    assert pixel_test.pass_rate(digits.train_images) > 0.85
    assert not bool(pixel_test(scribble())[0]), "a faint scribble is off the real-digit manifold"
    noise = torch.rand(1, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    readings = pixel_test.readings(noise)
    assert not bool(readings["passed"][0]) and readings["score"][0] == 1.0, "farther than every real digit"
    assert pixel_test.pass_rate(torch.cat([scribble(), noise])) == 0.0
    with pytest.raises(ValueError, match="typicality test of"):
        pixel_test(torch.zeros(1, 3, 32, 32))


def test_embedding_space_counts_too(digits):
    # an embedding in which every image looks the same as a real digit cannot rescue a pixel-space outlier
    class Blind(torch.nn.Module):
        def forward(self, images):
            return torch.zeros(len(images), 4)

    test = TypicalityTest(digits.test_images, features=Blind(), k=1, quantile=0.95)
    assert test.spaces == ["pixel", "embedding"]
    assert not bool(test(scribble())[0])


def test_degraded_when_the_judges_keep_the_class_but_the_image_is_a_scribble(digits, pixel_test):
    class AlwaysThree(torch.nn.Module):
        def forward(self, images):
            return torch.nn.functional.one_hot(torch.full((len(images),), 3), 10).float() * 10

    judges = EnsembleClassifierSUT([ClassifierSUT(AlwaysThree()), ClassifierSUT(AlwaysThree())], ["a", "b"])
    three = digits.test_images[(digits.test_labels == 3).nonzero()[0]]
    record = CaseRecord(method="m", run="r", task="multiclass", case_id="c3-0", seed=1, origin_class=3,
                        flipped=True, result_label=8)
    fields = judge_case(judges, record, three, scribble(), pixel_test)
    assert fields["judge_labels"] == {"a": 3, "b": 3}
    assert fields["realistic"] is False and fields["verdict"] == "degraded"
    assert fields["origin_realistic"] is True or fields["origin_realistic"] is False
    real = judge_case(judges, record, three, three, pixel_test)
    assert real["realistic"] is True and real["verdict"] == "valid_failure", "a real digit passes"


class Reads(torch.nn.Module):
    """A judge that reads ``label`` in every image, sure of it, over ``classes`` outputs."""

    def __init__(self, label: int, classes: int = 10) -> None:
        super().__init__()
        self.label, self.classes = label, classes

    def forward(self, images):
        return torch.nn.functional.one_hot(torch.full((len(images),), self.label), self.classes).float() * 10


def test_a_split_ensemble_vote_is_ambiguous(digits):
    # the mean vote reads 3 (two of three), but one judge reads 5: not unanimous
    judges = EnsembleClassifierSUT([ClassifierSUT(Reads(3)), ClassifierSUT(Reads(3)), ClassifierSUT(Reads(5))],
                                   ["a", "b", "c"])
    record = CaseRecord(method="m", run="r", task="multiclass", case_id="c3-0", seed=1, origin_class=3,
                        flipped=True, result_label=8)
    image = digits.test_images[:1]
    fields = judge_case(judges, record, image, image)
    assert fields["oracle_result_label"] == 3 and fields["judge_labels"] == {"a": 3, "b": 3, "c": 5}
    assert fields["verdict"] == "ambiguous"
    # as a vote at 0.5 the same panel reads 3 (mean probability about 2/3): the members' readings are still recorded
    voting = EnsembleClassifierSUT([ClassifierSUT(Reads(3)), ClassifierSUT(Reads(3)), ClassifierSUT(Reads(5))],
                                   ["a", "b", "c"], threshold=0.5)
    fields = judge_case(voting, record, image, image)
    assert fields["judge_labels"] == {"a": 3, "b": 3, "c": 5} and fields["verdict"] == "valid_failure"
    # at 0.7 no class reaches the threshold: undecided, ambiguous
    strict = EnsembleClassifierSUT([ClassifierSUT(Reads(3)), ClassifierSUT(Reads(3)), ClassifierSUT(Reads(5))],
                                   ["a", "b", "c"], threshold=0.7)
    assert judge_case(strict, record, image, image)["verdict"] == "ambiguous"
    # two of three read 8, the SUT's label: a vote reads 8, the image changed class
    changed = EnsembleClassifierSUT([ClassifierSUT(Reads(8)), ClassifierSUT(Reads(8)), ClassifierSUT(Reads(3))],
                                    ["a", "b", "c"], threshold=0.5)
    assert judge_case(changed, record, image, image)["verdict"] == "semantic_change"


def test_judges_with_a_not_a_digit_answer_only_record_the_realism_test(digits, pixel_test):
    """A panel that can answer "not a digit" (output 10) is the verdict's realism part: a scribble it reads as the
    origin's class is a valid failure though the realism test fails it (recorded), one it reads as no digit is
    degraded with or without a realism test."""
    record = CaseRecord(method="m", run="r", task="multiclass", case_id="c3-0", seed=1, origin_class=3,
                        flipped=True, result_label=8)
    three = digits.test_images[(digits.test_labels == 3).nonzero()[0]]

    def panel(label: int, not_a_class: int | None = 10) -> EnsembleClassifierSUT:
        return EnsembleClassifierSUT([ClassifierSUT(Reads(label, 11)), ClassifierSUT(Reads(label, 11))], ["a", "b"],
                                     threshold=0.5, not_a_class=not_a_class)

    assert panel(3).reads_no_class and not panel(3, None).reads_no_class
    reads_three = judge_case(panel(3), record, three, scribble(), pixel_test)
    assert reads_three["realistic"] is False and reads_three["verdict"] == "valid_failure"
    assert reads_three["judge_labels"] == {"a": 3, "b": 3}
    # the same judges without the answer: the realism test decides again
    assert judge_case(panel(3, None), record, three, scribble(), pixel_test)["verdict"] == "degraded"
    for realism in (pixel_test, None):
        no_digit = judge_case(panel(10), record, three, scribble(), realism)
        assert no_digit["verdict"] == "degraded"
        assert no_digit["judge_labels"] == {"a": NOT_A_CLASS, "b": NOT_A_CLASS}
        assert no_digit["oracle_result_label"] == NOT_A_CLASS


def test_families_of_wrapped_models():
    resnet = ClassifierSUT(OracleClassifier(OracleNet(widths=(8, 16))))
    cnn = ClassifierSUT(SmallCNN(channels=(8,), hidden=8))
    assert model_families(resnet) == {"resnet"} and model_families(cnn) == {"cnn"}
    from timm.models.convmixer import ConvMixer

    convmixer = ClassifierSUT(OracleClassifier(ConvMixer(8, 1, 3, 4, in_chans=1, num_classes=11), not_a_class=10))
    assert model_families(convmixer) == {"convmixer"}
    assert model_families(EnsembleClassifierSUT([resnet, convmixer])) == {"resnet", "convmixer"}
    assert model_families(ClassifierSUT(ConvMixer(8, 1, 3, 4, in_chans=1, num_classes=10))) == {"convmixer"}


def test_a_sibling_steering_model_is_refused():
    torch.manual_seed(0)
    judges = EnsembleClassifierSUT([ClassifierSUT(OracleClassifier(OracleNet(widths=(8, 16))))])
    sibling = ClassifierSUT(OracleClassifier(OracleNet(widths=(4, 8))))  # other weights and widths, same family
    with pytest.raises(ValueError, match="family resnet, like the model.init_args.steering.model"):
        check_verdict_independent({"steering.model": sibling}, judges)
    cnn = ClassifierSUT(SmallCNN(channels=(8,), hidden=8))
    check_verdict_independent({"reference": cnn}, judges, sut=cnn)  # another family steers: accepted
    with pytest.warns(UserWarning, match="SUT's family"):  # a judge of the SUT's family counts fewer, never more
        check_verdict_independent({"reference": cnn}, judges, sut=sibling)


def test_the_sut_decides_on_the_image_as_saved(tmp_path):
    from hynea_pl.campaign.outcome import fill_outcome
    from hynea_pl.campaign.records import RunFolder
    from hynea_pl.methods.base import CaseOutcome, CaseResult

    class Threshold(torch.nn.Module):
        """Class 1 when pixel (0, 0) exceeds 0.499, else class 0: a boundary inside one 8-bit grey level."""

        def forward(self, images):
            up = (images[:, 0, 0, 0] > 0.499).float() * 10
            return torch.stack([10 - up, up], 1)

    sut = ClassifierSUT(Threshold())
    origin = torch.full((1, 1, 8, 8), 0.3)
    undone = origin.clone()
    undone[0, 0, 0, 0] = 0.4995  # flips as a float; the PNG holds 127/255 = 0.498: the flip is gone
    assert as_saved(undone)[0, 0, 0, 0].item() == pytest.approx(127 / 255)

    origin_output = sut(origin)
    outcome = CaseOutcome(sut_evals=1, stop_reason="flipped", origin_output=origin_output, target=torch.tensor([1]),
                          origin_image=origin, result=CaseResult(image=undone, output=sut(undone), step=1))
    record = CaseRecord(method="m", run="r", task="multiclass", case_id="c0-0", seed=1, origin_class=0)
    folder = RunFolder(tmp_path, "run")
    fill_outcome(record, outcome, sut, folder)
    assert record.flipped_before_saving is True and record.flipped is False and record.result_label == 0
    assert record.diagnostics == {"stop_reason": "flipped"}, "the runner records why every method's case ended"
    png = load_image(folder.path / record.result_image)
    torch.testing.assert_close(png[:1], as_saved(undone)[0])
    assert bool(sut(png[None, :1]).argmax(1)[0] == 1) is record.flipped, "the record says what the PNG does"


def test_the_case_line_prints_every_judges_reading():
    from hynea_pl.campaign.console import describe

    record = CaseRecord(method="m", run="r", task="multiclass", case_id="c9-2", seed=2, origin_class=9, flipped=True,
                        result_label=7, verdict="ambiguous", oracle_result_label=9,
                        judge_labels={"a": 9, "b": 9, "c": 7, "d": 9})
    assert "ambiguous[/] (judges read 9 9 7 9)" in describe(1, 1, record)
    assert "(judges read 9)" in describe(1, 1, record.model_copy(update={"judge_labels": None}))


def test_the_case_line_marks_a_flip_its_method_did_not_accept():
    from hynea_pl.campaign.console import describe

    record = CaseRecord(method="m", run="r", task="multiclass", case_id="c9-2", seed=2, origin_class=9, flipped=True,
                        result_label=7, verdict="unaccepted", accepted=False, judge_labels={"a": 9, "b": 9})
    line = describe(1, 1, record)
    assert "no accepted result (best try kept)[/] (judges read 9 9)" in line and "valid failure" not in line
    unjudged = describe(1, 1, record.model_copy(update={"verdict": None, "judge_labels": None}))
    assert "no accepted result (best try kept)" in unjudged
    accepted = describe(1, 1, record.model_copy(update={"verdict": "valid_failure", "accepted": True}))
    assert "no accepted result" not in accepted and "valid failure" in accepted


def test_a_case_records_whether_its_method_accepted_the_result_before_it_is_judged(tmp_path):
    from hynea_pl.campaign.outcome import fill_outcome
    from hynea_pl.campaign.records import RunFolder
    from hynea_pl.methods.base import CaseOutcome, CaseResult

    class Threshold(torch.nn.Module):
        """Class 1 when pixel (0, 0) is bright, else class 0."""

        def forward(self, images):
            up = (images[:, 0, 0, 0] > 0.5).float() * 10
            return torch.stack([10 - up, up], 1)

    class AlwaysZero(torch.nn.Module):
        """A judge that still reads the origin's class 0 on every image."""

        def forward(self, images):
            return torch.tensor([[10.0, 0.0]]).expand(len(images), 2)

    sut, oracle = ClassifierSUT(Threshold()), ClassifierSUT(AlwaysZero())
    origin = torch.zeros(1, 1, 8, 8)
    flipped = origin.clone()
    flipped[0, 0, 0, 0] = 1.0
    verdicts = {}
    for found in (True, False):
        outcome = CaseOutcome(sut_evals=1, origin_output=sut(origin), target=torch.tensor([1]), origin_image=origin,
                              result=CaseResult(image=flipped, output=sut(flipped), step=1, found=found))
        record = CaseRecord(method="m", run="r", task="multiclass", case_id=f"c0-{int(found)}", seed=1,
                            origin_class=0)
        fill_outcome(record, outcome, sut, RunFolder(tmp_path, "run"), oracle)
        assert record.flipped and record.accepted is found and record.oracle_result_label == 0
        assert record.result_image is not None, "the best try is kept for inspection"
        verdicts[found] = record.verdict
    assert verdicts == {True: "valid_failure", False: "unaccepted"}
