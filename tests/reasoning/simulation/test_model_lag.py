"""A lagging strategy model (issue 9): which model chooses, what stays paired.

What a lag costs in AUC (the model-lag benchmark) is tested in ``tests/benchmarks/``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from typer.testing import CliRunner

import reasoning.simulation
from app.cli import cli
from reasoning.data import Domain
from reasoning.generate import random_order
from reasoning.simulation.auc import run_strategy


class SeenRecorder(ClassifierMixin, BaseEstimator):
    """A classifier that logs, whenever it scores the pool, how many labeled rows it was fit on.

    The log lives on the class: :func:`~reasoning.strategies.fit_model` clones the estimator.
    """

    seen_log: list[int] = []

    def fit(self, X, y) -> SeenRecorder:
        self.classes_ = np.unique(y)
        self.seen_ = len(y)
        return self

    def predict_proba(self, X) -> np.ndarray:
        SeenRecorder.seen_log.append(self.seen_)
        p = 1.0 / (1.0 + np.exp(-np.asarray(X, dtype=np.float64)[:, 0]))
        return np.column_stack([1.0 - p, p])


@pytest.fixture
def seen():
    SeenRecorder.seen_log = []
    yield SeenRecorder.seen_log
    SeenRecorder.seen_log = []


def order_domain(seed: int = 1) -> Domain:
    """A sparse random order (the closure leaves much open) whose features carry the labels."""
    order = random_order(40, 240, degree=1.5, depth=4, positive_share=0.4, random_state=seed)
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(len(order.labels), 3)) + 1.5 * order.labels[:, None]
    return Domain(name="generated", concepts=list(range(order.n)),
                  pairs=[(int(a), int(b)) for a, b in order.pool], labels=order.labels,
                  features=features)


RUN = {"queries": 12, "eval_every": 1, "seed_queries": 8, "forest_trees": 3}


@pytest.mark.parametrize("strategy", ["LC", "LC-R+"])
@pytest.mark.parametrize("lag", [0, 1, 3])
def test_the_model_that_chooses_has_seen_the_labels_of_lag_queries_earlier(strategy, lag, seen):
    points = run_strategy(order_domain(), strategy, estimator=SeenRecorder(), model_lag=lag,
                          **RUN)
    labeled = [p.labeled for p in points]  # eval_every=1: the labeled set before each query
    assert len(seen) == RUN["queries"], "one model scored the pool for every question"
    assert seen == [labeled[max(0, asked - lag)] for asked in range(RUN["queries"])]
    if strategy == "LC":  # no closure: the labeled set is the seeds and the answers
        assert seen == [RUN["seed_queries"] + max(0, asked - lag)
                        for asked in range(RUN["queries"])]


def test_lag_zero_is_the_synchronous_run():
    domain = order_domain(2)
    kwargs = {"repeat": 1, "queries": 10, "eval_every": 5, "seed_queries": 8, "forest_trees": 3}

    def curve(**extra):  # closure seconds aside: they are wall-clock times
        return [(p.queries, p.labeled, p.auc)
                for p in run_strategy(domain, "LC-R+", **kwargs, **extra)]

    assert curve(model_lag=0) == curve()


def test_a_lag_changes_the_questions_but_not_the_split_or_the_seeds():
    domain = order_domain(3)
    kwargs = {"queries": 10, "eval_every": 5, "seed_queries": 8, "forest_trees": 3}

    def curve(lag, repeat):
        return [(p.queries, p.labeled, p.auc)
                for p in run_strategy(domain, "LC-R+", repeat=repeat, model_lag=lag, **kwargs)]

    changed = False
    for repeat in range(3):
        synchronous, lagged = curve(0, repeat), curve(4, repeat)
        assert synchronous[0] == lagged[0], "same split, seeds and forest before any question"
        changed |= synchronous != lagged
    assert changed, "an older model asks other questions"


def test_a_negative_lag_is_refused():
    with pytest.raises(ValueError, match="model_lag"):
        run_strategy(order_domain(), "LC", model_lag=-1, **RUN)


def test_simulate_command_passes_the_model_lag_on(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(reasoning.simulation, "simulate", lambda **kw: calls.append(kw))
    result = CliRunner().invoke(cli, ["simulate", "--data", str(tmp_path), "--out",
                                      str(tmp_path), "--model-lag", "3"])
    assert result.exit_code == 0, result.output
    assert calls[0]["model_lag"] == 3
    refused = CliRunner().invoke(cli, ["simulate", "--data", str(tmp_path), "--out",
                                       str(tmp_path), "--model-lag", "-1"])
    assert refused.exit_code != 0
