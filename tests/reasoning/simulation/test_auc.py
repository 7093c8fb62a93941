"""The pool-based protocol: split, seeds, deduced test labels, reproducibility, the command."""

from __future__ import annotations

import csv
import itertools

import numpy as np
import pytest
from typer.testing import CliRunner

from app.cli import cli
from reasoning.data import Domain
from reasoning.simulation import simulate
from reasoning.simulation.auc import _auc, run_strategy, split_pool
from reasoning.strategies import ALL_STRATEGIES


def chain_domain(n: int = 8, signal: float = 0.0, seed: int = 0) -> Domain:
    """Every ordered pair of the total order 0 ≺ 1 ≺ … ≺ n-1, with optional feature signal."""
    pairs = list(itertools.permutations(range(n), 2))
    labels = np.array([a < b for a, b in pairs])
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(len(pairs), 4)) + signal * labels[:, None]
    if signal == 0.0:
        features = np.zeros((len(pairs), 4))  # nothing to learn from
    return Domain(name="chain", concepts=list(range(n)), pairs=pairs, labels=labels,
                  features=features)


def test_split_is_two_to_one_disjoint_and_fixed_by_seed_and_repeat():
    labels = np.arange(90) % 3 == 0
    split = split_pool(labels, seed=4, repeat=1)
    assert len(split.train) == 60 and len(split.test) == 30
    assert sorted(np.concatenate([split.train, split.test]).tolist()) == list(range(90))
    assert labels[split.test].sum() == 10  # stratified
    assert len(set(split.seeds.tolist())) == 20 and split.seeds.max() < 60
    again = split_pool(labels, seed=4, repeat=1)
    other = split_pool(labels, seed=4, repeat=2)
    assert np.array_equal(split.train, again.train) and np.array_equal(split.seeds, again.seeds)
    assert not np.array_equal(split.train, other.train)


def test_deduced_test_labels_override_the_forest():
    X = np.zeros((4, 2))
    y_test = np.array([1, 0, 1, 0])
    # the forest has nothing to go by (one class): 0.5 for every open pair
    assert _auc(5, 0, X, np.array([1, 1, 1, 1]), X, y_test, np.full(4, -1, np.int8)) == 0.5
    # scores 1, 0 (deduced), .5, .5 (open): of the 4 positive/negative pairs 3 are ordered
    # right and one is a tie, AUC = 3.5 / 4
    deduced = np.array([1, 0, -1, -1], dtype=np.int8)
    assert _auc(5, 0, X, np.ones(4, int), X, y_test, deduced) == 0.875
    assert _auc(5, 0, X, np.ones(4, int), X, y_test, y_test.astype(np.int8)) == 1.0


def test_only_the_reasoning_settings_use_the_closure_on_test_pairs():
    domain = chain_domain()  # constant features: the forest alone is worth AUC 0.5
    plain = run_strategy(domain, "Random", queries=12, eval_every=4, seed_queries=5,
                         forest_trees=5)
    closed = run_strategy(domain, "Random-R", queries=12, eval_every=4, seed_queries=5,
                          forest_trees=5)
    assert [p.auc for p in plain] == [0.5] * 4
    assert closed[-1].auc > 0.5
    assert [p.labeled for p in plain] == [5, 9, 13, 17]
    assert all(c.labeled >= p.labeled for c, p in zip(closed, plain, strict=True))
    assert closed[-1].labeled > plain[-1].labeled


def test_runs_stop_asking_when_every_train_pair_is_labeled():
    domain = chain_domain(n=5)  # 20 pairs, 13 in train
    points = run_strategy(domain, "CNT", queries=30, eval_every=10, seed_queries=3,
                          forest_trees=5)
    assert [p.queries for p in points] == [0, 10, 20, 30]
    assert points[-1].labeled == 13


