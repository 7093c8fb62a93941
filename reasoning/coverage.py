"""Questions to a complete map: how many answers each strategy needs to decide the whole pool.

The paper measures a classifier's AUC after a fixed number of questions. What a user of the
service wants is a *complete* map for the fewest questions. This module measures that:

1. the whole pool is the ask pool (no test split); :data:`SEED_QUERIES` random pool pairs are
   asked first, the same ones for every strategy of a repeat (:func:`coverage_seeds`);
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
``oracle.csv``, ``coverage.png`` and ``coverage.md``.
"""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np
from matplotlib.figure import Figure
from tqdm import tqdm

from reasoning.closure import Closure
from reasoning.gains import candidate_gains
from reasoning.strategies import (
    ALL_STRATEGIES,
    Strategy,
    fit_model,
    get_strategy,
    model_inputs,
    select,
)

__all__ = [
    "COVERAGE_FIELDS",
    "ORACLE",
    "ORACLE_FIELDS",
    "SEED_QUERIES",
    "SHARES",
    "coverage_seeds",
    "coverage_table",
    "cover_pairs",
    "first_reaching",
    "greedy_oracle",
    "run_coverage",
    "simulate_coverage",
]

SEED_QUERIES = 20
"""Random pool pairs asked before the strategy takes over."""

SHARES = (0.5, 0.8, 0.9, 0.95, 0.99, 1.0)
"""The decided shares of the pool reported as ``q50 … q100``."""

COVERAGE_FIELDS = ("domain", "strategy", "repeat", "pool") + tuple(
    f"q{round(s * 100)}" for s in SHARES)
ORACLE_FIELDS = ("domain", "pool", "cover_pairs", "greedy_oracle")
ORACLE = "oracle"
"""The name of the greedy oracle's rows in ``coverage.csv`` (paired with the strategies)."""


def coverage_seeds(m: int, *, seed: int, repeat: int, seed_queries: int = SEED_QUERIES
                   ) -> np.ndarray:
    """The seed questions of a repeat: distinct pool rows, fixed by ``(seed, repeat)``.

    Examples
    --------
    >>> coverage_seeds(100, seed=0, repeat=1).tolist() == coverage_seeds(
    ...     100, seed=0, repeat=1).tolist()
    True
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, repeat, 7919]))
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


class _Asker:
    """The closure of the answers so far and the decided count after every question."""

    def __init__(self, pairs: np.ndarray, truth: np.ndarray, n: int) -> None:
        self.pairs, self.truth = pairs, truth
        self.closure = Closure(range(n))
        self.queried = np.zeros(len(pairs), dtype=bool)
        self.values = np.full(len(pairs), -1, dtype=np.int8)
        self.decided: list[int] = []

    def ask(self, row: int) -> None:
        self.queried[row] = True
        a, b = int(self.pairs[row, 0]), int(self.pairs[row, 1])
        if self.values[row] < 0:  # an answer to a decided pair decides nothing new
            self.closure.add_label(a, b, bool(self.truth[row]))
            self.values = self.closure.values(self.pairs[:, 0], self.pairs[:, 1])
        self.decided.append(int((self.values >= 0).sum()))

    @property
    def done(self) -> bool:
        return bool((self.values >= 0).all())


def run_coverage(pairs, X, truth, n: int, strategy: Strategy | str, *, repeat: int = 0,
                 seed: int = 0, queries: int | None = None, seed_queries: int = SEED_QUERIES,
                 estimator=None) -> np.ndarray:
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
    strategy : str
    repeat, seed : int
        The seed questions depend on both; tie-breaks and models also on the strategy.
    queries : int, optional
        The most questions after the seed questions (default: until every pair is decided).
    seed_queries : int
    estimator : classifier, optional
        Replaces the strategy's default model.

    Returns
    -------
    int array
        ``[k]``: decided pool pairs after ``k + 1`` questions, seed questions included.
    """
    strategy = get_strategy(strategy)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    X = np.asarray(X, dtype=np.float64)
    truth = np.asarray(truth, dtype=bool)
    select_seq, model_seq = np.random.SeedSequence(
        [seed, repeat, ALL_STRATEGIES.index(strategy.name), 7919]).spawn(2)
    rng = np.random.default_rng(select_seq)
    model_seed = int(model_seq.generate_state(1)[0])
    asker = _Asker(pairs, truth, n)
    for row in coverage_seeds(len(pairs), seed=seed, repeat=repeat, seed_queries=seed_queries):
        asker.ask(int(row))
    reasoning = strategy.uses_closure
    cap = math.inf if queries is None else queries
    asked = 0
    while not asker.done and asked < cap:
        if reasoning:
            labeled = asker.values >= 0
            y = asker.values[labeled]
            candidates = ~labeled
        else:  # a plain strategy learns from its own answers and may ask a decided pair
            labeled = asker.queried
            y = truth[labeled].astype(np.int8)
            candidates = ~asker.queried
        inputs = model_inputs(strategy.family, pairs, X, asker.values)
        model = (fit_model(strategy.family, inputs[labeled], y, random_state=model_seed,
                           estimator=estimator) if strategy.needs_model else None)
        chosen = select(strategy, closure=asker.closure if reasoning else None, pool=pairs,
                        X=X, candidates=candidates, model=model, random_state=rng)
        asker.ask(int(chosen.rows[0]))
        asked += 1
    return np.array(asker.decided, dtype=np.int64)


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
    asker = _Asker(pairs, truth, n)
    for row in coverage_seeds(len(pairs), seed=seed, repeat=repeat, seed_queries=seed_queries):
        asker.ask(int(row))
    covers = cover_pairs(pairs, truth)
    for row in covers.tolist():
        if asker.values[row] < 0:
            asker.ask(row)
    ones = np.ones(len(pairs))
    while not asker.done:
        rows = np.flatnonzero((asker.values < 0) & ~truth)
        _, gain_negative = candidate_gains(asker.closure, pairs[rows], pairs, ones, ones)
        asker.ask(int(rows[int(np.argmax(gain_negative))]))
    return len(covers), np.array(asker.decided, dtype=np.int64)


