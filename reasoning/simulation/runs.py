"""Many runs: the process-pool driver both modes share, and what they choose to run.

A task is a small picklable object with a ``run()`` method (one strategy on one repeat of a
domain, see :class:`reasoning.simulation.auc.Task` and
:class:`reasoning.simulation.coverage.Task`); :func:`run_tasks` runs them in worker processes
with one BLAS thread each and returns every result with its seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tqdm import tqdm

from reasoning import report
from reasoning.data import Domain, domain_names, load_domain
from reasoning.simulation.loop import Question
from reasoning.strategies import ALL_STRATEGIES, parse_strategy

__all__ = [
    "QUESTION_FIELDS",
    "Task",
    "choose_domains",
    "choose_strategies",
    "cached_domain",
    "limit_threads",
    "question_rows",
    "run_tasks",
    "write_questions",
]

QUESTION_FIELDS = ("domain", "mode", "strategy", "repeat", "i", "a", "b")
"""The columns of ``questions.csv``: every question a strategy chose (``a``, ``b`` the concept
indices of the pool pair, ``i`` its number in the run from 0; seed questions left out)."""


class Task(Protocol):
    """One run: picklable, and ``run()`` gives its result."""

    def run(self) -> Any: ...


T = TypeVar("T", bound=Task)


@lru_cache(maxsize=8)
def cached_domain(folder: str, name: str) -> Domain:
    """:func:`reasoning.data.load_domain`, read once per worker process."""
    return load_domain(folder, name)


def limit_threads() -> None:
    """One BLAS/OpenMP thread per worker: the parallelism is across runs."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return
    threadpool_limits(1)


def _timed(task: T) -> tuple[T, Any, float]:
    start = time.perf_counter()
    result = task.run()
    return task, result, time.perf_counter() - start


def run_tasks(tasks: Sequence[T], jobs: int, label: str, progress: bool,
              on_result: Callable[[T, Any, float], None] | None = None
              ) -> list[tuple[T, Any, float]]:
    """Every task's result and seconds, in completion order, over ``jobs`` worker processes.

    One BLAS thread per worker; a tqdm bar named ``label`` counts the finished runs;
    ``on_result`` is called with each one as it finishes (to write it at once).
    """
    bar = tqdm(total=len(tasks), desc=label, unit="run", disable=not progress)
    results = []
    try:
        if jobs == 1:
            limit_threads()  # BLAS threads only stall the model fits on a busy machine
            for task in tasks:
                results.append(_timed(task))
                if on_result is not None:
                    on_result(*results[-1])
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=jobs, initializer=limit_threads) as pool:
                futures = [pool.submit(_timed, task) for task in tasks]
                for future in as_completed(futures):
                    results.append(future.result())
                    if on_result is not None:
                        on_result(*results[-1])
                    bar.update()
    finally:
        bar.close()
    return results


def choose_domains(folder: Path, domain: str, quick: bool) -> list[str]:
    """The domains ``domain`` names in ``folder`` (a comma list, or ``all``: with ``quick``
    the smallest one only)."""
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


def choose_strategies(strategies: str | Iterable[str]) -> list[str]:
    """The canonical names of the strategies chosen (a comma list, or ``all``), in registry
    order."""
    items = strategies.split(",") if isinstance(strategies, str) else list(strategies)
    if [s.strip().lower() for s in items] == ["all"]:
        return list(ALL_STRATEGIES)
    chosen = [parse_strategy(s) for s in items if s.strip()]
    return [s for s in ALL_STRATEGIES if s in chosen]


def question_rows(domain: str, mode: str, strategy: str, repeat: int,
                  questions: Iterable[Question]) -> list[dict]:
    """The ``questions.csv`` rows of one run."""
    return [{"domain": domain, "mode": mode, "strategy": strategy, "repeat": repeat,
             "i": q.i, "a": q.a, "b": q.b} for q in questions]


def write_questions(path: Path, rows: list[dict], domains: Sequence[str]) -> None:
    """Write ``questions.csv``: by domain, strategy (registry order), repeat and question."""
    order = {d: i for i, d in enumerate(domains)}
    rows = sorted(rows, key=lambda r: (order.get(r["domain"], 0),
                                       ALL_STRATEGIES.index(r["strategy"]), r["repeat"], r["i"]))
    report.write_csv(path, rows, QUESTION_FIELDS)
