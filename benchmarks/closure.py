"""Benchmark of the reasoning core against the literal Theorem 1 of the paper.

Run from the repository root::

    python -m benchmarks.closure --data ../shared/datasets/al-cpl --out /tmp/bench_closure

For each domain (a real AL-CPL domain, or a generated order with ``--generated N:POOL``):

* ``closure.csv`` — a full round (the pool's labels in a random order, skipping pairs already
  decided, until every pool pair is decided) with the core and with the literal baseline, pruned
  and unpruned: ``domain,method,updates,total_s,median_update_us,p99_update_us``. A baseline run
  stops at ``--cap-seconds``; ``updates`` then says how far it got.
* ``gains.csv`` — at a few points of that round, the gain of every undecided pool pair with CNT
  weights, ours (:func:`reasoning.gains.candidate_gains`) against the literal baseline scoring
  candidate after candidate: ``domain,candidates,median_ms,literal_median_ms``. When the
  literal scoring reaches ``--gain-cap-seconds``, its time is extrapolated from the candidates
  it scored (a random sample).
* ``round.csv`` — the reasoning time of an LC-R+-style round (update, then the gain of every
  candidate with the weights of a fixed random ``p``, then the best candidate's true label, until
  the pool is decided, or ``--cap-seconds`` of reasoning; no classifier):
  ``domain,queries,reasoning_s``.
* ``closure_vs_H.png`` — update time against ``|H|`` per domain (the paper's Figure 4).
* ``scale.csv`` — generated orders (default n=1,000 / pool 10,000 and n=5,000 / pool 50,000),
  each in its own process so that the peak memory is its own:
  ``n,pool,median_update_us,gain_ms,peak_rss_mb``.

A summary table with the literal/core ratios and the targets of issue 2 is printed and written to
``summary.txt``.
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from benchmarks.literal import LiteralClosure
from reasoning.closure import Closure
from reasoning.data import domain_names, load_domain
from reasoning.gains import candidate_gains
from reasoning.generate import random_order

__all__ = ["main", "run_domain", "run_scale_case"]

METHODS = ("core", "literal", "literal_unpruned")
COLUMNS = {
    "closure.csv": ["domain", "method", "updates", "total_s", "median_update_us", "p99_update_us"],
    "gains.csv": ["domain", "candidates", "median_ms", "literal_median_ms"],
    "round.csv": ["domain", "queries", "reasoning_s"],
    "scale.csv": ["n", "pool", "median_update_us", "gain_ms", "peak_rss_mb"],
}


@dataclass
class Pool:
    """A domain as the benchmark needs it: concept count, pool index pairs and their truth."""

    name: str
    n: int
    pairs: np.ndarray  # (m, 2) int64
    labels: np.ndarray  # (m,) bool


@dataclass
class RoundRun:
    """One method's full round: per-update times and |H| before each update."""

    method: str
    times_s: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    completed: bool = True

    def row(self, domain: str) -> dict:
        us = np.array(self.times_s) * 1e6
        return {
            "domain": domain, "method": self.method, "updates": len(us),
            "total_s": round(float(us.sum()) / 1e6, 6),
            "median_update_us": round(float(np.median(us)), 2) if len(us) else float("nan"),
            "p99_update_us": round(float(np.percentile(us, 99)), 2) if len(us) else float("nan"),
        }


# --------------------------------------------------------------------------- adapters
class _CoreAdapter:
    def __init__(self, n: int) -> None:
        self.closure = Closure(range(n))

    def decided(self, a: int, b: int) -> bool:
        return self.closure.status(a, b).value is not None

    def add(self, a: int, b: int, positive: bool) -> None:
        self.closure.add_label(a, b, positive)

    def size(self) -> int:
        return len(self.closure)


class _LiteralAdapter:
    def __init__(self, prune: bool) -> None:
        self.closure = LiteralClosure(prune=prune)

    def decided(self, a: int, b: int) -> bool:
        return self.closure.value(a, b) is not None

    def add(self, a: int, b: int, positive: bool) -> None:
        self.closure.add_label(a, b, positive)

    def size(self) -> int:
        return len(self.closure)


