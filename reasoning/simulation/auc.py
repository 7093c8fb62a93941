"""The paper's pool-based experiment (Liang et al. 2018, Sec. 5.3), re-run on labeled domains.

One *run* is one strategy on one train/test split (:func:`run_strategy`):

1. split the pool 2:1 into train and test pairs (seeded, stratified by label);
2. ask :data:`~reasoning.simulation.loop.SEED_QUERIES` random train pairs (the same ones for
   every strategy of a repeat);
3. repeat ``queries`` times: choose an undecided train pair with the strategy, ask the oracle
   (the true label), and, in the reasoning settings (``-R``, ``-R+``, CNT), add the label to the
   closure, so that every train pair it decides joins the labeled set
   (:func:`reasoning.simulation.loop.ask_by_strategy`);
4. every ``eval_every`` queries, fit a random forest of :data:`FOREST_TREES` trees on the
   labeled train pairs and measure ROC AUC on the test pairs. In the reasoning settings a test
   pair that the closure decides takes its deduced label (score 1 or 0). The reasoning
   settings also score the *consistent map* (:mod:`reasoning.consistent`): the closure's labels
   completed by the forest's probabilities on the undecided train and test pairs into a
   strict order, each test pair scored by the map's probability (``auc_consistent``).

With ``model_lag=N`` the strategy chooses with the model trained ``N`` queries earlier, the
way a service that retrains in the background may lag behind its labels; the closure, the
candidates and the evaluation stay current.

The closure only ever holds train labels; the ``-R+`` gains weigh train pairs only.
:func:`simulate_auc` runs every (domain, strategy, repeat) in worker processes and writes
``curves.csv``, ``summary.csv``, ``summary.md``, ``timing.csv`` and the plots
(:mod:`reasoning.report`).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

from reasoning import report
from reasoning.classifiers import FOREST_TREES, positive_proba
from reasoning.closure import Closure
from reasoning.data import Domain
from reasoning.simulation.loop import SEED_QUERIES, Asking, Chooser, Question, ask_by_strategy
from reasoning.simulation.oracle import TruthOracle
from reasoning.simulation.runs import (
    cached_domain,
    choose_domains,
    choose_strategies,
    question_rows,
    run_tasks,
    write_questions,
)
from reasoning.strategies import ALL_STRATEGIES, Strategy, get_strategy

__all__ = [
    "FOREST_TREES",
    "QUICK",
    "AucRun",
    "Point",
    "Profile",
    "Split",
    "Task",
    "run_strategy",
    "simulate_auc",
    "split_pool",
]


@dataclass(frozen=True)
class Profile:
    """How much to run: repeats, queries after the seed queries, evaluation step, forest size."""

    repeats: int = 20
    queries: int = 150
    eval_every: int = 10
    forest_trees: int = FOREST_TREES


QUICK = Profile(repeats=2, queries=30, eval_every=10, forest_trees=50)
"""The smoke-test profile (``--quick``): the caller's values are capped by these."""


@dataclass(frozen=True)
class Point:
    """One evaluation point of a run.

    ``queries`` counts the strategy's questions (the seed queries not included); ``labeled`` is
    the size of the labeled train set; ``closure_seconds`` the time spent adding labels to the
    closure so far in this run.
    """

    queries: int
    labeled: int
    auc: float
    closure_seconds: float
    auc_consistent: float = float("nan")


@dataclass(frozen=True)
class Split:
    """Rows of the domain in the train and the test pool, and the seed queries (train positions)."""

    train: np.ndarray
    test: np.ndarray
    seeds: np.ndarray


def split_pool(labels: np.ndarray, *, seed: int, repeat: int,
               seed_queries: int = SEED_QUERIES) -> Split:
    """The 2:1 train/test split of a repeat and its random seed queries.

    Depends only on ``(seed, repeat)``, so every strategy of a repeat sees the same split and
    the same seed queries (paired comparison).
    """
    labels = np.asarray(labels, dtype=bool)
    split_seq, seeds_seq = np.random.SeedSequence([seed, repeat]).spawn(2)
    rows = np.arange(len(labels))
    train, test = train_test_split(rows, test_size=1 / 3, stratify=labels,
                                   random_state=int(split_seq.generate_state(1)[0]))
    train, test = np.sort(train), np.sort(test)
    first = np.random.default_rng(seeds_seq).choice(len(train), min(seed_queries, len(train)),
                                                   replace=False)
    return Split(train, test, first)


def _auc(forest_trees: int, forest_seed: int, X_lab: np.ndarray, y_lab: np.ndarray,
         X_test: np.ndarray, y_test: np.ndarray, deduced: np.ndarray) -> float:
    """ROC AUC on the test pairs; ``deduced`` (1/0/-1) overrides the forest where decided."""
    score = deduced.astype(np.float64)
    open_rows = deduced < 0
    if open_rows.any():
        if len(np.unique(y_lab)) == 2:
            forest = RandomForestClassifier(n_estimators=forest_trees, random_state=forest_seed,
                                            n_jobs=1).fit(X_lab, y_lab)
            score[open_rows] = positive_proba(forest, X_test[open_rows])
        else:  # one class only: nothing to learn, rank the open pairs as ties
            score[open_rows] = 0.5
    return float(roc_auc_score(y_test, score))