# ---------------------------------------------------------------------------- many runs
@dataclass(frozen=True)
class _Task:
    folder: str
    domain: str
    strategy: str  # a strategy name, or ORACLE
    repeat: int
    seed: int
    queries: int | None


def _run(task: _Task) -> tuple[_Task, int, int, np.ndarray, float]:
    from reasoning.experiment import _domain, _limit_threads

    _limit_threads()  # BLAS threads only stall the per-question model fits on a busy machine
    start = time.perf_counter()
    domain = _domain(task.folder, task.domain)
    pairs = domain.index_pairs()
    n = len(domain.concepts)
    covers = 0
    if task.strategy == ORACLE:
        covers, decided = greedy_oracle(pairs, domain.labels, n, repeat=task.repeat,
                                        seed=task.seed)
    else:
        decided = run_coverage(pairs, domain.features, domain.labels, n, task.strategy,
                               repeat=task.repeat, seed=task.seed, queries=task.queries)
    return task, len(pairs), covers, decided, time.perf_counter() - start


def _mean_ci(values: Sequence[float]) -> tuple[float, float]:
    from reasoning.report import _mean_ci as mean_ci

    return mean_ci(values)


def _cell(values: list[float]) -> str:
    if not values:
        return ""
    mean, half = _mean_ci(values)
    return f"{mean:.0f}" if math.isnan(half) else f"{mean:.0f} ± {half:.0f}"


def coverage_table(rows: list[dict], oracle: list[dict]) -> str:
    """The mean questions to each decided share (95% interval), and paired q100 differences.

    Every strategy of a repeat starts from the same seed questions, so the q100 differences
    are paired per repeat against the best (lowest mean q100) of LC-R+ and QBC-R+ present.
    """
    keys = [f"q{round(s * 100)}" for s in SHARES]
    lines: list[str] = []
    for domain in dict.fromkeys(r["domain"] for r in rows):
        items = [r for r in rows if r["domain"] == domain]
        runs = len({r["repeat"] for r in items})
        pool = items[0]["pool"]
        found = [o for o in oracle if o["domain"] == domain]
        covers = found[0]["cover_pairs"] if found else ""
        lines += [f"### {domain} (pool {pool}, {covers} cover pairs, {runs} repeats)", "",
                  "| strategy | " + " | ".join(keys) + " | q100 / oracle |",
                  "|---" * (len(keys) + 2) + "|"]
        strategies = list(dict.fromkeys(r["strategy"] for r in items))
        by = {(r["strategy"], r["repeat"]): r for r in items}
        oracle_q = [r["q100"] for r in items if r["strategy"] == ORACLE and r["q100"] != ""]
        for name in strategies:
            mine = [r for r in items if r["strategy"] == name]
            cells = [_cell([r[k] for r in mine if r[k] != ""]) for k in keys]
            done = [r["q100"] for r in mine if r["q100"] != ""]
            ratio = (f"{np.mean(done) / np.mean(oracle_q):.2f}" if done and oracle_q
                     and len(done) == len(mine) else "")
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
        lines.append("")
        baselines = [s for s in ("LC-R+", "QBC-R+") if s in strategies]
        if baselines:
            means = {}
            for name in strategies:
                done = [r["q100"] for r in items if r["strategy"] == name and r["q100"] != ""]
                means[name] = float(np.mean(done)) if done else math.inf
            best = min(baselines, key=means.__getitem__)
            lines += [f"Paired q100 differences against {best} (same seeds):", "",
                      "| strategy | q100 difference (95% CI) | relative | fewer in |",
                      "|---|---|---|---|"]
            for name in strategies:
                if name == best:
                    continue
                diff = [by[(name, r)]["q100"] - by[(best, r)]["q100"]
                        for (s, r) in by if s == name and (best, r) in by
                        and by[(name, r)]["q100"] != "" and by[(best, r)]["q100"] != ""]
                if not diff:
                    continue
                mean, half = _mean_ci(diff)
                base = means[best]
                lines.append(f"| {name} | {mean:+.1f} ± {half:.1f} | {mean / base:+.1%} | "
                             f"{sum(d < 0 for d in diff)}/{len(diff)} |")
            lines.append("")
    return "\n".join(lines)