def _full_round(
    adapter, pool: Pool, order: np.ndarray, method: str, cap_s: float, progress: bool,
    at_position: Callable[[int], None] | None = None,
) -> RoundRun:
    """Label the pool in ``order``, skipping decided pairs, timing each update (capped)."""
    run = RoundRun(method)
    start = time.perf_counter()
    pairs, labels = pool.pairs.tolist(), pool.labels.tolist()
    bar = tqdm(order.tolist(), desc=f"{pool.name} {method}", unit="pair", leave=False,
               disable=not progress)
    for position, k in enumerate(bar):
        if at_position is not None:
            at_position(position)
        a, b = pairs[k]
        if adapter.decided(a, b):
            continue
        if time.perf_counter() - start > cap_s:
            run.completed = False
            break
        size = adapter.size()
        t0 = time.perf_counter()
        adapter.add(a, b, labels[k])
        run.times_s.append(time.perf_counter() - t0)
        run.sizes.append(size)
    bar.close()
    return run


# --------------------------------------------------------------------------- gains
def _undecided(closure: Closure, pairs: np.ndarray) -> np.ndarray:
    return pairs[closure.values_by_index(pairs[:, 0], pairs[:, 1]) == -1]


def _time_core_gains(closure: Closure, pool: Pool, repeats: int) -> tuple[np.ndarray, float, tuple]:
    """Our all-candidate CNT gain: the candidates, the median time (ms) and the gains."""
    candidates = _undecided(closure, pool.pairs)
    ones = np.ones(len(pool.pairs))
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = candidate_gains(closure, candidates, pool.pairs, ones, ones)
        times.append(time.perf_counter() - t0)
    return candidates, float(np.median(times)) * 1e3, result


def _time_literal_gains(
    closure: Closure, candidates: np.ndarray, ours: tuple, cap_s: float,
    rng: np.random.Generator, progress: bool, label: str,
) -> tuple[float, int, int]:
    """The literal all-candidate gain (ms, extrapolated past the cap), scored, mismatches."""
    literal = LiteralClosure()
    literal.positive = set(closure.positive_pairs())
    literal.negative = set(closure.negative_pairs())
    pool_set = set(map(tuple, candidates.tolist()))
    gain_pos, gain_neg = ours
    scored = mismatches = 0
    elapsed = 0.0
    order = rng.permutation(len(candidates))
    for i in tqdm(order.tolist(), desc=f"{label} literal gains", unit="cand", leave=False,
                  disable=not progress):
        a, b = int(candidates[i, 0]), int(candidates[i, 1])
        t0 = time.perf_counter()
        g_pos = literal.gain(a, b, True, pool_set)
        g_neg = literal.gain(a, b, False, pool_set)
        elapsed += time.perf_counter() - t0
        scored += 1
        mismatches += (g_pos != gain_pos[i]) + (g_neg != gain_neg[i])
        if elapsed > cap_s:
            break
    total_ms = elapsed / max(scored, 1) * len(candidates) * 1e3
    return total_ms, scored, int(mismatches)


# --------------------------------------------------------------------------- LC-R+ round
def _lcr_round(pool: Pool, rng: np.random.Generator, cap_s: float,
               progress: bool) -> tuple[int, float, bool]:
    """Queries, reasoning seconds and completion of an LC-R+-style round with a fixed ``p``."""
    closure = Closure(range(pool.n))
    p = rng.random(len(pool.pairs))
    wp, wn = 1.0 - p, p
    truth = {tuple(pair): bool(v) for pair, v in zip(pool.pairs.tolist(), pool.labels,
                                                     strict=True)}
    queries, reasoning, completed = 0, 0.0, True
    bar = tqdm(total=len(pool.pairs), desc=f"{pool.name} LC-R+ round", unit="pair", leave=False,
               disable=not progress)
    while True:
        if reasoning > cap_s:
            completed = False
            break
        t0 = time.perf_counter()
        candidates = _undecided(closure, pool.pairs)
        if len(candidates) == 0:
            reasoning += time.perf_counter() - t0
            break
        gain_pos, gain_neg = candidate_gains(closure, candidates, pool.pairs, wp, wn)
        best = candidates[int(np.argmax(np.minimum(gain_pos, gain_neg)))]
        a, b = int(best[0]), int(best[1])
        closure.add_label(a, b, truth[(a, b)])
        reasoning += time.perf_counter() - t0
        queries += 1
        bar.n = len(pool.pairs) - len(candidates)
        bar.refresh()
    bar.close()
    return queries, reasoning, completed


