"""The paper's pool-based experiment (Liang et al. 2018, Sec. 5.3), re-run on labeled domains.

One *run* is one strategy on one train/test split (:func:`run_strategy`):

1. split the pool 2:1 into train and test pairs (seeded, stratified by label);
2. ask :data:`SEED_QUERIES` random train pairs (the same ones for every strategy of a repeat);
3. repeat ``queries`` times: choose an undecided train pair with the strategy, ask the oracle
   (the true label), and, in the reasoning settings (``-R``, ``-R+``, CNT), add the label to the
   closure, so that every train pair it decides joins the labeled set;
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
:func:`simulate` runs every (domain, strategy, repeat) in worker processes and writes
``curves.csv``, ``summary.csv``, ``summary.md``, ``timing.csv`` and the plots
(:mod:`reasoning.report`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from tqdm import tqdm

from reasoning import report
from reasoning.classifiers import positive_proba
from reasoning.closure import Closure
from reasoning.data import Domain, domain_names, load_domain
from reasoning.strategies import (
    ALL_STRATEGIES,
    Strategy,
    fit_model,
    get_strategy,
    model_inputs,
    parse_strategy,
    select,
)

__all__ = [
    "FOREST_TREES",
    "QUICK",
    "SEED_QUERIES",
    "Point",
    "Profile",
    "Split",
    "Task",
    "run_strategy",
    "run_tasks",
    "simulate",
    "split_pool",
]

SEED_QUERIES = 20
"""Random train pairs asked before the strategy takes over (the paper's 20)."""

FOREST_TREES = 200
"""Trees of the evaluation random forest (the paper's 200)."""


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
    values = closure.values(pairs[:, 0], pairs[:, 1])
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


def run_strategy(domain: Domain, strategy: Strategy | str, *, repeat: int = 0, seed: int = 0,
                 queries: int = 150, eval_every: int = 10, seed_queries: int = SEED_QUERIES,
                 forest_trees: int = FOREST_TREES, estimator=None,
                 model_lag: int = 0) -> list[Point]:
    """One run of ``strategy`` on one split of ``domain``; the points at every evaluation.

    Reproducible: the same arguments give the same points (closure times aside).

    Parameters
    ----------
    domain : Domain
    strategy : str
        One of :data:`~reasoning.strategies.ALL_STRATEGIES`.
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
    """
    if model_lag < 0:
        raise ValueError("model_lag must be at least 0")
    strategy = get_strategy(strategy)
    split = split_pool(domain.labels, seed=seed, repeat=repeat, seed_queries=seed_queries)
    pairs = domain.index_pairs()
    pool, X, truth = pairs[split.train], domain.features[split.train], domain.labels[split.train]
    test_pairs, X_test = pairs[split.test], domain.features[split.test]
    y_test = domain.labels[split.test].astype(np.int64)
    select_seq, model_seq, forest_seq = np.random.SeedSequence(
        [seed, repeat, ALL_STRATEGIES.index(strategy.name)]).spawn(3)
    rng = np.random.default_rng(select_seq)
    model_seed = int(model_seq.generate_state(1)[0])
    forest_seed = int(forest_seq.generate_state(1)[0])
    reasoning = strategy.uses_closure
    closure = Closure(range(len(domain.concepts)))
    queried = np.zeros(len(pool), dtype=bool)
    clock = 0.0

    def ask(row: int) -> None:
        nonlocal clock
        queried[row] = True
        if reasoning:
            start = time.perf_counter()
            closure.add_label(int(pool[row, 0]), int(pool[row, 1]), bool(truth[row]))
            clock += time.perf_counter() - start

    def train_values() -> np.ndarray:
        if reasoning:
            return closure.values(pool[:, 0], pool[:, 1])
        return np.where(queried, truth.astype(np.int8), np.int8(-1))

    for row in split.seeds:
        ask(int(row))
    points: list[Point] = []
    last: Point | None = None
    models: deque = deque(maxlen=model_lag + 1)  # models[0] is the one trained model_lag ago
    for asked in range(queries + 1):
        values = train_values()
        labeled = values >= 0
        candidates = ~queried & ~labeled if reasoning else ~queried
        if asked % eval_every == 0 or asked == queries:
            if last is None or last.labeled != int(labeled.sum()):  # else the state is unchanged
                y_lab = values[labeled].astype(np.int64)
                if reasoning:
                    auc, consistent = _aucs(forest_trees, forest_seed, X[labeled], y_lab,
                                            X_test, y_test, closure, pool, X, test_pairs)
                else:
                    deduced = (closure.values(test_pairs[:, 0], test_pairs[:, 1]) if reasoning
                               else np.full(len(test_pairs), -1, dtype=np.int8))
                    auc = _auc(forest_trees, forest_seed, X[labeled], y_lab, X_test, y_test,
                               deduced)
                    consistent = float("nan")
                last = Point(asked, int(labeled.sum()), auc, clock, consistent)
            points.append(Point(asked, last.labeled, last.auc, clock, last.auc_consistent))
        if asked == queries:
            break
        if not candidates.any():
            continue  # every train pair is labeled: nothing left to ask
        inputs = model_inputs(strategy.family, pool, X, values)
        models.append(fit_model(strategy.family, inputs[labeled], values[labeled],
                                random_state=model_seed, estimator=estimator)
                      if strategy.needs_model else None)
        chosen = select(strategy, closure=closure if reasoning else None, pool=pool, X=X,
                        candidates=candidates, model=models[0], random_state=rng)
        ask(int(chosen.rows[0]))
    return points


# ---------------------------------------------------------------------------- many runs
@lru_cache(maxsize=8)
def _domain(folder: str, name: str) -> Domain:
    return load_domain(folder, name)


def _limit_threads() -> None:
    """One BLAS/OpenMP thread per worker: the parallelism is across runs."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return
    threadpool_limits(1)


@dataclass(frozen=True)
class Task:
    """One run of :func:`run_tasks`: a strategy on a repeat of a domain read from ``folder``."""

    folder: str
    domain: str
    strategy: str
    repeat: int
    seed: int
    profile: Profile
    model_lag: int = 0


def _run_task(task: Task) -> tuple[Task, list[Point], float]:
    start = time.perf_counter()
    points = run_strategy(_domain(task.folder, task.domain), task.strategy, repeat=task.repeat,
                          seed=task.seed, queries=task.profile.queries,
                          eval_every=task.profile.eval_every,
                          forest_trees=task.profile.forest_trees, model_lag=task.model_lag)
    return task, points, time.perf_counter() - start


def _choose_domains(folder: Path, domain: str, quick: bool) -> list[str]:
    available = domain_names(folder)
    if not available:
        raise FileNotFoundError(f"no DOMAIN.pairs/DOMAIN.features files in {folder}")
    if domain.strip().lower() == "all":
        if quick:  # the smallest domain is enough for a smoke test
            return [min(available, key=lambda n: (folder / f"{n}.pairs").stat().st_size)]
        return available
    names = [n.strip() for n in domain.split(",") if n.strip()]
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown domain(s) {', '.join(unknown)} in {folder}; "
                         f"available: {', '.join(available)}, or 'all'")
    return names


def _choose_strategies(strategies: str | Iterable[str]) -> list[str]:
    items = strategies.split(",") if isinstance(strategies, str) else list(strategies)
    if [s.strip().lower() for s in items] == ["all"]:
        return list(ALL_STRATEGIES)
    chosen = [parse_strategy(s) for s in items if s.strip()]
    return [s for s in ALL_STRATEGIES if s in chosen]


def run_tasks(tasks: Sequence[Task], jobs: int, label: str,
              progress: bool) -> list[tuple[Task, list[Point], float]]:
    """Every task's points and seconds, in completion order, over ``jobs`` worker processes.

    One BLAS thread per worker; a tqdm bar named ``label`` counts the finished runs.
    """
    bar = tqdm(total=len(tasks), desc=label, unit="run", disable=not progress)
    results = []
    try:
        if jobs == 1:
            _limit_threads()  # BLAS threads only stall the model fits on a busy machine
            for task in tasks:
                results.append(_run_task(task))
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=jobs, initializer=_limit_threads) as pool:
                futures = [pool.submit(_run_task, task) for task in tasks]
                for future in as_completed(futures):
                    results.append(future.result())
                    bar.update()
    finally:
        bar.close()
    return results


def simulate(data: str | Path, out: str | Path, domain: str = "all",
             strategies: str | Iterable[str] = "all", repeats: int = 20,
             queries: int | None = 150, eval_every: int = 10, seed: int = 0, jobs: int = 0,
             quick: bool = False, progress: bool = True, model_lag: int = 0,
             mode: str = "auc") -> Path:
    """Run the experiment and write its curves, summary, timing and plots into ``out``.

    Parameters
    ----------
    data : path
        Folder with ``DOMAIN.pairs`` and ``DOMAIN.features``.
    out : path
        Created if missing.
    domain : str
        A domain name, a comma list, or ``"all"``.
    strategies : str or iterable of str
        A comma list of strategy names, or ``"all"``.
    repeats, queries, eval_every, seed : int
        See :func:`run_strategy`.
    jobs : int
        Worker processes; 0 means every core.
    quick : bool
        Cap the profile at :data:`QUICK` and, for ``domain="all"``, run the smallest domain only.
    progress : bool
        Show a progress bar per domain.
    model_lag : int
        Queries the strategy's model lags behind the labels (see :func:`run_strategy`).
    mode : str
        ``"auc"``: the paper's protocol (above). ``"coverage"``: ask until every pool pair is
        decided (:func:`reasoning.coverage.simulate_coverage`; ``queries`` None means no cap,
        ``eval_every`` and ``model_lag`` do not apply).

    Returns
    -------
    Path
        The folder ``out``.
    """
    if mode == "coverage":
        from reasoning.coverage import simulate_coverage

        return simulate_coverage(data, out, domain=domain, strategies=strategies,
                                 repeats=repeats, queries=queries, seed=seed, jobs=jobs,
                                 quick=quick, progress=progress)
    if mode != "auc":
        raise ValueError(f"unknown mode {mode!r}; valid: auc, coverage")
    queries = 150 if queries is None else queries
    folder, out = Path(data), Path(out)
    profile = Profile(repeats, queries, eval_every, FOREST_TREES)
    if quick:
        profile = Profile(min(repeats, QUICK.repeats), min(queries, QUICK.queries),
                          min(eval_every, QUICK.eval_every), QUICK.forest_trees)
    if profile.repeats < 1 or profile.queries < 0 or profile.eval_every < 1 or model_lag < 0:
        raise ValueError("repeats and eval_every must be at least 1, queries and model_lag at "
                         "least 0")
    names = _choose_domains(folder, domain, quick)
    chosen = _choose_strategies(strategies)
    if not chosen:
        raise ValueError("no strategy chosen")
    jobs = jobs if jobs > 0 else (os.cpu_count() or 1)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    runs: list[dict] = []
    timing: list[dict] = []
    for name in names:
        tasks = [Task(str(folder), name, s, r, seed, profile, model_lag)
                 for r in range(profile.repeats) for s in chosen]
        start = time.perf_counter()
        results = run_tasks(tasks, jobs, name, progress)
        wall = time.perf_counter() - start
        for task, points, seconds in results:
            rows.extend({"domain": name, "strategy": task.strategy, "repeat": task.repeat,
                         "queries": p.queries, "labeled": p.labeled, "auc": p.auc,
                         "closure_seconds": p.closure_seconds,
                         "auc_consistent": p.auc_consistent} for p in points)
            runs.append({"domain": name, "strategy": task.strategy, "repeat": task.repeat,
                         "seconds": seconds,
                         "closure_seconds": points[-1].closure_seconds if points else 0.0})
        timing.append({"domain": name, "runs": len(tasks), "jobs": jobs, "wall_seconds": wall,
                       "run_seconds": sum(r["seconds"] for r in runs if r["domain"] == name)})
        # after every domain, so that a long run that is cut short keeps what it finished
        report.write_outputs(out, rows, runs, timing, domains=names)
    return out