def _aucs(forest_trees: int, forest_seed: int, X_lab: np.ndarray, y_lab: np.ndarray,
          X_test: np.ndarray, y_test: np.ndarray, closure: Closure, pool: np.ndarray,
          X_pool: np.ndarray, test_pairs: np.ndarray) -> tuple[float, float]:
    """The forest's AUC (as :func:`_auc`) and the consistent map's, from one forest."""
    from reasoning.consistent import consistent_map

    pairs = np.concatenate([pool, test_pairs])
    values = closure.values_by_index(pairs[:, 0], pairs[:, 1])
    proba = np.full(len(pairs), 0.5)
    open_rows = np.flatnonzero(values < 0)
    if len(open_rows) and len(np.unique(y_lab)) == 2:
        forest = RandomForestClassifier(n_estimators=forest_trees, random_state=forest_seed,
                                        n_jobs=1).fit(X_lab, y_lab)
        X_all = np.concatenate([X_pool, X_test])
        proba[open_rows] = positive_proba(forest, X_all[open_rows])
    raw = np.where(values >= 0, values.astype(np.float64), proba)[len(pool):]
    completed = consistent_map(closure, pairs, proba)
    return (float(roc_auc_score(y_test, raw)),
            float(roc_auc_score(y_test, completed.probability[len(pool):])))


@dataclass
class _Evaluation:
    """The evaluation points of one run: called before each of the strategy's questions."""

    asking: Asking
    strategy: Strategy
    X: np.ndarray
    test_pairs: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    forest_trees: int
    forest_seed: int
    eval_every: int
    queries: int
    points: list[Point] = field(default_factory=list)
    last: Point | None = None

    def __call__(self, step: int) -> None:
        if step % self.eval_every and step != self.queries:
            return
        known = self.asking.known(self.strategy)
        labeled = known >= 0
        seconds = self.asking.closure_seconds
        if self.last is None or self.last.labeled != int(labeled.sum()):  # else unchanged
            self.last = self._measure(step, labeled, known[labeled].astype(np.int64), seconds)
        last = self.last
        self.points.append(Point(step, last.labeled, last.auc, seconds, last.auc_consistent))

    def _measure(self, step: int, labeled: np.ndarray, y_lab: np.ndarray,
                 seconds: float) -> Point:
        trees, seed, X = self.forest_trees, self.forest_seed, self.X
        closure = self.asking.closure
        if self.strategy.uses_closure and closure is not None:
            auc, consistent = _aucs(trees, seed, X[labeled], y_lab, self.X_test, self.y_test,
                                    closure, self.asking.pool, X, self.test_pairs)
        else:
            undecided = np.full(len(self.test_pairs), -1, dtype=np.int8)
            auc = _auc(trees, seed, X[labeled], y_lab, self.X_test, self.y_test, undecided)
            consistent = math.nan
        return Point(step, int(labeled.sum()), auc, seconds, consistent)


def run_strategy(domain: Domain, strategy: Strategy | str, *, repeat: int = 0, seed: int = 0,
                 queries: int = 150, eval_every: int = 10, seed_queries: int = SEED_QUERIES,
                 forest_trees: int = FOREST_TREES, estimator=None, model_lag: int = 0,
                 log: list[Question] | None = None) -> list[Point]:
    """One run of ``strategy`` on one split of ``domain``; the points at every evaluation.

    Reproducible: the same arguments give the same points (closure times aside).

    Parameters
    ----------
    domain : Domain
    strategy : Strategy or str
        A strategy of :data:`~reasoning.strategies.STRATEGIES`, or its name.
    repeat, seed : int
        The split and the seed queries depend on both; tie-breaks and models also on the
        strategy.
    queries : int
        Questions asked by the strategy after the seed queries.
    eval_every : int
        Evaluate at 0, eval_every, 2·eval_every, … and at ``queries``.
    seed_queries, forest_trees : int
    estimator : classifier, optional
        Replaces the strategy's default model (see :func:`~reasoning.strategies.fit_model`).
    model_lag : int
        The strategy's model is the one trained ``model_lag`` queries earlier: it has seen
        neither the last ``model_lag`` answers nor what they decided. Before that many queries
        it is the model of the seed queries. 0 is the synchronous protocol; the split, seeds,
        tie-break and forest randomness do not depend on it, so lags pair with each other.
    log : list, optional
        Receives every question the strategy chose (:class:`~reasoning.simulation.loop.
        Question`, the seed queries left out).
    """
    if model_lag < 0:
        raise ValueError("model_lag must be at least 0")
    strategy = get_strategy(strategy)
    split = split_pool(domain.labels, seed=seed, repeat=repeat, seed_queries=seed_queries)
    pairs = domain.index_pairs()
    pool, X, truth = pairs[split.train], domain.features[split.train], domain.labels[split.train]
    select_seq, model_seq, forest_seq = np.random.SeedSequence(
        [seed, repeat, ALL_STRATEGIES.index(strategy.name)]).spawn(3)
    asking = Asking(pool, TruthOracle(truth), len(domain.concepts),
                    keep_closure=strategy.uses_closure)
    for row in split.seeds:
        asking.ask(int(row))
    evaluation = _Evaluation(asking, strategy, X, pairs[split.test], domain.features[split.test],
                             domain.labels[split.test].astype(np.int64), forest_trees,
                             int(forest_seq.generate_state(1)[0]), eval_every, queries)
    chooser = Chooser(strategy, X, np.random.default_rng(select_seq),
                      int(model_seq.generate_state(1)[0]), estimator, model_lag)
    ask_by_strategy(asking, chooser, queries=queries, before=evaluation, log=log)
    return evaluation.points


