"""The human-rating page (``python -m hynea_pl rate``), its ratings file and the RQ3 tables (``rq3_tables``).

Runs are crafted run folders (records + PNGs, a zoo SUT in config.yaml); the browser test drives the real server
with Playwright on the system Chromium."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from scipy import stats

from hynea_pl.report.rate import RatingApp, make_server
from hynea_pl.report.ratings import (
    PAIRING,
    Rating,
    RatingsFile,
    item_id,
    rater_order,
    rating_items,
    read_ratings,
    rq3_tables,
)
from hynea_pl.schema import CaseRecord, write_records

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def make_run(root: Path, name: str, method: str, cases: list[tuple[str, int, bool]], error: str | None = None) -> Path:
    """A run folder with ``(case_id, origin class, flipped)`` cases, 32 px PNGs and a zoo SUT in its config."""
    run = root / name
    (run / "cases").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"sut": {"class_path": "hynea_pl.suts.ClassifierSUT",
                                                             "init_args": {"weights": "zoo://tiny/sut"}}}))
    records = []
    rng = np.random.default_rng(len(name))
    for index, (case_id, cls, flipped) in enumerate(cases):
        paths = {}
        for kind in ("origin", "result"):
            paths[f"{kind}_image"] = f"cases/{case_id}_{kind}.png"
            Image.fromarray(rng.integers(0, 255, (32, 32), dtype=np.uint8)).save(run / paths[f"{kind}_image"])
        records.append(CaseRecord(method=method, run=name, task="multiclass", case_id=case_id, seed=index,
                                  origin_class=cls, flipped=flipped, result_label=(cls + 1) % 10 if flipped else cls,
                                  error=error if index == 0 else None, **paths))
    write_records(run / "records.jsonl", records)
    return run


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    """HyNeA and a baseline on classes 1 and 7 (two cases each); one case of each run did not flip."""
    return [make_run(tmp_path, "mnist_hynea", "hynea", [("c1-0", 1, True), ("c1-1", 1, True), ("c7-0", 7, True),
                                                         ("c7-1", 7, False)]),
            make_run(tmp_path, "mnist_giftbench-low-1e-4", "giftbench-low-1e-4",
                     [("c1-0", 1, True), ("c1-1", 1, False), ("c7-0", 7, True), ("c7-1", 7, True)])]


def rating(rater: str, item: str, answer: str, realism: int, time: str = "2025-01-01T00:00:00.000+00:00",
           cls: int = 1) -> Rating:
    run, case_id = item.split("/")
    return Rating(rater=rater, item=item, run=run, case_id=case_id, origin_class=cls, question="Is this a digit?",
                  answer=answer, realism=realism, time=time)


def write_ratings(path: Path, ratings: list[Rating]) -> Path:
    path.write_text("".join(r.model_dump_json() + "\n" for r in ratings))
    return path


# --- items and order ---------------------------------------------------------------------------------------------


def test_items_are_the_flipped_results_with_opaque_tokens(runs):
    items = rating_items(runs)
    assert [i.item for i in items] == ["mnist_giftbench-low-1e-4/c1-0", "mnist_giftbench-low-1e-4/c7-0",
                                       "mnist_giftbench-low-1e-4/c7-1", "mnist_hynea/c1-0", "mnist_hynea/c1-1",
                                       "mnist_hynea/c7-0"]
    assert items[0].question == "Is this a digit 1?" and items[0].image.is_file()
    assert all(re.fullmatch(r"[0-9a-f]{16}", i.token) for i in items) and len({i.token for i in items}) == 6


def test_failed_cases_are_not_rated_and_run_names_must_differ(tmp_path):
    run = make_run(tmp_path, "a", "hynea", [("c1-0", 1, True), ("c2-0", 2, True)], error="RuntimeError: NaN")
    assert [i.case_id for i in rating_items([run])] == ["c2-0"]
    (tmp_path / "b").mkdir()
    other = make_run(tmp_path / "b", "a", "sinvad", [("c1-0", 1, True)])
    with pytest.raises(ValueError, match="distinct names"):
        rating_items([run, other])


def test_the_order_is_a_seeded_shuffle_per_rater_whatever_the_run_order(runs):
    items = rating_items(runs)
    alice = [i.item for i in rater_order(items, "alice")]
    assert alice == [i.item for i in rater_order(rating_items(runs[::-1]), "alice")]
    assert sorted(alice) == sorted(i.item for i in items)
    orders = {tuple(i.item for i in rater_order(items, name)) for name in ("alice", "bob", "carol", "dave")}
    assert len(orders) > 1  # 6! orders: four raters sharing one would be a broken shuffle


# --- the ratings file ------------------------------------------------------------------------------------------


def test_answers_are_appended_fsynced_once_per_rater_and_item_and_resumed(runs, tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    path = tmp_path / "ratings.jsonl"
    app = RatingApp(rating_items(runs), RatingsFile(path))
    first, second = app.queue("alice")[:2]
    assert app.submit({"rater": "alice", "token": first.token, "answer": "yes", "realism": "4"}) == "alice"
    assert len(synced) == 1 and len(path.read_text().splitlines()) == 1
    app.submit({"rater": "alice", "token": first.token, "answer": "no", "realism": "1"})  # a resubmitted form
    assert len(path.read_text().splitlines()) == 1
    app.submit({"rater": "bob", "token": first.token, "answer": "unsure", "realism": "2"})
    # a server killed mid-write leaves a torn line: the next start cuts it, nothing else is lost
    with path.open("a") as stream:
        stream.write('{"rater": "alice", "item": "mnist_h')
    with pytest.warns(UserWarning, match="torn last line"):
        resumed = RatingApp(rating_items(runs), RatingsFile(path))
    assert [i.item for i in resumed.queue("alice")] == [i.item for i in rater_order(resumed.items, "alice")][1:]
    assert resumed.queue("alice")[0].item == second.item and len(resumed.queue("bob")) == 5
    saved = read_ratings(path)
    assert [(r.rater, r.item, r.answer, r.realism) for r in saved] == [("alice", first.item, "yes", 4),
                                                                       ("bob", first.item, "unsure", 2)]
    assert saved[0].question == first.question and saved[0].origin_class == first.origin_class
    assert saved[0].run == first.run and saved[0].case_id == first.case_id and saved[0].time.endswith("+00:00")


@pytest.mark.parametrize("form", [{"answer": "yes"}, {"answer": "maybe", "realism": "3"},
                                  {"answer": "yes", "realism": "6"}, {"realism": "3"}])
def test_an_incomplete_answer_is_refused_and_not_written(runs, tmp_path, form):
    path = tmp_path / "ratings.jsonl"
    app = RatingApp(rating_items(runs), RatingsFile(path))
    with pytest.raises(ValueError, match="answer the question"):
        app.submit({"rater": "alice", "token": app.items[0].token, **form})
    with pytest.raises(ValueError, match="unknown image"):
        app.submit({"rater": "alice", "token": "nope", "answer": "yes", "realism": "3"})
    assert not path.exists() or path.read_text() == ""


def test_a_fixed_rater_is_the_only_one_saved(runs, tmp_path):
    app = RatingApp(rating_items(runs), RatingsFile(tmp_path / "r.jsonl"), rater="alice")
    with pytest.raises(ValueError, match="unknown rater"):
        app.submit({"rater": "mallory", "token": app.items[0].token, "answer": "yes", "realism": "3"})


def test_a_torn_last_line_is_skipped_when_reading_and_a_bad_line_is_named(tmp_path):
    path = write_ratings(tmp_path / "r.jsonl", [rating("a", "run/c1-0", "yes", 5)])
    with path.open("a") as stream:
        stream.write('{"rater": "b"')
    with pytest.warns(UserWarning, match="torn last line"):
        assert len(read_ratings(path)) == 1
    path.write_text(path.read_text() + "\n" + rating("a", "run/c1-1", "yes", 5).model_dump_json() + "\n")
    with pytest.raises(ValueError, match=r"r.jsonl:2: field"):
        read_ratings(path)


# --- RQ3 tables ------------------------------------------------------------------------------------------------


def test_fleiss_kappa_on_a_known_table(runs, tmp_path):
    """4 items x 3 raters: counts (yes, no, unsure) (3,0,0), (2,1,0), (0,3,0), (1,1,1). P_bar = 7/12,
    P_e = (6/12)^2 + (5/12)^2 + (1/12)^2 = 62/144, kappa = (84 - 62) / (144 - 62) = 11/41."""
    h = "mnist_hynea"
    answers = {f"{h}/c1-0": ["yes", "yes", "yes"], f"{h}/c1-1": ["yes", "yes", "no"],
               f"{h}/c7-0": ["no", "no", "no"], f"{h}/c7-1": ["unsure", "no", "yes"]}
    ratings = [rating(rater, item, answer, 3) for item, given in answers.items()
               for rater, answer in zip(("r1", "r2", "r3"), given)]
    ratings.append(rating("r1", "mnist_giftbench-low-1e-4/c1-0", "yes", 3))  # one rater only: not in kappa
    kappa = rq3_tables(write_ratings(tmp_path / "r.jsonl", ratings), runs)["kappa"]
    assert list(kappa.index) == ["all"]
    assert kappa.loc["all", "kappa"] == pytest.approx(11 / 41)
    assert (kappa.loc["all", "n_items"], kappa.loc["all", "raters_per_item"]) == (4, 3)


def test_kappa_with_unequal_rater_counts_uses_each_items_first_answers(runs, tmp_path):
    h = "mnist_hynea"
    ratings = [rating("r1", f"{h}/c1-0", "yes", 3, "2025-01-01T00:00:01.000+00:00"),
               rating("r2", f"{h}/c1-0", "yes", 3, "2025-01-01T00:00:02.000+00:00"),
               rating("r3", f"{h}/c1-0", "no", 3, "2025-01-01T00:00:03.000+00:00"),  # third rater: left out of "all"
               rating("r2", f"{h}/c1-1", "no", 3, "2025-01-01T00:00:02.000+00:00"),
               rating("r1", f"{h}/c1-1", "no", 3, "2025-01-01T00:00:01.000+00:00"),
               rating("r1", f"{h}/c7-0", "no", 3), rating("r2", f"{h}/c7-0", "yes", 3)]
    kappa = rq3_tables(write_ratings(tmp_path / "r.jsonl", ratings), runs)["kappa"]
    # all: (2,0,0), (0,2,0), (1,1,0): P_bar = 2/3, p = (1/2, 1/2, 0), P_e = 1/2 -> kappa 1/3
    assert kappa.loc["all", "kappa"] == pytest.approx(1 / 3) and kappa.loc["all", "n_items"] == 3
    assert list(kappa.index) == ["all", "raters=2", "raters=3"]
    assert kappa.loc["raters=2", "n_items"] == 2 and kappa.loc["raters=3", "n_items"] == 1


def test_no_item_with_two_raters_gives_an_empty_kappa(runs, tmp_path):
    kappa = rq3_tables(write_ratings(tmp_path / "r.jsonl", [rating("a", "mnist_hynea/c1-0", "yes", 5)]), runs)["kappa"]
    assert kappa.loc["all", "n_items"] == 0 and math.isnan(kappa.loc["all", "kappa"])


def test_table3_per_method(runs, tmp_path):
    h, g = "mnist_hynea", "mnist_giftbench-low-1e-4"
    ratings = [rating("a", f"{h}/c1-0", "yes", 5), rating("b", f"{h}/c1-0", "yes", 4),
               rating("a", f"{h}/c7-0", "unsure", 3),
               rating("a", f"{g}/c1-0", "no", 1), rating("b", f"{g}/c1-0", "yes", 2),
               rating("b", f"{h}/c1-0", "no", 1),  # b again on the same item: the first answer counts
               rating("a", "elsewhere/c1-0", "yes", 5)]  # a run that was not given
    table = rq3_tables(write_ratings(tmp_path / "r.jsonl", ratings), runs)["table3"]
    assert list(table.index) == ["hynea", "giftbench-low-1e-4"]
    hynea, gift = table.loc["hynea"], table.loc["giftbench-low-1e-4"]
    assert hynea["label_preservation"] == pytest.approx(2 / 3) and hynea["ambiguity"] == pytest.approx(1 / 3)
    assert hynea["label_preservation_sd"] == pytest.approx(np.std([1, 1, 0], ddof=1))
    assert hynea["realism_mean"] == pytest.approx(4.0) and hynea["realism_sd"] == pytest.approx(1.0)
    assert hynea["realism_norm_mean"] == pytest.approx(0.75) and hynea["realism_norm_sd"] == pytest.approx(0.25)
    assert (hynea["n_ratings"], hynea["n_items"], hynea["n_raters"]) == (3, 2, 2)
    assert gift["label_preservation"] == pytest.approx(0.5) and gift["realism_norm_mean"] == pytest.approx(0.125)
    assert gift["ambiguity"] == 0 and gift["n_ratings"] == 2
    assert table.attrs["ratings_left_out"] == 2


def test_table4_pairs_hynea_and_each_baseline_by_rater_and_class(runs, tmp_path):
    """Units (rater, class): HyNeA's side is the mean over the rater's HyNeA items of that class."""
    h, g = "mnist_hynea", "mnist_giftbench-low-1e-4"
    # realism per rater: hynea class 1 (two items, mean), hynea class 7, giftbench class 1, giftbench class 7
    plan = {"r1": ((5, 4), 5, 1, 2), "r2": ((4, 4), 3, 2, 2), "r3": ((5, 5), 4, 1, 1), "r4": ((3, 4), 5, 3, 1)}
    answers = {"r1": ("yes", "yes", "no", "no"), "r2": ("yes", "no", "yes", "no"), "r3": ("yes", "yes", "no", "no"),
               "r4": ("no", "yes", "unsure", "no")}
    ratings = []
    for rater, ((h1a, h1b), h7, g1, g7) in plan.items():
        a = answers[rater]
        ratings += [rating(rater, f"{h}/c1-0", a[0], h1a), rating(rater, f"{h}/c1-1", a[0], h1b),
                    rating(rater, f"{h}/c7-0", a[1], h7, cls=7), rating(rater, f"{g}/c1-0", a[2], g1),
                    rating(rater, f"{g}/c7-0", a[3], g7, cls=7)]
    ratings.append(rating("r5", f"{h}/c1-0", "yes", 5))  # HyNeA only: no pair
    row = rq3_tables(write_ratings(tmp_path / "r.jsonl", ratings), runs)["table4"].loc["giftbench-low-1e-4"]
    hynea_realism = [4.5, 5, 4, 3, 5, 4, 3.5, 5]  # r1 c1, r1 c7, r2 c1, r2 c7, ...
    gift_realism = [1, 2, 2, 2, 1, 1, 3, 1]
    hynea_yes = [1, 1, 1, 0, 1, 1, 0, 1]
    gift_yes = [0, 0, 1, 0, 0, 0, 0, 0]
    assert row["n_pairs"] == 8
    assert row["realism_p"] == pytest.approx(stats.wilcoxon(np.subtract(hynea_realism, gift_realism)).pvalue)
    assert row["label_preservation_p"] == pytest.approx(stats.wilcoxon(np.subtract(hynea_yes, gift_yes)).pvalue)
    pooled = math.sqrt((np.var(hynea_realism, ddof=1) + np.var(gift_realism, ddof=1)) / 2)
    assert row["realism_d"] == pytest.approx((np.mean(hynea_realism) - np.mean(gift_realism)) / pooled)
    assert row["label_preservation_hynea"] == pytest.approx(0.75)
    assert row["label_preservation_baseline"] == pytest.approx(0.125)
    assert row["realism_p"] < 0.05 and row["realism_d"] > 0.8
    assert "rater, origin class" in PAIRING


def test_rq3_tables_without_ratings_of_hynea(runs, tmp_path):
    tables = rq3_tables(write_ratings(tmp_path / "r.jsonl", [rating("a", "mnist_giftbench-low-1e-4/c1-0", "yes", 3)]),
                        runs)
    assert list(tables) == ["table3", "table4", "kappa"]
    assert len(tables["table4"]) == 0 and list(tables["table3"].index) == ["giftbench-low-1e-4"]


# --- the server in a real browser ---------------------------------------------------------------------------------


def chromium() -> str | None:
    """The system Chromium (Debian's ``chromium`` package)."""
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")


def test_server_refuses_other_paths_and_hides_the_method(runs, tmp_path):
    import urllib.error
    import urllib.request

    app = RatingApp(rating_items(runs), RatingsFile(tmp_path / "r.jsonl"))
    server = make_server(app, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        page = urllib.request.urlopen(f"{base}/?rater=alice").read().decode()
        assert "hynea" not in page.lower() and "giftbench" not in page.lower() and "Image 1 of 6" in page
        token = re.search(r'/image/([0-9a-f]{16})"', page).group(1)
        assert urllib.request.urlopen(f"{base}/image/{token}").read()[:4] == b"\x89PNG"
        for url in (f"{base}/image/../records.jsonl", f"{base}/cases/c1-0_result.png"):
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(url)
        assert 'id="rater"' in urllib.request.urlopen(f"{base}/").read().decode()  # no rater: the name form
    finally:
        server.shutdown()
        server.server_close()


def test_rating_in_a_headless_browser(runs, tmp_path):
    """The real command in a subprocess, driven by Chromium: a name, three answers, the file, Table 3."""
    executable = chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (/usr/bin/chromium missing; `apt-get install -y chromium`)")
    from playwright.sync_api import sync_playwright

    ratings_path = tmp_path / "ratings.jsonl"
    server = subprocess.Popen([sys.executable, "-m", "hynea_pl", "rate", *map(str, runs), "--port", "0",
                               "--ratings", str(ratings_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    timer = threading.Timer(120, server.kill)  # a server that never starts must not hang the suite
    timer.start()
    try:
        lines = []
        for line in server.stdout:
            lines.append(line)
            if line.startswith("open http://"):
                break
        url = re.search(r"http://[\d.]+:\d+/", "".join(lines))
        if url is None:
            server.kill()
            pytest.fail(f"the server did not start: {''.join(lines)} {server.communicate()[1]}")
        timer.cancel()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.goto(url.group(0))
                page.fill("#rater", "alice")
                with page.expect_navigation():
                    page.click("#start")
                questions = []
                for number, (answer, realism) in enumerate((("yes", 5), ("no", 2), ("unsure", 3)), 1):
                    page.wait_for_selector("#question")
                    assert page.inner_text("#progress").startswith(f"Image {number} of 6")
                    content = page.content().lower()
                    assert "hynea" not in content and "giftbench" not in content
                    image = page.locator("#item-image")
                    assert image.evaluate("img => img.complete && img.naturalWidth") == 32
                    assert image.evaluate("img => img.getBoundingClientRect().width") >= 256
                    assert image.evaluate("img => getComputedStyle(img).imageRendering") == "pixelated"
                    questions.append(page.inner_text("#question"))
                    page.click("#submit")  # nothing chosen: the browser refuses the form, nothing is saved
                    assert page.inner_text("#progress").startswith(f"Image {number} of 6")
                    page.check(f"#answer-{answer}")
                    page.check(f"#realism-{realism}")
                    with page.expect_navigation():
                        page.click("#submit")
                assert page.inner_text("#progress").startswith("Image 4 of 6")
                page.goto(url.group(0) + "?rater=alice")  # a closed and reopened page resumes
                assert page.inner_text("#progress").startswith("Image 4 of 6")
            finally:
                browser.close()
    finally:
        timer.cancel()
        server.send_signal(signal.SIGTERM)  # not SIGINT: a suite run as a background job starts children with it ignored
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    assert server.returncode == 0, server.stderr.read()
    lines = [json.loads(line) for line in ratings_path.read_text().splitlines()]
    assert len(lines) == 3
    assert [(r["answer"], r["realism"]) for r in lines] == [("yes", 5), ("no", 2), ("unsure", 3)]
    expected_items = [i.item for i in rater_order(rating_items(runs), "alice")[:3]]
    assert [r["item"] for r in lines] == expected_items and {r["rater"] for r in lines} == {"alice"}
    assert [r["question"] for r in lines] == questions
    for r in lines:
        assert set(r) == {"rater", "item", "run", "case_id", "origin_class", "question", "answer", "realism", "time"}
        assert r["item"] == item_id(r["run"], r["case_id"]) and r["question"] == f"Is this a digit {r['origin_class']}?"
    table = rq3_tables(ratings_path, runs)["table3"]
    assert table["n_ratings"].sum() == 3
    assert table["label_preservation"].mul(table["n_ratings"]).sum() == pytest.approx(1)
    assert table["ambiguity"].mul(table["n_ratings"]).sum() == pytest.approx(1)
    assert table["realism_mean"].mul(table["n_ratings"]).sum() == pytest.approx(10)
