"""YOLOv8 detector SUT: top-k selection, gradients to the image, objective / flip / control on hand-made outputs."""

from __future__ import annotations

import math

import pytest
import torch

import hynea_pl  # noqa: F401  (offline defaults before ultralytics)
from hynea_pl.suts.detector import YOLODetectorSUT

# three detections x four classes, most confident first (max logits 3.0, 2.5, 1.0)
OUTPUT = torch.tensor([[[3.0, 1.0, 2.0, 0.0],
                        [0.5, 2.5, 0.0, 1.0],
                        [1.0, -1.0, 0.8, 0.0]]])


@pytest.fixture(scope="module")
def sut() -> YOLODetectorSUT:
    return YOLODetectorSUT("yolov8n.yaml", imgsz=64, nc=4)


@pytest.fixture(scope="module")
def varied_sut() -> YOLODetectorSUT:
    """An untrained YOLOv8n whose class branch gives every anchor its own scores (the untrained head's scores
    tie within each stride level, which would make any ranking check vacuous)."""
    torch.manual_seed(0)
    detector = YOLODetectorSUT("yolov8n.yaml", imgsz=64, nc=4)
    with torch.no_grad():
        for p in detector.model.model[-1].cv3.parameters():
            p.add_(torch.randn_like(p))
    return detector


def ce(logits: list[float], label: int) -> float:
    return math.log(sum(math.exp(v) for v in logits)) - logits[label]


def test_target_prediction_and_validity_on_hand_made_output(sut):
    assert sut.prediction(OUTPUT).tolist() == [0]
    assert sut.default_target(OUTPUT).tolist() == [0]
    configured = YOLODetectorSUT(sut.model, imgsz=64, class_id=1)
    assert configured.default_target(OUTPUT).tolist() == [1]
    assert sut.default_target(OUTPUT, 1).tolist() == [1]  # a case drawn for class 1 suppresses class 1
    assert configured.default_target(OUTPUT, 2).tolist() == [1]  # an explicit class_id wins
    assert sut.is_valid_origin(OUTPUT, None).tolist() == [True]
    assert sut.is_valid_origin(OUTPUT, 1).tolist() == [True]   # detection 1 predicts class 1
    assert sut.is_valid_origin(OUTPUT, 2).tolist() == [False]  # class 2 is nobody's argmax


def test_origin_confidence_requires_a_confident_detection_of_the_class(sut):
    strict = YOLODetectorSUT(sut.model, imgsz=64, origin_confidence=0.9)  # sigmoid(2.5) = 0.924, sigmoid(3) = 0.953
    assert strict.is_valid_origin(OUTPUT, 1).tolist() == [True]
    assert strict.is_valid_origin(OUTPUT, 0).tolist() == [True]
    stricter = YOLODetectorSUT(sut.model, imgsz=64, origin_confidence=0.93)
    assert stricter.is_valid_origin(OUTPUT, 1).tolist() == [False]  # class 1's only detection has 0.924
    assert stricter.is_valid_origin(OUTPUT, 0).tolist() == [True]
    assert stricter.is_valid_origin(OUTPUT, None).tolist() == [True]  # no class asked: any origin


def test_control_is_one_hot_of_runner_up_classes_classes_first(sut):
    target = torch.tensor([0])
    # runner-up (most likely class other than 0): detection 0 -> 2, detection 1 -> its own class 1, detection 2 -> 2
    assert sut.runner_up(OUTPUT, target).tolist() == [[2, 1, 2]]
    control = sut.control_signal(OUTPUT, target)
    assert control.shape == (1, 4, 3)
    assert control[0].tolist() == [[0, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 0]]
    literal = YOLODetectorSUT(sut.model, imgsz=64, exclude_target=False)
    assert literal.runner_up(OUTPUT, target).tolist() == [[2, 3, 2]]  # plain second most likely class