# --------------------------------------------------------------------------- one domain
def _gain_positions(m: int, points: int) -> set[int]:
    """Where in the round to score: evenly inside it (not at the empty start)."""
    return {m * k // (points + 1) for k in range(1, points + 1)}


@dataclass
class DomainResult:
    name: str
    runs: dict[str, RoundRun]
    gains: list[dict]
    round: dict


def run_domain(pool: Pool, *, cap_s: float, gain_cap_s: float, gain_points: int, repeats: int,
               seed: int, progress: bool) -> DomainResult:
    """The closure rounds, gains and LC-R+ round of one domain."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pool.pairs))
    m = len(pool.pairs)
    points = _gain_positions(m, gain_points)
    core = _CoreAdapter(pool.n)
    gains: list[dict] = []

    def at_position(position: int) -> None:
        if position not in points:
            return
        candidates, ms, ours = _time_core_gains(core.closure, pool, repeats)
        if len(candidates) == 0:
            return
        literal_ms, scored, mismatches = _time_literal_gains(
            core.closure, candidates, ours, gain_cap_s, rng, progress, pool.name)
        gains.append({"domain": pool.name, "candidates": len(candidates),
                      "median_ms": ms, "literal_median_ms": literal_ms,
                      "_scored": scored, "_position": position,
                      "_mismatches": mismatches})

    runs = {"core": _full_round(core, pool, order, "core", float("inf"), progress, at_position)}
    for method, prune in (("literal", True), ("literal_unpruned", False)):
        runs[method] = _full_round(_LiteralAdapter(prune), pool, order, method, cap_s, progress)
    queries, reasoning, completed = _lcr_round(pool, rng, cap_s, progress)
    return DomainResult(pool.name, runs, gains,
                        {"domain": pool.name, "queries": queries,
                         "reasoning_s": round(reasoning, 4), "_completed": completed})


# --------------------------------------------------------------------------- scale
def run_scale_case(n: int, pool_size: int, *, seed: int, cap_s: float, gain_points: int,
                   positive_share: float, progress: bool) -> dict:
    """A full round on a generated order, with gains at a few points; run in its own process."""
    order = random_order(n, pool_size, positive_share=positive_share, random_state=seed)
    pool = Pool(f"generated-{n}", n, order.pool, order.labels)
    rng = np.random.default_rng(seed + 1)
    positions = rng.permutation(len(pool.pairs))
    core = _CoreAdapter(n)
    points = _gain_positions(pool_size, gain_points)
    gain_ms: list[float] = []

    def at_position(position: int) -> None:
        if position in points:
            candidates, ms, _ = _time_core_gains(core.closure, pool, repeats=1)
            if len(candidates):
                gain_ms.append(ms)

    run = _full_round(core, pool, positions, "core", cap_s, progress, at_position)
    row = run.row(pool.name)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return {"n": n, "pool": pool_size, "median_update_us": row["median_update_us"],
            "gain_ms": round(float(np.median(gain_ms)), 1) if gain_ms else float("nan"),
            "peak_rss_mb": round(peak_kb / 1024, 1), "updates": row["updates"],
            "completed": run.completed, "n_positive": order.n_positive,
            "gain_ms_all": [round(g, 1) for g in gain_ms]}


def _scale_in_subprocess(n: int, pool_size: int, args) -> dict:
    command = [sys.executable, "-m", "benchmarks.closure", "--scale-case", f"{n}:{pool_size}",
               "--seed", str(args.seed), "--cap-seconds", str(args.cap_seconds),
               "--gain-points", str(args.gain_points), "--positive-share",
               str(args.positive_share)]
    if not args.progress:
        command.append("--no-progress")
    if args.blas_threads is not None:
        command += ["--blas-threads", str(args.blas_threads)]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- output
def _write_csv(path: Path, rows: Sequence[dict]) -> None:
    columns = COLUMNS[path.name]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _plot(results: Sequence[DomainResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(len(results), 1), figsize=(5 * max(len(results), 1), 4),
                             squeeze=False)
    for ax, result in zip(axes[0], results, strict=False):
        for method, marker in zip(METHODS, "o^s", strict=True):
            run = result.runs[method]
            if run.times_s:
                ax.scatter(run.sizes, np.array(run.times_s) * 1e6, s=4, marker=marker,
                           alpha=0.5, label=method)
        ax.set_yscale("log")
        ax.set_xlabel("|H| (decided pairs) before the update")
        ax.set_ylabel("update time (µs)")
        ax.set_title(result.name)
        ax.legend(markerscale=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _ratio(run: RoundRun, core: RoundRun) -> float:
    """Literal time over core time on the same updates (the literal's prefix when capped)."""
    k = len(run.times_s)
    core_s = sum(core.times_s[:k])
    return sum(run.times_s) / core_s if core_s else float("nan")


def _speedup(gain_row: dict) -> float:
    ours = gain_row["median_ms"]
    return gain_row["literal_median_ms"] / ours if ours > 0 else float("inf")


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _summary(results: Sequence[DomainResult], scale: Sequence[dict]) -> str:
    lines = ["domain            method            updates  total_s  median_us   p99_us  "
             "literal/core"]
    for r in results:
        core = r.runs["core"]
        for method in METHODS:
            run, row = r.runs[method], r.runs[method].row(r.name)
            ratio = "" if method == "core" else f"{_ratio(run, core):9.1f}x"
            capped = "" if run.completed else "  (capped)"
            lines.append(f"{r.name:17s} {method:17s} {row['updates']:7d} {row['total_s']:8.3f} "
                         f"{row['median_update_us']:10.1f} {row['p99_update_us']:8.1f}  "
                         f"{ratio}{capped}")
    lines.append("")
    lines.append("domain            candidates  ours_ms  literal_ms  literal/ours  "
                 "(literal scored)")
    for r in results:
        for g in r.gains:
            speedup = _speedup(g)
            lines.append(f"{r.name:17s} {g['candidates']:10d} {g['median_ms']:8.2f} "
                         f"{g['literal_median_ms']:11.1f} {speedup:12.0f}x"
                         f"  ({g['_scored']}/{g['candidates']})"
                         + (f"  {g['_mismatches']} GAINS DIFFER" if g["_mismatches"] else ""))
    lines.append("")
    for r in results:
        lines.append(f"{r.name}: LC-R+ round {r.round['queries']} queries, "
                     f"reasoning {r.round['reasoning_s']:.2f} s"
                     + ("" if r.round["_completed"] else "  (capped)"))
    if scale:
        lines.append("")
        lines.append("n      pool    updates  median_us  gain_ms  peak_rss_mb  |closure+|")
        for s in scale:
            lines.append(f"{s['n']:<6d} {s['pool']:<7d} {s['updates']:7d} "
                         f"{s['median_update_us']:10.1f} {s['gain_ms']:8.1f} "
                         f"{s['peak_rss_mb']:12.1f}  {s['n_positive']}"
                         + ("" if s["completed"] else "  (capped)"))
    lines += ["", "targets (issue 2):", *_targets(results, scale)]
    return "\n".join(lines)


def _targets(results: Sequence[DomainResult], scale: Sequence[dict]) -> list[str]:
    out = []
    for r in results:
        if r.name != "precalculus" or not r.gains:
            continue
        core = r.runs["core"]
        median = core.row(r.name)["median_update_us"]
        ratio = _ratio(r.runs["literal"], core)
        gain = max(g["median_ms"] for g in r.gains)
        ratios = [_speedup(g) for g in r.gains]
        gain_ratio, worst_ratio = float(np.median(ratios)), min(ratios)
        out += [
            f"  precalculus median update {median:.1f} µs ≤ 30 µs: {_verdict(median <= 30)}",
            f"  literal (pruned) {ratio:.1f}x slower ≥ 20x: {_verdict(ratio >= 20)}",
            f"  all-candidate gain (worst point) {gain:.2f} ms ≤ 10 ms: {_verdict(gain <= 10)}",
            f"  gain {gain_ratio:.0f}x faster than literal (median point; worst "
            f"{worst_ratio:.0f}x) ≥ 50x: {_verdict(gain_ratio >= 50)}",
            f"  LC-R+ round reasoning {r.round['reasoning_s']:.2f} s ≤ 6 s: "
            f"{_verdict(r.round['reasoning_s'] <= 6 and r.round['_completed'])}",
        ]
    for s in scale:
        if s["n"] == 5000:
            out += [
                f"  n=5,000 median update {s['median_update_us'] / 1e3:.3f} ms ≤ 2 ms: "
                f"{_verdict(s['median_update_us'] <= 2000)}",
                f"  n=5,000 gain {s['gain_ms'] / 1e3:.2f} s ≤ 2 s: "
                f"{_verdict(s['gain_ms'] <= 2000)}",
                f"  n=5,000 peak memory {s['peak_rss_mb']:.0f} MB ≤ 2 GB: "
                f"{_verdict(s['peak_rss_mb'] <= 2048)}",
            ]
    return out


# --------------------------------------------------------------------------- CLI
def _pools(args) -> list[Pool]:
    pools = []
    if args.data is not None:
        names = args.domains or domain_names(args.data)
        for name in names:
            domain = load_domain(args.data, name)
            pools.append(Pool(name, len(domain.concepts), domain.index_pairs(), domain.labels))
    for spec in args.generated:
        n, size = _size(spec)
        order = random_order(n, size, positive_share=args.positive_share, random_state=args.seed)
        pools.append(Pool(f"generated-{n}", n, order.pool, order.labels))
    return pools


def _size(spec: str) -> tuple[int, int]:
    n, _, pool = spec.partition(":")
    return int(n), int(pool)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.closure", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path,
                        help="the AL-CPL folder (e.g. ../shared/datasets/al-cpl)")
    parser.add_argument("--out", type=Path, default=Path("bench_closure"))
    parser.add_argument("--domains", nargs="*", help="domains of --data to run (default: all)")
    parser.add_argument("--generated", nargs="*", default=[], metavar="N:POOL",
                        help="also run generated orders as domains")
    parser.add_argument("--cap-seconds", type=float, default=600.0,
                        help="time cap of each baseline round, LC-R+ round and scale case")
    parser.add_argument("--gain-cap-seconds", type=float, default=60.0,
                        help="time given to the literal scoring at each gain point")
    parser.add_argument("--gain-points", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5, help="timings of our gain per point")
    parser.add_argument("--scale-sizes", nargs="*", default=["1000:10000", "5000:50000"],
                        metavar="N:POOL")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--positive-share", type=float, default=0.34,
                        help="positive share of generated pools (AL-CPL has about a third)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="limit the BLAS thread pool (default: the library's own choice)")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    parser.add_argument("--scale-case", metavar="N:POOL", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.blas_threads is None:
        return _run(args)
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        return _run(args)


def _run(args) -> int:
    if args.scale_case:
        n, size = _size(args.scale_case)
        print(json.dumps(run_scale_case(n, size, seed=args.seed, cap_s=args.cap_seconds,
                                        gain_points=args.gain_points,
                                        positive_share=args.positive_share,
                                        progress=args.progress)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for pool in _pools(args):
        results.append(run_domain(pool, cap_s=args.cap_seconds, gain_cap_s=args.gain_cap_seconds,
                                  gain_points=args.gain_points, repeats=args.repeats,
                                  seed=args.seed, progress=args.progress))
        _write_outputs(args.out, results, [])  # keep what is done if a later step fails
    scale = [] if args.skip_scale else [
        _scale_in_subprocess(*_size(spec), args)
        for spec in tqdm(args.scale_sizes, desc="scale", disable=not args.progress)
    ]
    _write_outputs(args.out, results, scale)
    summary = _summary(results, scale)
    (args.out / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    print(summary)
    return 0


def _write_outputs(out: Path, results: Sequence[DomainResult], scale: Sequence[dict]) -> None:
    _write_csv(out / "closure.csv", [r.runs[m].row(r.name) for r in results for m in METHODS])
    _write_csv(out / "gains.csv", [g for r in results for g in r.gains])
    _write_csv(out / "round.csv", [r.round for r in results])
    if scale:
        _write_csv(out / "scale.csv", scale)
    _plot(results, out / "closure_vs_H.png")


if __name__ == "__main__":
    raise SystemExit(main())
