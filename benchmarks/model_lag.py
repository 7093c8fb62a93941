"""What a lagging strategy model costs in learning: paired AUC differences against lag 0.

Run from the repository root::

    python -m benchmarks.model_lag --data ../shared/datasets/al-cpl --domain data_mining \\
        --strategy LC-R+ --repeats 20 --lags 1,2,3,5,8 --out /tmp/bench_model_lag

A service that trains the strategy's model in the background chooses questions with a model
that has not seen the newest labels. Here every lag ``L`` of ``--lags`` and the synchronous
protocol (lag 0) run on the same splits, seed queries and forest seeds
(:func:`reasoning.simulation.auc.run_strategy` with ``model_lag=L``), so the per-repeat difference
``AUC(lag L) − AUC(lag 0)`` removes the split's luck. Written into ``--out``:

* ``curves.csv`` — ``lag,repeat,queries,labeled,auc`` at every evaluation point;
* ``auc.csv`` — per repeat at the marks (50, 100, 150 queries): the AUC of each lag and its
  difference to lag 0 on the same repeat;
* ``differences.csv`` and ``summary.md`` — per lag and mark the mean paired difference with its
  95% Student-t interval, and PASS when the mean lies within ``±--tolerance`` (0.005);
* ``difference.png`` — the mean paired difference (95% band) against queries, one line per lag.

``--quick`` caps the profile (2 repeats, 30 queries, 50 trees, the first two lags) for a smoke
test.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from reasoning.data import domain_names
from reasoning.report import paired_differences, write_csv
from reasoning.simulation.auc import FOREST_TREES, QUICK, Profile, Task
from reasoning.simulation.runs import run_tasks
from reasoning.strategies import get_strategy

__all__ = ["MARKS", "TOLERANCE", "main", "measure"]

MARKS = (50, 100, 150)
"""Queries at which the lagged runs must stay within the tolerance of lag 0."""

TOLERANCE = 0.005
"""Largest mean paired AUC difference (either sign) that counts as no measurable cost."""


def _lag_name(lag: int) -> str:
    return f"lag {lag}"


def measure(data: str | Path, out: str | Path, *, domain: str = "data_mining",
            strategy: str = "LC-R+", lags: Sequence[int] = (1, 2, 3, 5, 8), profile: Profile,
            seed: int = 0, jobs: int = 0, tolerance: float = TOLERANCE,
            progress: bool = True) -> list[dict]:
    """Run lag 0 and every lag on the same repeats; write the outputs; return the differences.

    Each returned row has ``lag, queries, runs, auc_difference, half_width, ahead`` (from
    :func:`reasoning.report.paired_differences`), ``passed`` (the mean within ``±tolerance``)
    and ``ci_within`` (the whole 95% interval within it).
    """
    folder, out = Path(data), Path(out)
    if domain not in domain_names(folder):
        raise ValueError(f"no domain {domain!r} in {folder}; available: "
                         f"{', '.join(domain_names(folder)) or 'none'}")
    chosen = get_strategy(strategy)
    strategy = chosen.name
    lags = sorted({int(lag) for lag in lags} - {0})
    if not lags or lags[0] < 0:
        raise ValueError("give at least one lag, every lag at least 1")
    jobs = jobs if jobs > 0 else (os.cpu_count() or 1)
    tasks = [Task(str(folder), domain, chosen, repeat, seed, profile, lag)
             for repeat in range(profile.repeats) for lag in [0, *lags]]
    start = time.perf_counter()
    results = run_tasks(tasks, jobs, f"{domain} {strategy} lags", progress)
    wall = time.perf_counter() - start

    curves: list[dict] = sorted(
        ({"lag": task.model_lag, "repeat": task.repeat, "queries": p.queries,
          "labeled": p.labeled, "auc": p.auc} for task, run, _ in results for p in run.points),
        key=lambda r: (r["lag"], r["repeat"], r["queries"]))
    rows = [{"domain": domain, "strategy": _lag_name(r["lag"]), **r} for r in curves]
    comparisons = [(_lag_name(lag), _lag_name(0)) for lag in lags]
    differences = _with_lag(paired_differences(rows, comparisons, MARKS))
    for d in differences:
        d["passed"] = abs(d["auc_difference"]) <= tolerance
        d["ci_within"] = bool(abs(d["auc_difference"]) + d["half_width"] <= tolerance)
    marks = sorted({d["queries"] for d in differences})
    every = sorted({r["queries"] for r in curves})
    band = _with_lag(paired_differences(rows, comparisons, every))

    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "curves.csv", curves, ("lag", "repeat", "queries", "labeled", "auc"))
    write_csv(out / "auc.csv", _per_repeat(curves, marks),
              ("lag", "repeat", "queries", "labeled", "auc", "difference"))
    write_csv(out / "differences.csv", differences,
              ("lag", "queries", "runs", "auc_difference", "half_width", "ahead",
               "labeled_first", "labeled_second", "passed", "ci_within"))
    text = _markdown(differences, domain=domain, strategy=strategy, profile=profile,
                     tolerance=tolerance, wall=wall, jobs=jobs)
    (out / "summary.md").write_text(text, encoding="utf-8")
    _plot(band, out / "difference.png", tolerance=tolerance,
          title=f"{domain}, {strategy}: AUC(lag) − AUC(lag 0), {profile.repeats} repeats")
    return differences


def _with_lag(differences: list[dict]) -> list[dict]:
    """The rows of :func:`~reasoning.report.paired_differences`, each with its ``lag``."""
    return [{**d, "lag": int(d["first"].removeprefix("lag "))} for d in differences]


def _per_repeat(curves: list[dict], marks: Sequence[int]) -> list[dict]:
    """The rows at ``marks`` with the difference to lag 0 of the same repeat and mark."""
    synchronous = {(r["repeat"], r["queries"]): r["auc"] for r in curves if r["lag"] == 0}
    return [{**r, "difference": r["auc"] - synchronous[(r["repeat"], r["queries"])]}
            for r in curves if r["queries"] in marks]


def _markdown(differences: list[dict], *, domain: str, strategy: str, profile: Profile,
              tolerance: float, wall: float, jobs: int) -> str:
    marks = sorted({d["queries"] for d in differences})
    by_key = {(d["lag"], d["queries"]): d for d in differences}
    lines = [f"### {domain}, {strategy}: AUC(lag L) − AUC(lag 0), paired over "
             f"{profile.repeats} repeats",
             "",
             f"Mean paired difference ± 95% Student-t half-width; PASS when the mean lies within "
             f"±{tolerance:g} at every mark. ({profile.queries} queries, evaluation every "
             f"{profile.eval_every}, {profile.forest_trees}-tree forest; {wall:.0f} s wall "
             f"with {jobs} workers.)",
             "",
             "| lag | " + " | ".join(f"@{q}" for q in marks) + " | verdict |",
             "|---" * (len(marks) + 2) + "|"]
    for lag in sorted({d["lag"] for d in differences}):
        cells, verdict = [], True
        for q in marks:
            d = by_key[(lag, q)]
            verdict &= d["passed"]
            mark = "" if d["passed"] else " ✗"
            cells.append(f"{d['auc_difference']:+.4f} ± {d['half_width']:.4f}{mark}")
        lines.append(f"| {lag} | " + " | ".join(cells) + f" | {'PASS' if verdict else 'FAIL'} |")
    inside = [d for d in differences if d["ci_within"]]
    lines += ["", f"Intervals entirely within ±{tolerance:g}: {len(inside)} of {len(differences)}."]
    return "\n".join(lines) + "\n"


def _plot(band: list[dict], path: Path, *, tolerance: float, title: str) -> None:
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    for lag in sorted({d["lag"] for d in band}):
        items = [d for d in band if d["lag"] == lag]
        q = np.array([d["queries"] for d in items])
        mean = np.array([d["auc_difference"] for d in items])
        half = np.nan_to_num(np.array([d["half_width"] for d in items]))
        line, = ax.plot(q, mean, marker=".", label=f"lag {lag}")
        ax.fill_between(q, mean - half, mean + half, color=line.get_color(), alpha=0.12)
    ax.axhline(0, color="black", linewidth=0.8)
    for sign in (-1, 1):
        ax.axhline(sign * tolerance, color="grey", linestyle="--", linewidth=0.8)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("queries")
    ax.set_ylabel("paired AUC difference (95% band)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)


def _lags(text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"lags must be a comma list of integers: {text!r}") \
            from error


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder with DOMAIN.pairs/.features")
    parser.add_argument("--domain", default="data_mining")
    parser.add_argument("--strategy", default="LC-R+")
    parser.add_argument("--lags", type=_lags, default=[1, 2, 3, 5, 8],
                        help="comma list of model lags in queries (lag 0 always runs)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--forest-trees", type=int, default=FOREST_TREES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (0: every core)")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 2 repeats, 30 queries, 50 trees, the first two lags")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    profile = Profile(args.repeats, args.queries, args.eval_every, args.forest_trees)
    lags = args.lags
    if args.quick:
        profile = Profile(min(args.repeats, QUICK.repeats), min(args.queries, QUICK.queries),
                          min(args.eval_every, QUICK.eval_every),
                          min(args.forest_trees, QUICK.forest_trees))
        lags = lags[:2]
    if profile.repeats < 1 or profile.queries < 1 or profile.eval_every < 1:
        parser.error("repeats, queries and eval-every must be at least 1")
    differences = measure(args.data, args.out, domain=args.domain, strategy=args.strategy,
                          lags=lags, profile=profile, seed=args.seed, jobs=args.jobs,
                          tolerance=args.tolerance, progress=not args.no_progress)
    summary = Path(args.out) / "summary.md"
    command = "python -m benchmarks.model_lag " + shlex.join(
        sys.argv[1:] if argv is None else list(argv))
    summary.write_text(summary.read_text(encoding="utf-8") + f"\nCommand: `{command}`\n",
                       encoding="utf-8")
    print(summary.read_text(encoding="utf-8"))
    return differences


if __name__ == "__main__":  # pragma: no cover
    main()
