"""Questions to a complete map: how many answers each strategy needs to decide the whole pool.

The paper measures a classifier's AUC after a fixed number of questions. What a user of the
service wants is a *complete* map for the fewest questions. This module measures that:

1. the whole pool is the ask pool (no test split);
   :data:`~reasoning.simulation.loop.SEED_QUERIES` random pool pairs are asked first, the same
   ones for every strategy of a repeat (:func:`coverage_seeds`);
2. the strategy then asks undecided pool pairs, the oracle answers with the truth, and the
   closure of every answer is kept (for every strategy: a plain strategy does not *use* it, but
   what its answers decide is decided all the same), until every pool pair is decided or the
   cap on questions is reached (:func:`run_coverage`);
3. ``q50 … q100``: the questions asked, seed questions included, when that share of the pool
   was first decided (:func:`first_reaching`).

The **greedy oracle** (:func:`greedy_oracle`) knows the truth: from the same seeds it asks every
cover pair of the positive relation (the transitive reduction of the positive pool pairs: no
strategy can avoid them, since nothing else can decide them), then, again and again, the
true-negative pool pair whose answer decides the most undecided pool pairs. It is greedy, not
optimal: a strategy may in principle beat it, never the cover pairs.

:func:`simulate_coverage` runs every (domain, strategy, repeat) and writes ``coverage.csv``,
``oracle.csv``, ``coverage.png`` and ``coverage.md``
(:mod:`reasoning.simulation.coverage_report`).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import numpy as np

from reasoning import report
from reasoning.gains import candidate_gains
from reasoning.simulation.coverage_report import (
    COVERAGE_FIELDS,
    ORACLE,
    ORACLE_FIELDS,
    SHARES,
    coverage_table,
    plot_coverage,
)
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
    "CoverageRun",
    "Task",
    "coverage_seeds",
    "cover_pairs",
    "first_reaching",
    "greedy_oracle",
    "run_coverage",
    "simulate_coverage",
]

_SALT = 7919
"""Mixed into the coverage runs' seeds, so that they differ from the AUC runs' of a repeat."""


def coverage_seeds(m: int, *, seed: int, repeat: int, seed_queries: int = SEED_QUERIES
                   ) -> np.ndarray:
    """The seed questions of a repeat: distinct pool rows, fixed by ``(seed, repeat)``.

    Examples
    --------
    >>> coverage_seeds(100, seed=0, repeat=1).tolist() == coverage_seeds(
    ...     100, seed=0, repeat=1).tolist()
    True
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, repeat, _SALT]))
    return rng.choice(m, min(seed_queries, m), replace=False)


def first_reaching(decided: Sequence[int] | np.ndarray, pool: int, share: float) -> int | None:
    """The questions asked when at least ``share`` of ``pool`` was first decided (None: never).

    ``decided[k]`` is the number of decided pool pairs after ``k + 1`` questions.

    Examples
    --------
    >>> first_reaching([2, 5, 9, 10], 10, 0.5), first_reaching([2, 5, 9], 10, 1.0)
    (2, None)
    """
    need = math.ceil(share * pool - 1e-9)
    hits = np.flatnonzero(np.asarray(decided) >= need)
    return int(hits[0]) + 1 if len(hits) else None


def _seeded(pairs, truth, n: int, *, seed: int, repeat: int, seed_queries: int) -> Asking:
    """A run that keeps the closure, with the seed questions of the repeat asked."""
    asking = Asking(pairs, TruthOracle(truth), n, keep_closure=True)
    for row in coverage_seeds(len(pairs), seed=seed, repeat=repeat, seed_queries=seed_queries):
        asking.ask(int(row))
    return asking