def plot_coverage(curves: dict[tuple[str, str], list[np.ndarray]],
                  pools: dict[str, int], path: str | Path) -> None:
    """Decided share against questions, the mean over repeats per strategy; the oracle dashed."""
    domains = list(dict.fromkeys(d for d, _ in curves))
    fig = Figure(figsize=(5.4 * len(domains), 4.2), layout="constrained")
    axes = fig.subplots(1, len(domains), squeeze=False)[0]
    for ax, domain in zip(axes, domains, strict=True):
        for (d, name), runs in curves.items():
            if d != domain:
                continue
            length = max(len(r) for r in runs)
            padded = np.array([np.pad(r, (0, length - len(r)), mode="edge") for r in runs])
            share = padded.mean(axis=0) / pools[domain]
            x = np.arange(1, length + 1)
            if name == ORACLE:
                ax.plot(x, share, color="black", linestyle="--", linewidth=1.5,
                        label="greedy oracle")
            else:
                ax.plot(x, share, linewidth=1.5, label=name)
        ax.set_title(domain)
        ax.set_xlabel("questions (seed questions included)")
        ax.set_ylabel("decided share of the pool")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.savefig(path, dpi=110)


def _choose(strategies) -> list[str]:
    from reasoning.experiment import _choose_strategies

    return _choose_strategies(strategies)


def simulate_coverage(data: str | Path, out: str | Path, domain: str = "all",
                      strategies="all", repeats: int = 12, queries: int | None = None,
                      seed: int = 0, jobs: int = 0, quick: bool = False,
                      progress: bool = True) -> Path:
    """Run the coverage measure and write ``coverage.csv``, ``oracle.csv``, the plot and table.

    ``quick`` caps the repeats at 2 and, for ``domain="all"``, runs the smallest domain only.
    The other parameters are those of :func:`reasoning.experiment.simulate`; ``queries`` caps
    the questions after the seed questions (default: until every pool pair is decided).
    """
    from reasoning import report
    from reasoning.experiment import _choose_domains

    folder, out = Path(data), Path(out)
    if quick:
        repeats = min(repeats, 2)
    if repeats < 1 or (queries is not None and queries < 0):
        raise ValueError("repeats must be at least 1 and queries at least 0")
    names = _choose_domains(folder, domain, quick)
    chosen = _choose(strategies)
    if not chosen:
        raise ValueError("no strategy chosen")
    jobs = jobs if jobs > 0 else (os.cpu_count() or 1)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    oracle: list[dict] = []
    curves: dict[tuple[str, str], list[np.ndarray]] = defaultdict(list)
    pools: dict[str, int] = {}
    for name in names:
        tasks = [_Task(str(folder), name, s, r, seed, queries)
                 for r in range(repeats) for s in [ORACLE, *chosen]]
        results = []
        bar = tqdm(total=len(tasks), desc=name, unit="run", disable=not progress)
        try:
            if jobs == 1:
                for task in tasks:
                    results.append(_run(task))
                    bar.update()
            else:
                with ProcessPoolExecutor(max_workers=jobs) as pool:
                    for future in as_completed([pool.submit(_run, t) for t in tasks]):
                        results.append(future.result())
                        bar.update()
        finally:
            bar.close()
        order = {s: i for i, s in enumerate([ORACLE, *chosen])}
        results.sort(key=lambda item: (order[item[0].strategy], item[0].repeat))
        covers = []
        for task, m, n_covers, decided, _ in results:
            pools[name] = m
            curves[(name, task.strategy)].append(decided)
            row: dict = {"domain": name, "strategy": task.strategy, "repeat": task.repeat,
                         "pool": m}
            for share, key in zip(SHARES, COVERAGE_FIELDS[4:], strict=True):
                q = first_reaching(decided, m, share)
                row[key] = "" if q is None else q
            rows.append(row)
            if task.strategy == ORACLE:
                covers.append(n_covers)
        oracle_q = [r["q100"] for r in rows if r["domain"] == name and r["strategy"] == ORACLE]
        oracle.append({"domain": name, "pool": pools[name], "cover_pairs": covers[0],
                       "greedy_oracle": float(np.mean(oracle_q))})
        # after every domain, so that a long run that is cut short keeps what it finished
        report.write_csv(out / "coverage.csv", rows, COVERAGE_FIELDS)
        report.write_csv(out / "oracle.csv", oracle, ORACLE_FIELDS)
        (out / "coverage.md").write_text(coverage_table(rows, oracle), encoding="utf-8")
        plot_coverage(curves, pools, out / "coverage.png")
    return out
