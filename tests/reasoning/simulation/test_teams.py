"""A team of noisy annotators in the simulation: the oracle, the policies, the command."""

from __future__ import annotations

import csv
import json

import networkx as nx
import numpy as np
import pytest
from typer.testing import CliRunner

from app.cli import cli
from reasoning.consensus.asking import CHECK_RATE, SECOND_OPINION_VALUE
from reasoning.generate import random_order
from reasoning.simulation import team_runs
from reasoning.simulation.oracle import NoisyAnnotator, Team, direct_truth
from reasoning.simulation.team_runs import TEAM_FIELDS, parse_team, simulate_teams
from reasoning.simulation.teams import POLICIES, run_team
from tests.reasoning.simulation.test_coverage import write_domain


def tiny(seed: int = 0, n: int = 12, pool: int = 50):
    order = random_order(n, pool, positive_share=0.35, depth=4, random_state=seed)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(len(order.pool), 3)) + 1.5 * order.labels[:, None]
    return order.pool, X, order.labels, n


# ---------------------------------------------------------------------------- the oracle
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_an_independent_annotator_errs_at_its_rate(eps):
    truth = np.random.default_rng(0).random(20_000) < 0.3
    team = Team.build(np.zeros((len(truth), 2), dtype=np.int64), truth, [eps, eps],
                      ["independent"] * 2, seed=3, repeat=1)
    for k in range(2):
        wrong = np.mean([team.answer(r, k) != truth[r] for r in range(len(truth))])
        assert abs(wrong - eps) < 0.012


def test_noise_draws_pair_by_seed_and_repeat_not_by_anything_else():
    pairs, _, truth, _ = tiny(1)
    one = Team.build(pairs, truth, [0.2] * 3, ["independent"] * 3, seed=5, repeat=2)
    two = Team.build(pairs, truth, [0.2] * 3, ["independent"] * 3, seed=5, repeat=2)
    other = Team.build(pairs, truth, [0.2] * 3, ["independent"] * 3, seed=5, repeat=3)
    answers = [[t.answer(r, k) for r in range(len(pairs)) for k in range(3)]
               for t in (one, two, other)]
    assert answers[0] == answers[1] != answers[2]
    # nested noise: what errs at 0.1 errs at 0.2 as well (one draw per pair and annotator)
    low = Team.build(pairs, truth, [0.1] * 3, ["independent"] * 3, seed=5, repeat=2)
    for r in range(len(pairs)):
        for k in range(3):
            if low.answer(r, k) != truth[r]:
                assert one.answer(r, k) != truth[r]


def test_a_direct_annotator_answers_the_transitive_reduction():
    pairs = np.array([[0, 1], [1, 2], [0, 2], [2, 3], [0, 3], [3, 0], [1, 3]])
    truth = np.array([True, True, True, True, True, False, True])
    direct = direct_truth(pairs, truth)
    assert direct.tolist() == [True, True, False, True, False, False, False]
    pool, _, labels, _ = tiny(2)
    graph = nx.DiGraph()
    graph.add_edges_from(map(tuple, pool[labels].tolist()))
    reduction = nx.transitive_reduction(graph)
    expected = [bool(t) and reduction.has_edge(int(a), int(b))
                for (a, b), t in zip(pool.tolist(), labels.tolist(), strict=True)]
    assert direct_truth(pool, labels).tolist() == expected
    team = Team.build(pool, labels, [0.0, 0.0], ["direct", "independent"], seed=0, repeat=0)
    assert [team.answer(r, 0) for r in range(len(pool))] == expected
    assert [team.answer(r, 1) for r in range(len(pool))] == labels.tolist()


def test_a_noisy_annotator_flips_where_its_draw_is_below_eps():
    annotator = NoisyAnnotator(np.array([True, False, True]), np.array([0.05, 0.05, 0.5]),
                               0.1)
    assert [annotator.answer(r) for r in range(3)] == [False, True, True]


# ---------------------------------------------------------------------------- the policies
class Recording:
    """A team that records who answered which row."""

    def __init__(self, team: Team) -> None:
        self.team, self.names = team, team.names
        self.log: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self.team)

    def answer(self, row: int, member: int) -> bool:
        self.log.append((row, member))
        return self.team.answer(row, member)


@pytest.mark.parametrize("policy", POLICIES)
def test_round_robin_never_asks_an_annotator_a_pair_twice(policy):
    pairs, X, truth, n = tiny(3)
    team = Recording(Team.build(pairs, truth, [0.2] * 3, ["independent"] * 3, seed=0,
                                repeat=0))
    run = run_team(pairs, X, truth, n, team, policy, strategy="CNT")
    assert len(team.log) == run.answers
    assert len(set(team.log)) == len(team.log)  # no (pair, annotator) twice
    if policy == "trust":  # one answer per question, annotators in turn
        assert [m for _, m in team.log] == [k % 3 for k in range(len(team.log))]
    if policy == "double":
        per_row: dict[int, int] = {}
        for row, _ in team.log:
            per_row[row] = per_row.get(row, 0) + 1
        assert set(per_row.values()) <= {2, 3}
    assert 0 <= run.wrong_pairs <= run.pool and len(run.wrong) == run.answers


