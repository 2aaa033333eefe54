"""``compare`` reads each run's generator from its ``config.yaml``: runs of one generator share their origin images,
runs of another generator (the GAN-based methods) start from other images of the same (seed, class), and the printed
text and ``compare.md`` say so instead of calling the origins identical."""

from __future__ import annotations

from pathlib import Path

import yaml

from hynea_pl.report import compare
from hynea_pl.report.compare import DIFFERENT_GENERATOR, origin_groups, origin_mismatches, origin_statement
from hynea_pl.schema import CaseRecord

LDM = {"class_path": "hynea_pl.generators.ClassConditionalLDM",
       "init_args": {"pretrained": "zoo://full/ldm", "num_inference_steps": 20, "guidance_scale": 3.0,
                     "gradient_checkpointing": False}}
GAN = {"class_path": "hynea_pl.generators.stylegan.StyleGANGenerator",
       "init_args": {"pretrained": "zoo://full/stylegan", "truncation_psi": 1.0}}


def make_run(root: Path, name: str, method: str, generator: dict | None, seeds=(0, 1)) -> Path:
    """A run folder with two records (cases c1-0, c7-0) and, unless ``generator`` is None, its config.yaml."""
    run = root / name
    run.mkdir()
    records = [CaseRecord(method=method, run=name, task="multiclass", case_id=f"c{c}-0", seed=seed, origin_class=c)
               for c, seed in zip((1, 7), seeds)]
    (run / "records.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    if generator is not None:
        (run / "config.yaml").write_text(yaml.safe_dump({"generator": generator}))
    return run


def with_settings(generator: dict, **settings) -> dict:
    return {**generator, "init_args": {**generator["init_args"], **settings}}


def test_runs_of_one_generator_share_origins_and_a_gan_run_does_not(tmp_path):
    hynea = make_run(tmp_path, "hynea", "hynea", LDM)
    cfg = make_run(tmp_path, "cfg", "cfg-first-flip", with_settings(LDM, gradient_checkpointing=True))
    gan = make_run(tmp_path, "trunc", "truncation-first-flip-fixed", GAN)
    assert origin_mismatches([hynea, cfg]) == []  # checkpointing changes gradients, never a sampled image
    assert origin_groups([hynea, cfg]) == [("ClassConditionalLDM(zoo://full/ldm)", [str(hynea), str(cfg)])]
    problems = origin_mismatches([hynea, cfg, gan])
    assert len(problems) == 2 and all(DIFFERENT_GENERATOR in p for p in problems)
    assert problems[0] == (f"c1-0: {DIFFERENT_GENERATOR} ({hynea}: ClassConditionalLDM(zoo://full/ldm); "
                           f"{gan}: StyleGANGenerator(zoo://full/stylegan))")
    assert origin_groups([hynea, gan, cfg]) == [("ClassConditionalLDM(zoo://full/ldm)", [str(hynea), str(cfg)]),
                                                ("StyleGANGenerator(zoo://full/stylegan)", [str(gan)])]
    statement = origin_statement([hynea, cfg, gan])
    assert DIFFERENT_GENERATOR in statement and "identical in every run" not in statement
    assert f"- StyleGANGenerator(zoo://full/stylegan): {gan}" in statement
    # another seed is still reported as such, before any generator difference
    moved = make_run(tmp_path, "moved", "sinvad", LDM, seeds=(0, 5))
    assert origin_mismatches([hynea, moved]) == [f"c7-0: seed/class (1, 7) in {hynea} but (5, 7) in {moved}"]


def test_sampling_settings_and_missing_configs_are_never_called_identical(tmp_path):
    hynea = make_run(tmp_path, "hynea", "hynea", LDM)
    strong = make_run(tmp_path, "strong", "giftbench-low-1e-4", with_settings(LDM, guidance_scale=5.0))
    groups = origin_groups([hynea, strong])
    assert [label for label, _ in groups] == ["ClassConditionalLDM(zoo://full/ldm) [guidance_scale=3.0]",
                                              "ClassConditionalLDM(zoo://full/ldm) [guidance_scale=5.0]"]
    assert all(DIFFERENT_GENERATOR in p for p in origin_mismatches([hynea, strong]))
    bare = make_run(tmp_path, "bare", "sinvad", None)
    problems = origin_mismatches([hynea, bare])
    assert len(problems) == 2 and all("origins are not known to be identical" in p for p in problems)


def test_the_compare_command_prints_and_writes_which_runs_share_origins(tmp_path, monkeypatch, capsys):
    from hynea_pl.cli import main

    def fake_evaluate(run_dir, **_) -> dict:  # the metrics are not what this test is about
        return {"method": Path(run_dir).name, "n_cases": 2, "mean_sut_evals_all": 4.0}

    monkeypatch.setattr(compare, "evaluate_run", fake_evaluate)
    monkeypatch.setattr(compare, "run_realism_inputs", lambda run_dir: ("inception", None))
    runs = [make_run(tmp_path, "hynea", "hynea", LDM), make_run(tmp_path, "cfg", "cfg-first-flip", LDM),
            make_run(tmp_path, "mimicry", "mimicry", GAN)]
    out = tmp_path / "table"
    assert main(["compare", *map(str, runs), "--out", str(out), "--embedder", "none"]) == 0
    printed = capsys.readouterr().out
    assert "Origins: identical" not in printed and "different generator: origins are not" in printed
    assert "StyleGANGenerator(zoo://full/stylegan)" in printed
    markdown = (out / "compare.md").read_text()
    assert markdown.count("\n| ") == 3 and "Origins: identical" not in markdown
    assert f"- ClassConditionalLDM(zoo://full/ldm): {runs[0]}, {runs[1]}" in markdown
    assert f"- StyleGANGenerator(zoo://full/stylegan): {runs[2]}" in markdown
    table = compare.compare_runs(runs, embedder="none")
    assert list(table.columns[:2]) == ["method", "origins"] and table.columns[-2:].tolist() == [
        "hynea_eval_ratio", "run"]
    assert table["origins"].tolist() == ["ClassConditionalLDM(zoo://full/ldm)"] * 2 + [
        "StyleGANGenerator(zoo://full/stylegan)"]


def test_one_generator_is_still_identical_origins(tmp_path, monkeypatch, capsys):
    from hynea_pl.cli import main

    monkeypatch.setattr(compare, "evaluate_run", lambda run_dir, **_: {"method": Path(run_dir).name})
    monkeypatch.setattr(compare, "run_realism_inputs", lambda run_dir: ("inception", None))
    runs = [make_run(tmp_path, "hynea", "hynea", LDM), make_run(tmp_path, "cfg", "cfg-first-flip", LDM)]
    assert main(["compare", *map(str, runs), "--out", str(tmp_path), "--embedder", "none"]) == 0
    assert "Origins: identical in every run" in capsys.readouterr().out
    assert "every run samples them with the same generator, ClassConditionalLDM(zoo://full/ldm)" in (
        tmp_path / "compare.md").read_text()


def test_the_reference_ratio_column_stays_before_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(compare, "evaluate_run", lambda run_dir, **_: {"method": "hynea", "mean_sut_evals_all": 2.0})
    monkeypatch.setattr(compare, "run_realism_inputs", lambda run_dir: ("inception", None))
    table = compare.compare_runs([make_run(tmp_path, "hynea", "hynea", LDM)], embedder="none")
    assert table.columns.tolist()[-3:] == ["trace_difference", "hynea_eval_ratio", "run"]
    assert table["hynea_eval_ratio"].tolist() == [1.0]