def run_coverage(pairs, X, truth, n: int, strategy: Strategy | str, *, repeat: int = 0,
                 seed: int = 0, queries: int | None = None, seed_queries: int = SEED_QUERIES,
                 estimator=None, log: list[Question] | None = None) -> np.ndarray:
    """Ask by ``strategy`` until every pool pair is decided; the decided count per question.

    Parameters
    ----------
    pairs : array of shape (m, 2)
        The pool as concept indices in ``range(n)``.
    X : array of shape (m, f)
        Features of the pool pairs (for the strategy's model).
    truth : bool array of shape (m,)
    n : int
        The number of concepts.
    strategy : Strategy or str
    repeat, seed : int
        The seed questions depend on both; tie-breaks and models also on the strategy.
    queries : int, optional
        The most questions after the seed questions (default: until every pair is decided).
    seed_queries : int
    estimator : classifier, optional
        Replaces the strategy's default model.
    log : list, optional
        Receives every question the strategy chose (the seed questions left out).

    Returns
    -------
    int array
        ``[k]``: decided pool pairs after ``k + 1`` questions, seed questions included.
    """
    strategy = get_strategy(strategy)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    truth = np.asarray(truth, dtype=bool)
    select_seq, model_seq = np.random.SeedSequence(
        [seed, repeat, ALL_STRATEGIES.index(strategy.name), _SALT]).spawn(2)
    asking = _seeded(pairs, truth, n, seed=seed, repeat=repeat, seed_queries=seed_queries)
    chooser = Chooser(strategy, np.asarray(X, dtype=np.float64),
                      np.random.default_rng(select_seq), int(model_seq.generate_state(1)[0]),
                      estimator)
    ask_by_strategy(asking, chooser, queries=math.inf if queries is None else queries,
                    until_complete=True, log=log)
    return np.array(asking.decided, dtype=np.int64)


def cover_pairs(pairs, truth) -> np.ndarray:
    """The pool rows of the cover pairs: the transitive reduction of the positive pool pairs."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    truth = np.asarray(truth, dtype=bool)
    graph = nx.DiGraph()
    graph.add_edges_from(map(tuple, pairs[truth].tolist()))
    reduction = nx.transitive_reduction(graph)
    return np.array([r for r in np.flatnonzero(truth).tolist()
                     if reduction.has_edge(int(pairs[r, 0]), int(pairs[r, 1]))], dtype=np.int64)


def greedy_oracle(pairs, truth, n: int, *, repeat: int = 0, seed: int = 0,
                  seed_queries: int = SEED_QUERIES) -> tuple[int, np.ndarray]:
    """The cover pairs' count and the greedy oracle's decided count per question.

    From the seed questions of the repeat, ask every cover pair not yet decided, then the
    true-negative pool pair whose negative answer decides the most undecided pool pairs (the
    lowest row on ties), until every pool pair is decided.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    truth = np.asarray(truth, dtype=bool)
    asking = _seeded(pairs, truth, n, seed=seed, repeat=repeat, seed_queries=seed_queries)
    covers = cover_pairs(pairs, truth)
    for row in covers.tolist():
        if asking.values[row] < 0:
            asking.ask(row)
    ones = np.ones(len(pairs))
    while not asking.complete:
        assert asking.closure is not None
        rows = np.flatnonzero((asking.values < 0) & ~truth)
        _, gain_negative = candidate_gains(asking.closure, pairs[rows], pairs, ones, ones)
        asking.ask(int(rows[int(np.argmax(gain_negative))]))
    return len(covers), np.array(asking.decided, dtype=np.int64)


# ---------------------------------------------------------------------------- many runs
@dataclass(frozen=True)
class CoverageRun:
    """What one coverage task gives: the pool's size, the cover pairs (the oracle's run only),
    the decided count per question and the questions the strategy chose."""

    pool: int
    covers: int
    decided: np.ndarray
    questions: list[Question] = field(default_factory=list)


@dataclass(frozen=True)
class Task:
    """One run of :func:`simulate_coverage`: a strategy (None: the greedy oracle) on a repeat
    of a domain read from ``folder``."""

    folder: str
    domain: str
    strategy: Strategy | None
    repeat: int
    seed: int
    queries: int | None

    @property
    def name(self) -> str:
        return ORACLE if self.strategy is None else self.strategy.name

    def run(self) -> CoverageRun:
        domain = cached_domain(self.folder, self.domain)
        pairs, n = domain.index_pairs(), len(domain.concepts)
        if self.strategy is None:
            covers, decided = greedy_oracle(pairs, domain.labels, n, repeat=self.repeat,
                                            seed=self.seed)
            return CoverageRun(len(pairs), covers, decided)
        questions: list[Question] = []
        decided = run_coverage(pairs, domain.features, domain.labels, n, self.strategy,
                               repeat=self.repeat, seed=self.seed, queries=self.queries,
                               log=questions)
        return CoverageRun(len(pairs), 0, decided, questions)