def test_behaviour_loss_is_mean_ce_toward_the_origins_runner_ups(sut):
    target = torch.tensor([0])
    rows = OUTPUT[0].tolist()
    labels = sut.objective_labels(OUTPUT, target)
    assert labels.tolist() == [[2, 1, 2]]
    expected = (ce(rows[0], 2) + ce(rows[1], 1) + ce(rows[2], 2)) / 3
    torch.testing.assert_close(sut.behaviour_loss(OUTPUT, labels, target), torch.tensor(expected))
    literal = YOLODetectorSUT(sut.model, imgsz=64, exclude_target=False)
    expected = (ce(rows[0], 2) + ce(rows[1], 3) + ce(rows[2], 2)) / 3
    torch.testing.assert_close(literal.behaviour_loss(OUTPUT, literal.objective_labels(OUTPUT, target), target),
                               torch.tensor(expected))
    # the labels stay those of the origin: a later output whose runner-ups differ is still pulled toward [2, 1, 2]
    later = OUTPUT.flip(-1)
    assert sut.runner_up(later, target).tolist() != labels.tolist()
    rows = later[0].tolist()
    expected = (ce(rows[0], 2) + ce(rows[1], 1) + ce(rows[2], 2)) / 3
    torch.testing.assert_close(sut.behaviour_loss(later, labels, target), torch.tensor(expected))


def test_flip_means_no_detection_predicts_the_class(sut):
    assert sut.is_flipped(OUTPUT, OUTPUT, torch.tensor([0])).tolist() == [False]
    assert sut.is_flipped(OUTPUT, OUTPUT, torch.tensor([1])).tolist() == [False]
    assert sut.is_flipped(OUTPUT, OUTPUT, torch.tensor([3])).tolist() == [True]
    suppressed = OUTPUT.clone()
    suppressed[..., 0] = -5.0
    assert sut.is_flipped(suppressed, OUTPUT, torch.tensor([0])).tolist() == [True]
    assert sut.reaches_target(suppressed, OUTPUT, torch.tensor([0])).tolist() == [True]


def test_confidence_reduction_compares_sigmoid_confidences_of_the_logits():
    from hynea_pl.metrics.functional.task import confidence_reduction

    result = OUTPUT.clone()
    result[0, :, 0] -= torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(confidence_reduction(OUTPUT, result, 0), torch.tensor(2.0))  # scores as given

    def sig(v: float) -> float:
        return 1 / (1 + math.exp(-v))

    expected = ((sig(3) - sig(2)) + (sig(0.5) - sig(-1.5)) + (sig(1) - sig(-2))) / 3
    got = confidence_reduction(OUTPUT, result, torch.tensor([0]), from_logits=True)
    torch.testing.assert_close(got, torch.tensor(expected))


def test_top5_matches_brute_force_and_gradient_reaches_the_image(varied_sut):
    sut = varied_sut
    torch.manual_seed(0)
    images = torch.rand(2, 3, 80, 96, requires_grad=True)  # resized to 64 x 64 by the SUT
    detections = sut.detect(images)
    output = detections["logits"]
    assert output.shape == (2, 5, 4) and detections["boxes"].shape == (2, 5, 4)
    with torch.no_grad():
        scores = sut.model(sut.preprocess(images))[1]["scores"]  # (B, nc, N) raw logits
    assert scores.shape[-1] == 84  # 8x8 + 4x4 + 2x2 anchors at 64 px
    for b in range(2):
        # max confidence of each candidate (max logit: sigmoid is monotonic, and float32 sigmoids saturate into ties)
        confidence = [max(scores[b, c, n].item() for c in range(4)) for n in range(scores.shape[-1])]
        top6 = sorted(confidence, reverse=True)[:6]
        assert len(set(top6)) == 6  # no ties among the first six: the top-5 and its order are unique
        ranked = sorted(range(len(confidence)), key=lambda n: -confidence[n])[:5]
        assert detections["indices"][b].tolist() == ranked
        torch.testing.assert_close(output[b].detach(), scores[b, :, ranked].T)
    output.sum().backward()
    assert images.grad is not None and torch.isfinite(images.grad).all() and images.grad.abs().sum() > 0
    assert not any(p.requires_grad or p.grad is not None for p in sut.parameters())


def test_behaviour_loss_backpropagates_and_sut_stays_in_eval(sut):
    sut.train()
    assert not sut.training and not sut.model.training
    images = torch.rand(1, 3, 64, 64, requires_grad=True)
    output = sut(images)
    assert torch.equal(output, sut(images))
    target = sut.default_target(output.detach())
    loss = sut.behaviour_loss(output, sut.objective_labels(output.detach(), target), target)
    assert torch.isfinite(loss)
    loss.backward()
    assert images.grad is not None and torch.isfinite(images.grad).all()