# ---------------------------------------------------------------------------- many runs
@dataclass(frozen=True)
class AucRun:
    """What one run of :class:`Task` gives: its points and the questions its strategy chose."""

    points: list[Point]
    questions: list[Question]


@dataclass(frozen=True)
class Task:
    """One run of :func:`simulate_auc`: a strategy on a repeat of a domain read from
    ``folder``."""

    folder: str
    domain: str
    strategy: Strategy
    repeat: int
    seed: int
    profile: Profile
    model_lag: int = 0

    def run(self) -> AucRun:
        questions: list[Question] = []
        points = run_strategy(cached_domain(self.folder, self.domain), self.strategy,
                              repeat=self.repeat, seed=self.seed, queries=self.profile.queries,
                              eval_every=self.profile.eval_every,
                              forest_trees=self.profile.forest_trees, model_lag=self.model_lag,
                              log=questions)
        return AucRun(points, questions)


def auc_profile(repeats: int, queries: int | None, eval_every: int, quick: bool) -> Profile:
    """The profile asked for (``queries`` None: 150), capped by :data:`QUICK` with ``quick``."""
    queries = 150 if queries is None else queries
    profile = Profile(repeats, queries, eval_every, FOREST_TREES)
    if quick:
        profile = Profile(min(repeats, QUICK.repeats), min(queries, QUICK.queries),
                          min(eval_every, QUICK.eval_every), QUICK.forest_trees)
    return profile


def simulate_auc(data: str | Path, out: str | Path, *, domain: str = "all",
                 strategies="all", profile: Profile, seed: int = 0, jobs: int = 0,
                 quick: bool = False, progress: bool = True, model_lag: int = 0,
                 log_questions: bool = False) -> Path:
    """Run the experiment and write its curves, summary, timing and plots into ``out``.

    The parameters are those of :func:`reasoning.simulation.simulate`, the amounts in
    ``profile`` (:func:`auc_profile`).
    """
    if profile.repeats < 1 or profile.queries < 0 or profile.eval_every < 1 or model_lag < 0:
        raise ValueError("repeats and eval_every must be at least 1, queries and model_lag at "
                         "least 0")
    folder, out = Path(data), Path(out)
    names = choose_domains(folder, domain, quick)
    chosen = [get_strategy(name) for name in choose_strategies(strategies)]
    if not chosen:
        raise ValueError("no strategy chosen")
    jobs = jobs if jobs > 0 else (os.cpu_count() or 1)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    runs: list[dict] = []
    timing: list[dict] = []
    questions: list[dict] = []
    for name in names:
        tasks = [Task(str(folder), name, s, r, seed, profile, model_lag)
                 for r in range(profile.repeats) for s in chosen]
        start = time.perf_counter()
        results = run_tasks(tasks, jobs, name, progress)
        wall = time.perf_counter() - start
        for task, run, seconds in results:
            rows.extend(_curve_rows(task, run.points))
            runs.append({"domain": name, "strategy": task.strategy.name, "repeat": task.repeat,
                         "seconds": seconds, "closure_seconds":
                         run.points[-1].closure_seconds if run.points else 0.0})
            questions += question_rows(name, "auc", task.strategy.name, task.repeat,
                                       run.questions)
        timing.append({"domain": name, "runs": len(tasks), "jobs": jobs, "wall_seconds": wall,
                       "run_seconds": sum(r["seconds"] for r in runs if r["domain"] == name)})
        # after every domain, so that a long run that is cut short keeps what it finished
        report.write_outputs(out, rows, runs, timing, domains=names)
        if log_questions:
            write_questions(out / "questions.csv", questions, names)
    return out


def _curve_rows(task: Task, points: list[Point]) -> list[dict]:
    return [{"domain": task.domain, "strategy": task.strategy.name, "repeat": task.repeat,
             "queries": p.queries, "labeled": p.labeled, "auc": p.auc,
             "closure_seconds": p.closure_seconds, "auc_consistent": p.auc_consistent}
            for p in points]