@dataclass
class _Tables:
    """The rows of ``coverage.csv`` and ``oracle.csv``, and the curves of the plot."""

    rows: list[dict] = field(default_factory=list)
    oracle: list[dict] = field(default_factory=list)
    curves: dict[tuple[str, str], list[np.ndarray]] = field(
        default_factory=lambda: defaultdict(list))
    pools: dict[str, int] = field(default_factory=dict)
    questions: list[dict] = field(default_factory=list)

    def add(self, domain: str, results: list[tuple[Task, CoverageRun, float]]) -> None:
        """The results of one domain, the oracle's first, then by strategy and repeat."""
        order = {s: i for i, s in enumerate([ORACLE, *ALL_STRATEGIES])}
        results = sorted(results, key=lambda item: (order[item[0].name], item[0].repeat))
        covers = []
        for task, run, _ in results:
            self.pools[domain] = run.pool
            self.curves[(domain, task.name)].append(run.decided)
            row: dict = {"domain": domain, "strategy": task.name, "repeat": task.repeat,
                         "pool": run.pool}
            for share, key in zip(SHARES, COVERAGE_FIELDS[4:], strict=True):
                q = first_reaching(run.decided, run.pool, share)
                row[key] = "" if q is None else q
            self.rows.append(row)
            if task.strategy is None:
                covers.append(run.covers)
            else:
                self.questions += question_rows(domain, "coverage", task.name, task.repeat,
                                                run.questions)
        oracle_q = [r["q100"] for r in self.rows
                    if r["domain"] == domain and r["strategy"] == ORACLE]
        self.oracle.append({"domain": domain, "pool": self.pools[domain],
                            "cover_pairs": covers[0], "greedy_oracle": float(np.mean(oracle_q))})

    def write(self, out: Path, domains: list[str], log_questions: bool) -> None:
        report.write_csv(out / "coverage.csv", self.rows, COVERAGE_FIELDS)
        report.write_csv(out / "oracle.csv", self.oracle, ORACLE_FIELDS)
        (out / "coverage.md").write_text(coverage_table(self.rows, self.oracle),
                                         encoding="utf-8")
        plot_coverage(self.curves, self.pools, out / "coverage.png")
        if log_questions:
            write_questions(out / "questions.csv", self.questions, domains)


def simulate_coverage(data: str | Path, out: str | Path, domain: str = "all",
                      strategies="all", repeats: int = 12, queries: int | None = None,
                      seed: int = 0, jobs: int = 0, quick: bool = False,
                      progress: bool = True, log_questions: bool = False) -> Path:
    """Run the coverage measure and write ``coverage.csv``, ``oracle.csv``, the plot and table.

    ``quick`` caps the repeats at 2 and, for ``domain="all"``, runs the smallest domain only.
    The other parameters are those of :func:`reasoning.simulation.simulate`; ``queries`` caps
    the questions after the seed questions (default: until every pool pair is decided).
    """
    folder, out = Path(data), Path(out)
    if quick:
        repeats = min(repeats, 2)
    if repeats < 1 or (queries is not None and queries < 0):
        raise ValueError("repeats must be at least 1 and queries at least 0")
    names = choose_domains(folder, domain, quick)
    chosen = [get_strategy(name) for name in choose_strategies(strategies)]
    if not chosen:
        raise ValueError("no strategy chosen")
    jobs = jobs if jobs > 0 else (os.cpu_count() or 1)
    out.mkdir(parents=True, exist_ok=True)
    tables = _Tables()
    for name in names:
        tasks = [Task(str(folder), name, s, r, seed, queries)
                 for r in range(repeats) for s in [None, *chosen]]
        tables.add(name, run_tasks(tasks, jobs, name, progress))
        # after every domain, so that a long run that is cut short keeps what it finished
        tables.write(out, names, log_questions)
    return out
