"""The one record schema: round trip, and one-line errors for corrupted records."""

from __future__ import annotations

import json

import pytest

from hynea_pl.schema import SCHEMA_VERSION, CaseRecord, RecordError, read_records, write_records


def record(**fields) -> CaseRecord:
    base = {"method": "hynea", "run": "r", "task": "multiclass", "case_id": "c3-0", "seed": 300000,
            "origin_class": 3}
    return CaseRecord(**{**base, **fields})


def test_records_round_trip_and_defaults(tmp_path):
    records = [record(flipped=True, target_reached=True, target=5, sut_evals=7, diagnostics={"generations": 2}),
               record(case_id="c3-1", seed=None, error="no valid origin in 20 seeds")]
    path = tmp_path / "records.jsonl"
    write_records(path, records)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["schema_version"] == SCHEMA_VERSION
    again = read_records(path)
    assert again == records
    assert again[0].is_case and again[0].ok and not again[1].is_case and not again[1].ok
    assert again[1].flipped is False and again[1].sut_evals == 0  # defaults of a case that never ran


@pytest.mark.parametrize(("change", "message"), [
    ({"flipped_to": 3}, r"records.jsonl:2: field 'flipped_to': unknown field"),
    ({"case_id": None}, r"records.jsonl:2: field 'case_id':"),
    ({"sut_evals": "many"}, r"records.jsonl:2: field 'sut_evals':"),
    ({"task": "segmentation"}, r"records.jsonl:2: field 'task':"),
    ({"schema_version": 1}, r"records.jsonl:2: schema_version 1, this hynea_pl reads versions 2, 3"),
])
def test_a_corrupted_record_is_a_one_line_error_naming_file_line_and_field(tmp_path, change, message):
    good = record().model_dump()
    bad = {**good, **change}
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(RecordError, match=message) as info:
        read_records(path)
    assert "\n" not in str(info.value)


def test_a_missing_field_and_broken_json_are_named(tmp_path):
    good = record().model_dump()
    del good["run"]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(good) + "\n")
    with pytest.raises(RecordError, match=r"records.jsonl:1: field 'run': missing field"):
        read_records(path)
    path.write_text('{"schema_version": 2, "method": \n')
    with pytest.raises(RecordError, match=r"records.jsonl:1: invalid JSON"):
        read_records(path)


def test_a_version_2_record_reads_as_the_current_version_without_boxes(tmp_path):
    old = record(flipped=True).model_dump()
    old["schema_version"] = 2
    del old["origin_boxes"], old["result_boxes"]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (again,) = read_records(path)
    assert again.schema_version == SCHEMA_VERSION == 8 and again.flipped and again.result_boxes is None


def test_a_version_3_record_reads_without_judge_labels_realism_or_saved_decision(tmp_path):
    old = record(flipped=True).model_dump()
    old["schema_version"] = 3
    for field in ("judge_labels", "origin_realistic", "realistic", "realism_score", "flipped_before_saving"):
        del old[field]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (again,) = read_records(path)
    assert again.schema_version == SCHEMA_VERSION and again.judge_labels is None and again.realistic is None
    assert again.flipped_before_saving is None


def test_assignment_is_validated():
    rec = record()
    with pytest.raises(Exception, match="sut_evals"):
        rec.sut_evals = "x"


def test_a_version_4_record_reads_without_stability_fields(tmp_path):
    old = record(flipped=True).model_dump()
    old["schema_version"] = 4
    del old["stability_variants"], old["stability_held"]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (again,) = read_records(path)
    assert again.schema_version == SCHEMA_VERSION and again.stability_held is None and again.stable is None


def test_a_version_5_record_reads_without_real_image_fields(tmp_path):
    old = record(flipped=True).model_dump()
    old["schema_version"] = 5
    for key in ("origin_source", "real_image", "origin_noise", "inversion_error", "inversion_ms_ssim", "real_ms_ssim"):
        del old[key]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (again,) = read_records(path)
    assert again.schema_version == SCHEMA_VERSION and again.origin_source is None and again.real_ms_ssim is None


def test_a_version_7_record_reads_without_accepted(tmp_path):
    old = record(flipped=True, verdict="valid_failure").model_dump()
    old["schema_version"] = 7
    del old["accepted"]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (again,) = read_records(path)
    assert again.schema_version == SCHEMA_VERSION and again.accepted is None
    assert again.verdict == "valid_failure", "an older record keeps the verdict it was written with"


def test_accepted_round_trips_and_is_validated(tmp_path):
    records = [record(flipped=True, accepted=False, verdict="unaccepted"), record(case_id="c3-1", accepted=True)]
    path = tmp_path / "records.jsonl"
    write_records(path, records)
    again = read_records(path)
    assert [r.accepted for r in again] == [False, True] and again[0].verdict == "unaccepted"
    with pytest.raises(Exception, match="accepted"):
        again[0].accepted = "maybe"


def test_stable_means_held_on_every_variant():
    assert record(flipped=True, stability_variants=6, stability_held=6).stable is True
    assert record(flipped=True, stability_variants=6, stability_held=5).stable is False
