"""Questions to a complete map: the coverage run, the greedy oracle and the command."""

from __future__ import annotations

import csv

import networkx as nx
import numpy as np
import pytest
from typer.testing import CliRunner

from app.cli import cli
from reasoning.closure import Closure
from reasoning.generate import random_order
from reasoning.simulation.coverage import (
    cover_pairs,
    coverage_seeds,
    first_reaching,
    greedy_oracle,
    run_coverage,
)
from reasoning.simulation.coverage_report import SHARES


def tiny(seed: int = 0, n: int = 14, pool: int = 70):
    """A generated order, a pool with positives and negatives, and features that carry signal."""
    order = random_order(n, pool, positive_share=0.35, depth=4, random_state=seed)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(len(order.pool), 3)) + 1.5 * order.labels[:, None]
    return order.pool, X, order.labels, n


def reduction_size(pairs, truth) -> int:
    graph = nx.DiGraph()
    graph.add_edges_from(map(tuple, pairs[truth].tolist()))
    return nx.transitive_reduction(graph).number_of_edges()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cover_pairs_are_the_transitive_reduction_and_decide_every_positive(seed):
    pairs, _, truth, n = tiny(seed)
    covers = cover_pairs(pairs, truth)
    assert len(covers) == reduction_size(pairs, truth)
    assert truth[covers].all()
    closure = Closure.from_labels([(int(a), int(b), True) for a, b in pairs[covers]], range(n))
    assert (closure.values_by_index(pairs[truth, 0], pairs[truth, 1]) == 1).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_oracle_asks_at_least_the_reduction_and_decides_the_whole_pool(seed):
    pairs, _, truth, n = tiny(seed)
    covers, decided = greedy_oracle(pairs, truth, n, repeat=seed)
    assert covers == reduction_size(pairs, truth)
    assert len(decided) >= covers
    assert decided[-1] == len(pairs)
    assert (np.diff(decided) >= 0).all()


@pytest.mark.parametrize("strategy", ["CNT", "LC-R+", "QBC-R+", "Random-R", "LC", "EDP-F"])
def test_a_strategy_decides_the_whole_pool_and_needs_at_least_the_oracle(strategy):
    pairs, X, truth, n = tiny(3)
    decided = run_coverage(pairs, X, truth, n, strategy, repeat=0, seed=5)
    covers, oracle = greedy_oracle(pairs, truth, n, repeat=0, seed=5)
    assert decided[-1] == len(pairs) and decided[:-1].max() < len(pairs)
    q100 = first_reaching(decided, len(pairs), 1.0)
    assert q100 == len(decided) >= len(oracle) >= covers
    marks = [first_reaching(decided, len(pairs), s) for s in SHARES]
    assert marks == sorted(marks)


def test_a_coverage_run_is_reproducible_from_its_seed():
    pairs, X, truth, n = tiny(4)
    first = run_coverage(pairs, X, truth, n, "LC-R+", repeat=1, seed=9)
    assert run_coverage(pairs, X, truth, n, "LC-R+", repeat=1, seed=9).tolist() == first.tolist()
    assert coverage_seeds(len(pairs), seed=9, repeat=1).tolist() != coverage_seeds(
        len(pairs), seed=9, repeat=2).tolist()


def test_every_strategy_of_a_repeat_starts_from_the_same_seed_questions():
    pairs, X, truth, n = tiny(5)
    seeds = coverage_seeds(len(pairs), seed=0, repeat=0, seed_queries=6)
    closure = Closure.from_labels([(int(a), int(b), bool(t)) for (a, b), t
                                   in zip(pairs[seeds], truth[seeds], strict=True)], range(n))
    after_seeds = int((closure.values_by_index(pairs[:, 0], pairs[:, 1]) >= 0).sum())
    for strategy in ("CNT", "LC-R+"):
        decided = run_coverage(pairs, X, truth, n, strategy, seed_queries=6)
        assert decided[5] == after_seeds


def test_the_cap_stops_the_questions_after_the_seeds():
    pairs, X, truth, n = tiny(6)
    decided = run_coverage(pairs, X, truth, n, "CNT", queries=5)
    assert len(decided) == 20 + 5 and decided[-1] < len(pairs)
    assert first_reaching(decided, len(pairs), 1.0) is None


def write_domain(folder, name, pairs, X, truth) -> None:
    """The AL-CPL layout: a row ``A,B`` labeled 1 means B is a prerequisite of A."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.pairs").write_text(
        "".join(f"c{b},c{a}\n" for a, b in pairs.tolist()), encoding="utf-8")
    (folder / f"{name}.features").write_text("".join(
        f"{int(t)} " + " ".join(f"{j}:{v:.4f}" for j, v in enumerate(row)) + "\n"
        for row, t in zip(X, truth, strict=True)), encoding="utf-8")


def test_the_coverage_command_writes_its_tables_and_plot(tmp_path):
    pairs, X, truth, _ = tiny(7)
    write_domain(tmp_path / "data", "tiny", pairs, X, truth)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [
        "simulate", "--mode", "coverage", "--data", str(tmp_path / "data"), "--out", str(out),
        "--strategies", "CNT,LC-R+", "--repeats", "2", "--jobs", "1"])
    assert result.exit_code == 0, result.output
    with (out / "coverage.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["domain", "strategy", "repeat", "pool", "q50", "q80", "q90",
                             "q95", "q99", "q100"]
    assert {(r["strategy"], r["repeat"]) for r in rows} == {
        (s, str(k)) for s in ("oracle", "CNT", "LC-R+") for k in (0, 1)}
    oracle = {r["repeat"]: int(r["q100"]) for r in rows if r["strategy"] == "oracle"}
    for r in rows:
        assert int(r["pool"]) == len(pairs)
        assert int(r["q50"]) <= int(r["q100"])
        assert int(r["q100"]) >= oracle[r["repeat"]]
    with (out / "oracle.csv").open() as handle:
        (line,) = list(csv.DictReader(handle))
    assert line["domain"] == "tiny" and int(line["cover_pairs"]) == reduction_size(pairs, truth)
    assert float(line["greedy_oracle"]) == np.mean(list(oracle.values()))
    assert (out / "coverage.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "coverage.md").read_text()
    assert "### tiny" in text and "Paired q100 differences against LC-R+" in text
