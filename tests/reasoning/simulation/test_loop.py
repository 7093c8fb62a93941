"""The shared ask loop: the oracle it asks, the questions it logs, and the command's log."""

from __future__ import annotations

import csv

import numpy as np
from typer.testing import CliRunner

from app.cli import cli
from reasoning.simulation.coverage import coverage_seeds, run_coverage
from reasoning.simulation.loop import Asking, Chooser, ask_by_strategy
from reasoning.simulation.oracle import TruthOracle
from reasoning.simulation.runs import QUESTION_FIELDS
from reasoning.strategies import get_strategy
from tests.reasoning.simulation.test_coverage import tiny, write_domain


class RecordingOracle:
    """The truth, and every row it was asked about."""

    def __init__(self, truth) -> None:
        self.truth, self.asked = truth, []

    def answer(self, row: int) -> bool:
        self.asked.append(row)
        return bool(self.truth[row])


def test_the_loop_asks_its_oracle_and_logs_only_what_the_strategy_chose():
    pairs, X, truth, n = tiny(3)
    oracle = RecordingOracle(truth)
    asking = Asking(pairs, oracle, n, keep_closure=True)
    for row in (0, 1):
        asking.ask(row)
    log = []
    chooser = Chooser(get_strategy("LC-R+"), X, np.random.default_rng(0), 0)
    ask_by_strategy(asking, chooser, queries=5, log=log)
    assert [q.i for q in log] == [0, 1, 2, 3, 4]
    assert oracle.asked == [0, 1] + [q.row for q in log]
    assert [(q.a, q.b) for q in log] == [tuple(pairs[q.row]) for q in log]
    assert len(asking.decided) == 7


def test_a_coverage_run_logs_the_same_questions_as_it_asks():
    pairs, X, truth, n = tiny(4)
    log = []
    decided = run_coverage(pairs, X, truth, n, "EDP", repeat=1, seed=2, log=log)
    seeds = coverage_seeds(len(pairs), seed=2, repeat=1)
    assert len(decided) == len(seeds) + len(log)
    assert not {q.row for q in log} & set(seeds.tolist())
    again = []
    run_coverage(pairs, X, truth, n, get_strategy("EDP"), repeat=1, seed=2, log=again)
    assert again == log


def test_the_truth_oracle_answers_the_label():
    assert TruthOracle(np.array([False, True])).answer(1) is True


def test_simulate_logs_every_chosen_question_in_both_modes(tmp_path):
    pairs, X, truth, _ = tiny(7)
    write_domain(tmp_path / "data", "tiny", pairs, X, truth)
    for mode in ("auc", "coverage"):
        out = tmp_path / mode
        result = CliRunner().invoke(cli, [
            "simulate", "--mode", mode, "--data", str(tmp_path / "data"), "--out", str(out),
            "--strategies", "CNT,LC", "--repeats", "2", "--queries", "6", "--eval-every", "3",
            "--jobs", "1", "--log-questions"])
        assert result.exit_code == 0, result.output
        with (out / "questions.csv").open() as handle:
            rows = list(csv.DictReader(handle))
        assert tuple(rows[0]) == QUESTION_FIELDS
        runs = {(r["strategy"], r["repeat"]) for r in rows}
        assert runs == {(s, k) for s in ("LC", "CNT") for k in ("0", "1")}
        assert [r["strategy"] for r in rows][:1] == ["LC"]  # registry order
        for strategy, repeat in runs:
            mine = [r for r in rows if (r["strategy"], r["repeat"]) == (strategy, repeat)]
            assert [int(r["i"]) for r in mine] == list(range(6))
            assert {r["mode"] for r in mine} == {mode} and {r["domain"] for r in mine} == {"tiny"}
    result = CliRunner().invoke(cli, [
        "simulate", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "plain"),
        "--strategies", "CNT", "--repeats", "1", "--queries", "3", "--jobs", "1"])
    assert result.exit_code == 0 and not (tmp_path / "plain" / "questions.csv").exists()