def test_without_noise_every_policy_decides_the_true_map():
    pairs, X, truth, n = tiny(4)
    team = Team.build(pairs, truth, [0.0] * 3, ["independent"] * 3, seed=0, repeat=0)
    for policy in POLICIES:
        run = run_team(pairs, X, truth, n, team, policy, strategy="CNT")
        assert run.wrong_pairs == 0 and run.positive_f1 == 1.0
        assert run.decided[-1] == len(pairs)


def test_parse_team():
    assert parse_team("0.1", 3) == ((0.1,) * 3, ("independent",) * 3)
    assert parse_team("0.05", 2, "direct,independent") == ((0.05, 0.05),
                                                             ("direct", "independent"))
    for bad in (("0.1,0.2", 3, "independent"), ("0.1", 2, "psychic"), ("2", 1, "direct")):
        with pytest.raises(ValueError):
            parse_team(*bad)


# ---------------------------------------------------------------------------- the command
def test_the_team_command_writes_the_new_columns(tmp_path):
    pairs, X, truth, _ = tiny(7)
    write_domain(tmp_path / "data", "tiny", pairs, X, truth)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [
        "simulate", "--mode", "coverage", "--data", str(tmp_path / "data"), "--out", str(out),
        "--strategies", "CNT", "--repeats", "2", "--jobs", "1", "--noise", "0.1",
        "--annotators", "3", "--policy", "trust,double,consensus"])
    assert result.exit_code == 0, result.output
    with (out / "coverage.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == TEAM_FIELDS
    assert {(r["policy"], r["noise"], r["repeat"]) for r in rows} == {
        (p, e, str(k)) for p, e in (("trust", "0.0"), ("trust", "0.1"), ("double", "0.1"),
                                    ("consensus", "0.1")) for k in (0, 1)}
    for r in rows:
        assert int(r["wrong_pairs"]) == round(float(r["error_rate"]) * len(pairs))
        assert int(r["answers"]) >= int(r["q100"] or 0)
        assert 0 <= float(r["positive_f1"]) <= 1
    text = (out / "coverage.md").read_text()
    assert "consensus − trust" in text and "answers / perfect" in text
    assert (out / "coverage.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = CliRunner().invoke(cli, [
        "simulate", "--mode", "coverage", "--data", str(tmp_path / "data"), "--out", str(out),
        "--policy", "wishful"])
    assert bad.exit_code != 0 and "wishful" in bad.output


def test_resume_skips_the_finished_runs(tmp_path, monkeypatch):
    pairs, X, truth, _ = tiny(8)
    write_domain(tmp_path / "data", "tiny", pairs, X, truth)
    out = tmp_path / "out"
    args = {"domain": "tiny", "policies": "trust,consensus", "noise": "0.1", "annotators": 3,
            "strategy": "CNT", "repeats": 1, "jobs": 1, "progress": False}
    simulate_teams(tmp_path / "data", out, **args)
    lines = (out / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 3  # the perfect annotator, trust, consensus
    ran = []
    original = team_runs.TeamTask.run
    monkeypatch.setattr(team_runs.TeamTask, "run", lambda self: ran.append(self.key)
                        or original(self))
    simulate_teams(tmp_path / "data", out, resume=True, **args)
    assert ran == [] and (out / "runs.jsonl").read_text().splitlines() == lines
    simulate_teams(tmp_path / "data", out, resume=True, **{**args, "repeats": 2})
    assert len(ran) == 3 and all(key.endswith(f"|1|0|{CHECK_RATE:g}|{SECOND_OPINION_VALUE:g}")
                                 for key in ran)
    keys = [json.loads(line)["key"] for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 6
    simulate_teams(tmp_path / "data", out, **args)  # without resume: a fresh file
    assert len((out / "runs.jsonl").read_text().splitlines()) == 3


def test_a_team_that_answers_the_direct_relation_is_no_perfect_annotator():
    from reasoning.simulation.team_report import team_table

    def row(policy: str, model: str, answers: int, repeat: int = 0) -> dict:
        return {"domain": "d", "pool": 10, "policy": policy, "noise": "0.0",
                "noise_model": model, "annotators": 5, "repeat": repeat, "answers": answers,
                "error_rate": 0.0 if model == "independent" else 0.2, "positive_f1": 1.0,
                "second_opinions": 0, "disagreements": 0, "checks": 0}

    text = team_table([row("trust", "independent", 100), row("trust", "direct", 130),
                       row("consensus", "direct", 260)])
    assert "the perfect annotator: 100 answers, 1 repeats" in text
    direct = text.split("noise model direct")[1]
    assert "| trust | 1 | 130 | 1.30 |" in direct and "| consensus | 1 | 260 | 2.60 |" in direct
