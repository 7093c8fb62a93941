"""The labeling-loop benchmark drives a real server end to end and answers every question truly."""

from __future__ import annotations

import csv
import re

import pytest

from benchmarks.labeling_loop import COLUMNS, generated_workload, main
from reasoning.data import load_domain

QUESTIONS = 6  # per workload: today a pairs/status trains a forest (~0.5 s on a shared machine)


@pytest.fixture(scope="module")
def quick_run(al_cpl, tmp_path_factory):
    out = tmp_path_factory.mktemp("loop")
    code = main(["--quick", "--data", str(al_cpl), "--max-questions", str(QUESTIONS),
                 "--out", str(out), "--no-progress"])
    with (out / "calls.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    return code, out, header, rows


def test_quick_run_writes_every_output(quick_run):
    code, out, header, rows = quick_run
    assert code == 0
    assert header == COLUMNS
    assert (out / "latency.png").stat().st_size > 0
    assert list(out.glob("server-*.log")), "the server's log belongs in --out"
    summary = (out / "summary.md").read_text()
    for needle in ("/health", "## data_mining", "## generated-60", "questions/s",
                   "labels_behind"):
        assert needle in summary
    assert summary.count("question cap reached") == 2, "both loops end at --max-questions"
    verdicts = re.findall(r"^- (PASS|FAIL)  (.+?):", summary, flags=re.MULTILINE)
    assert {t for _, t in verdicts} >= {"status p50 <= 10 ms", "next p50 <= 30 ms",
                                         "next p50 <= 150 ms", "questions/s >= 15 q/s"}
    assert {r["workload"] for r in rows} == {"baseline", "data_mining", "generated-60"}


def test_each_workload_asks_looks_up_and_answers_every_question(quick_run):
    _, _, _, rows = quick_run
    for workload in ("data_mining", "generated-60"):
        calls = [r for r in rows if r["workload"] == workload]
        counts = {call: sum(r["call"] == call for r in calls) for call in ("next", "status",
                                                                            "label")}
        assert counts == {"next": QUESTIONS, "status": QUESTIONS, "label": QUESTIONS}
        assert all(float(r["ms"]) > 0 for r in calls)
        assert all(r["model"] in ("present", "null", "missing") for r in calls
                   if r["call"] != "label")
        assert all(r["labels_behind"] == "" or int(r["labels_behind"]) >= 0 for r in calls)


def test_label_posts_succeed_and_answer_the_asked_pair_with_its_truth(quick_run, al_cpl):
    _, _, _, rows = quick_run
    domain = load_domain(al_cpl, "data_mining")
    truth = {"data_mining": dict(zip(domain.pairs, domain.labels.tolist(), strict=True)),
             "generated-60": generated_workload(60, 600, None, seed=0).truth}
    for workload, expected in truth.items():
        calls = [r for r in rows if r["workload"] == workload]
        for i in range(QUESTIONS):
            asked, looked_up, posted = (next(r for r in calls if r["i"] == str(i)
                                             and r["call"] == call)
                                        for call in ("next", "status", "label"))
            pair = (asked["a"], asked["b"])
            assert (looked_up["a"], looked_up["b"]) == (posted["a"], posted["b"]) == pair
            assert pair in expected, "next asked a pair outside the pool"
            assert looked_up["answer"] == "undecided", "an asked pair was already decided"
            assert 200 <= int(posted["http"]) < 300
            assert posted["answer"] == ("positive" if expected[pair] else "negative")
        asked_pairs = [(r["a"], r["b"]) for r in calls if r["call"] == "label"]
        assert len(set(asked_pairs)) == len(asked_pairs), "a pair was asked twice"