@pytest.mark.parametrize("strategy", ["LC-R+", "QBC", "Random-R"])
def test_a_run_is_reproducible_from_its_seed(strategy):
    domain = chain_domain(n=9, signal=1.0)

    def curve(seed):
        points = run_strategy(domain, strategy, seed=seed, repeat=1, queries=15, eval_every=5,
                              seed_queries=6, forest_trees=10)
        return [(p.queries, p.labeled, p.auc) for p in points]

    first = curve(3)
    assert curve(3) == first
    assert any(curve(s) != first for s in (4, 5, 6))


@pytest.mark.slow  # about 10 s: .ci/run's slow step
def test_quick_simulation_end_to_end_on_the_real_data(al_cpl, tmp_path):
    out = tmp_path / "sim"
    result = CliRunner().invoke(cli, ["simulate", "--data", str(al_cpl), "--out", str(out),
                                      "--quick", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    for name in ("curves.csv", "summary.csv", "summary.md", "claims.md", "runs.csv",
                 "timing.csv"):
        assert (out / name).stat().st_size > 0
    for name in ("auc.png", "labeled.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (out / "curves.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:6] == ["domain", "strategy", "repeat", "queries", "labeled", "auc"]
    assert {r["domain"] for r in rows} == {"data_mining"}  # quick: the smallest domain
    keys = {(r["strategy"], r["repeat"], r["queries"]) for r in rows}
    assert keys == {(s, str(rep), str(q)) for s in ALL_STRATEGIES for rep in (0, 1)
                    for q in (0, 10, 20, 30)}
    assert len(rows) == len(keys)
    for r in rows:
        assert 0.0 <= float(r["auc"]) <= 1.0
        floor = 20 + int(r["queries"])
        if r["strategy"] in ("Random", "LC", "QBC"):
            assert int(r["labeled"]) == floor
        else:
            assert int(r["labeled"]) >= floor
    with (out / "summary.csv").open() as handle:
        summary = list(csv.DictReader(handle))
    assert len(summary) == len(ALL_STRATEGIES) * 4 and {s["runs"] for s in summary} == {"2"}


def test_simulate_refuses_unknown_domains_and_strategies(al_cpl, tmp_path):
    with pytest.raises(ValueError, match="available: data_mining"):
        simulate(al_cpl, tmp_path, domain="astronomy", quick=True, progress=False)
    with pytest.raises(ValueError, match="valid: Random"):
        simulate(al_cpl, tmp_path, strategies="LC,ZZ", quick=True, progress=False)


def test_a_user_estimator_replaces_the_default_model():
    from sklearn.naive_bayes import GaussianNB

    domain = chain_domain(n=9, signal=1.0)
    kwargs = {"queries": 10, "eval_every": 10, "seed_queries": 6, "forest_trees": 5}
    default = run_strategy(domain, "LC", **kwargs)
    swapped = run_strategy(domain, "LC", estimator=GaussianNB(), **kwargs)
    assert [p.labeled for p in swapped] == [p.labeled for p in default]
    assert [p.auc for p in swapped] != [p.auc for p in default]  # other questions were asked


def test_the_reasoning_settings_also_score_the_consistent_map():
    domain = chain_domain(n=8, signal=1.0)
    kwargs = {"queries": 6, "eval_every": 3, "forest_trees": 10, "seed_queries": 4}
    points = run_strategy(domain, "LC-R+", **kwargs)
    assert all(0.0 <= p.auc_consistent <= 1.0 for p in points)
    plain = run_strategy(domain, "LC", **kwargs)
    assert all(np.isnan(p.auc_consistent) for p in plain)


def test_simulate_reads_default_as_the_resolved_strategy_and_all_as_every_strategy():
    from reasoning.simulation.runs import choose_strategies as _choose_strategies
    from reasoning.strategies import DEFAULT_STRATEGY

    assert _choose_strategies("default") == [DEFAULT_STRATEGY]
    assert _choose_strategies("LC-R+,default") == ["LC-R+", DEFAULT_STRATEGY]
    assert _choose_strategies("all") == list(ALL_STRATEGIES)