def test_checkpoint_paths(tmp_path, sut):
    with pytest.raises(FileNotFoundError, match="YOLO checkpoint not found: .*missing.pt"):
        YOLODetectorSUT(str(tmp_path / "missing.pt"), imgsz=64)
    with pytest.raises(ValueError, match="multiple of the model stride 32"):
        YOLODetectorSUT(sut.model, imgsz=100)
    # a state dict for the .yaml architecture
    torch.save(sut.model.state_dict(), tmp_path / "state.pt")
    loaded = YOLODetectorSUT("yolov8n.yaml", imgsz=64, nc=4, weights=str(tmp_path / "state.pt"))
    images = torch.rand(1, 3, 64, 64)
    torch.testing.assert_close(loaded(images), sut(images))


def test_ultralytics_pt_checkpoint_round_trip(tmp_path, sut):
    path = tmp_path / "detector.pt"
    torch.save({"model": sut.model, "train_args": {}}, path)  # the layout ultralytics saves (model object)
    loaded = YOLODetectorSUT(str(path), imgsz=64)
    assert loaded.num_classes == 4
    images = torch.rand(1, 3, 64, 64)
    torch.testing.assert_close(loaded(images), sut(images))


def test_two_hynea_steps_with_the_detector(sut):
    import lightning as L
    from tiny_components import tiny_generator

    from hynea_pl.methods import HyNeACase, PaperSearch

    torch.manual_seed(0)
    case = HyNeACase(tiny_generator(num_inference_steps=2), sut, origin_class=3, seed=5,
                     search=PaperSearch(lr_min=1e-3, lr_max=1e-2))
    L.Trainer(max_steps=2, max_epochs=-1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
              enable_model_summary=False, enable_progress_bar=False).fit(case)
    assert case.control.shape == (1, 4, 5)  # (classes, detections) for the projector's Conv1d branch
    assert case.control.sum().item() == 5 and len(case.result.history) == 2


def test_boxes_are_the_top_k_in_the_images_own_pixels(varied_sut):
    sut = varied_sut
    images = torch.rand(2, 3, 32, 128)  # resized to 64 x 64 by the SUT: x scales by 2, y by 0.5
    detections = sut.detect(images)
    rows = sut.boxes(images)
    assert len(rows) == 2 and all(len(image) == 5 for image in rows)
    for b in range(2):
        x, y, w, h = detections["boxes"][b, 0].tolist()
        x0, y0, x1, y1, cls, conf = rows[b][0]
        assert x0 == pytest.approx((x - w / 2) * 2, abs=1e-3) and x1 == pytest.approx((x + w / 2) * 2, abs=1e-3)
        assert y0 == pytest.approx((y - h / 2) / 2, abs=1e-3) and y1 == pytest.approx((y + h / 2) / 2, abs=1e-3)
        logits = detections["logits"][b, 0]
        assert cls == int(logits.argmax()) and conf == pytest.approx(float(logits.max().sigmoid()), abs=1e-4)
        confidences = [row[5] for row in rows[b]]
        assert confidences == sorted(confidences, reverse=True)


def test_keep_loss_is_the_cross_entropy_toward_the_origins_classes_rank_by_rank(sut):
    # origin classes by rank: 0, 1, 0
    expected = (ce([3.0, 1.0, 2.0, 0.0], 0) + ce([0.5, 2.5, 0.0, 1.0], 1) + ce([1.0, -1.0, 0.8, 0.0], 0)) / 3
    assert sut.keep_loss(OUTPUT, OUTPUT).item() == pytest.approx(expected, rel=1e-5)
    moved = OUTPUT.clone()
    moved[0, 0] = torch.tensor([0.0, 1.0, 3.0, 0.0])  # the first detection now reads class 2
    assert sut.keep_loss(moved, OUTPUT).item() > sut.keep_loss(OUTPUT, OUTPUT).item()


def test_origin_top_k_all_needs_every_top_k_detection_of_the_class(sut):
    every = YOLODetectorSUT(sut.model, imgsz=64, origin_top_k="all")
    assert every.is_valid_origin(OUTPUT, 1).tolist() == [False]  # one detection of class 1 among others
    only = torch.tensor([[[0.1, 3.0, 0.2], [0.0, 2.0, -1.0]]])  # both detections read class 1
    assert every.is_valid_origin(only, 1).tolist() == [True]
    assert every.is_valid_origin(only, 0).tolist() == [False]
    with pytest.raises(ValueError, match="origin_top_k"):
        YOLODetectorSUT(sut.model, imgsz=64, origin_top_k="most")
