"""The click loop of an annotation tool against a real `sporal serve`, call by call.

One client, sequential, over keep-alive HTTP, does what a labeling tool does for each question:

1. ``GET /projects/{pid}/next?strategy=LC-R+&annotator=bench``: which pair to show;
2. ``GET /projects/{pid}/pairs/status?a=..&b=..``: that pair's status and prediction, for the
   screen;
3. ``POST /projects/{pid}/labels``: the annotator's answer, here the true label of the pair;

until ``next`` has no question left (the pool is decided) or the question cap is reached.
With ``--team K`` the project runs the ``consensus`` policy and K annotators take turns
(``bench-0``, ``bench-1``, ...), each answering wrongly with probability ``--noise``; every
25 questions the loop also reads ``GET /projects/{pid}/agreement`` (call ``agreement``).
Workloads: ``precalculus`` (or any AL-CPL domain: its whole pool, ground truth from the data)
and ``generated`` (a layered order of 2,000 concepts, about 5 drawn parents each, 38 features,
a 20,000-pair pool, 1,000 questions).

The models behind ``next`` and ``pairs/status`` may be trained in the background and lag the
labels; an answer's ``model.labels_behind`` says by how many. It is recorded when present, and
as ``null`` (``"model": null``) or ``missing`` (no model, or no ``labels_behind``) otherwise, so
that the same script measures the service before and after that change.

Prints per workload the mean/p50/p99/max of each call, questions per second, the distribution
of ``labels_behind`` for next's and for pairs/status's model, and PASS/FAIL against the targets;
``/health`` p50 of the same client is the baseline. Writes to ``--out``: ``calls.csv`` (one row
per call), ``summary.md``, ``latency.png`` and the server's log.

Run::

    python -m benchmarks.labeling_loop --data ../shared/datasets/al-cpl --out /tmp/bench_loop
    python -m benchmarks.labeling_loop --quick --out /tmp/bench_loop_quick   # smoke, seconds
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm import tqdm

from benchmarks.serving import Server, create_pool_project, free_port
from reasoning.data import domain_names, load_domain
from reasoning.generate import random_order

__all__ = ["COLUMNS", "TARGETS", "Workload", "main", "run_loop"]

ROOT = Path(__file__).resolve().parents[1]
STRATEGY = "LC-R+"
ANNOTATOR = "bench"
CALLS = ("next", "status", "label", "agreement")
AGREEMENT_EVERY = 25
COLUMNS = ["workload", "i", "call", "ms", "http", "labels_behind", "model", "a", "b", "answer"]
GENERATED_FEATURES = 38
GENERATED_POSITIVE_SHARE = 0.3  # about AL-CPL's share; a uniform pool would be ~9% positive
HEALTH_CALLS = 200


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Workload:
    """A pool to label: concepts, pairs with features, the truth, and the question cap."""

    name: str
    kind: str  # "domain" (AL-CPL) or "generated": which targets apply
    concepts: list[str]
    pairs: list[tuple[str, str]]
    features: np.ndarray
    truth: dict[tuple[str, str], bool]
    max_questions: int | None

    def describe(self) -> str:
        positive = sum(self.truth.values())
        cap = "whole pool" if self.max_questions is None else f"at most {self.max_questions:,}"
        return (f"{len(self.concepts):,} concepts, {len(self.pairs):,} pool pairs "
                f"({positive:,} positive), {self.features.shape[1]} features, {cap} questions")


def domain_workload(data: Path, name: str, max_questions: int | None) -> Workload:
    """An AL-CPL domain: its pool in the project's direction and its labels as the truth."""
    domain = load_domain(data, name)
    truth = {pair: bool(v) for pair, v in zip(domain.pairs, domain.labels, strict=True)}
    return Workload(name, "domain", domain.concepts, domain.pairs, domain.features, truth,
                    max_questions)


def generated_workload(n: int, pool: int, max_questions: int | None, seed: int) -> Workload:
    """A layered order (about 5 drawn parents per concept) with features that carry signal.

    Concept ``i`` is named ``concept-{i:04d}``. The first three features lean towards the
    truth, the rest are noise, so the classifiers have something to learn.
    """
    order = random_order(n, pool, degree=5.0, depth=6,
                         positive_share=GENERATED_POSITIVE_SHARE, random_state=seed)
    names = [f"concept-{i:04d}" for i in order.concepts]
    pairs = [(names[a], names[b]) for a, b in order.pool.tolist()]
    rng = np.random.default_rng(seed)
    features = rng.random((len(pairs), GENERATED_FEATURES))
    features[:, :3] += 0.5 * order.labels[:, None]
    truth = {pair: bool(v) for pair, v in zip(pairs, order.labels, strict=True)}
    return Workload(f"generated-{n}", "generated", names, pairs, features, truth, max_questions)


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


def _model_state(body: Any) -> tuple[int | None, str]:
    """``labels_behind`` of an answer's model, and whether the model was present/null/missing."""
    if not isinstance(body, dict) or "model" not in body:
        return None, "missing"
    model = body["model"]
    if model is None:
        return None, "null"
    behind = model.get("labels_behind") if isinstance(model, dict) else None
    return (int(behind), "present") if behind is not None else (None, "missing")


@dataclass(frozen=True)
class Team:
    """A team in the ``consensus`` policy: ``size`` annotators taking turns, each answer wrong
    with probability ``noise`` (drawn with ``seed``)."""

    size: int
    noise: float
    seed: int = 0

    def annotator(self, question: int) -> str:
        return f"bench-{question % self.size}"


@dataclass
class LoopResult:
    """The calls of one workload's loop and how it ended."""

    workload: Workload
    rows: list[dict[str, Any]] = field(default_factory=list)
    questions: int = 0
    seconds: float = 0.0
    setup_seconds: float = 0.0
    decided: bool = False  # next ran out of questions
    finished: bool = False  # False in a checkpoint taken while the loop still runs
    error: str | None = None
    team: bool = False  # the consensus policy with a team (TEAM_TARGETS apply)

    def ms(self, call: str) -> np.ndarray:
        return np.array([r["ms"] for r in self.rows if r["call"] == call], dtype=float)

    @property
    def questions_per_second(self) -> float:
        return self.questions / self.seconds if self.seconds > 0 else 0.0


def _timed(client: httpx.Client, method: str, url: str, **kwargs: Any) -> tuple[httpx.Response,
                                                                                 float]:
    start = time.perf_counter()
    response = client.request(method, url, **kwargs)
    return response, (time.perf_counter() - start) * 1000


def run_loop(client: httpx.Client, workload: Workload, *, progress: bool = True,
             checkpoint: Callable[[LoopResult], object] | None = None,
             checkpoint_every: int = 100, team: Team | None = None) -> LoopResult:
    """Create the workload's project, then ask, look up and answer until done or capped.

    A ``next`` or ``pairs/status`` answer other than 200, or a label POST other than 2xx, ends
    the loop (its row is kept) and is reported in :attr:`LoopResult.error`. ``checkpoint`` is
    called with the result so far every ``checkpoint_every`` questions.
    """
    result = LoopResult(workload, team=team is not None)
    start = time.perf_counter()
    pid = create_pool_project(client, f"loop-{workload.name}", workload.concepts,
                              workload.pairs, workload.features)
    base = f"/projects/{pid}"
    if team is not None:
        client.patch(base, json={"policy": "consensus"}).raise_for_status()
    rng = np.random.default_rng(team.seed if team is not None else 0)
    result.setup_seconds = time.perf_counter() - start
    cap = workload.max_questions
    bar = tqdm(total=cap or len(workload.pairs), desc=workload.name, unit="q",
               disable=not progress, file=sys.stderr)

    def record(call: str, response: httpx.Response, ms: float, a: str = "", b: str = "",
               answer: str = "", body: Any = None) -> None:
        behind, state = _model_state(body) if call != "label" else (None, "")
        result.rows.append({"workload": workload.name, "i": result.questions, "call": call,
                            "ms": round(ms, 3), "http": response.status_code,
                            "labels_behind": "" if behind is None else behind, "model": state,
                            "a": a, "b": b, "answer": answer})

    loop_start = time.perf_counter()
    try:
        while cap is None or result.questions < cap:
            annotator = ANNOTATOR if team is None else team.annotator(result.questions)
            response, ms = _timed(client, "GET", f"{base}/next",
                                  params={"strategy": STRATEGY, "annotator": annotator})
            body = response.json() if response.status_code == 200 else None
            queries = body["queries"] if body else []
            a, b = (queries[0]["a"], queries[0]["b"]) if queries else ("", "")
            record("next", response, ms, a, b, str(body["undecided"]) if body else "", body)
            if body is None:
                result.error = f"next: {response.status_code} {response.text[:300]}"
                break
            if not queries:
                result.decided = True
                break

            response, ms = _timed(client, "GET", f"{base}/pairs/status", params={"a": a, "b": b})
            body = response.json() if response.status_code == 200 else None
            record("status", response, ms, a, b, body["status"] if body else "", body)
            if body is None:
                result.error = f"pairs/status: {response.status_code} {response.text[:300]}"
                break

            value = workload.truth[(a, b)]
            if team is not None and rng.random() < team.noise:
                value = not value
            label = "positive" if value else "negative"
            response, ms = _timed(client, "POST", f"{base}/labels",
                                  json={"a": a, "b": b, "label": label, "annotator": annotator})
            record("label", response, ms, a, b, label)
            if not response.is_success:
                result.error = f"label ({a}, {b}): {response.status_code} {response.text[:300]}"
                break
            result.questions += 1
            if team is not None and result.questions % AGREEMENT_EVERY == 0:
                response, ms = _timed(client, "GET", f"{base}/agreement")
                record("agreement", response, ms)
                if response.status_code != 200:
                    result.error = f"agreement: {response.status_code} {response.text[:300]}"
                    break
            bar.update(1)
            if checkpoint is not None and result.questions % checkpoint_every == 0:
                result.seconds = time.perf_counter() - loop_start
                checkpoint(result)
            bar.set_postfix(undecided=next(r["answer"] for r in reversed(result.rows)
                                           if r["call"] == "next"), refresh=False)
    finally:
        result.seconds = time.perf_counter() - loop_start
        bar.close()
    result.finished = True
    return result


def measure_health(client: httpx.Client, calls: int = HEALTH_CALLS) -> list[dict[str, Any]]:
    """``GET /health`` over the same client: the floor of one round trip through the stack."""
    rows = []
    for i in range(calls):
        response, ms = _timed(client, "GET", "/health")
        response.raise_for_status()
        rows.append({"workload": "baseline", "i": i, "call": "health", "ms": round(ms, 3),
                     "http": response.status_code, "labels_behind": "", "model": "", "a": "",
                     "b": "", "answer": ""})
    return rows


# --------------------------------------------------------------------------------------------
# Figures and targets
# --------------------------------------------------------------------------------------------


def latency_stats(values: np.ndarray) -> dict[str, float]:
    if len(values) == 0:
        return {"n": 0, "mean": math.nan, "p50": math.nan, "p99": math.nan, "max": math.nan}
    p50, p99 = np.percentile(values, [50, 99])
    return {"n": len(values), "mean": float(values.mean()), "p50": float(p50),
            "p99": float(p99), "max": float(values.max())}


def behind_stats(result: LoopResult, call: str) -> dict[str, Any]:
    """min/median/p90/max of ``labels_behind`` over the call's answers; null and missing counts."""
    rows = [r for r in result.rows if r["call"] == call]
    values = np.array([r["labels_behind"] for r in rows if r["model"] == "present"], dtype=float)
    stats: dict[str, Any] = {"n": len(values),
                             "null": sum(r["model"] == "null" for r in rows),
                             "missing": sum(r["model"] == "missing" for r in rows)}
    if len(values):
        stats.update(zip(("min", "median", "p90", "max"),
                         np.percentile(values, [0, 50, 90, 100]).tolist(), strict=True))
    return stats


@dataclass(frozen=True)
class Target:
    """One target of the issue: a figure of a workload kind, ``<=`` or ``>=`` a limit."""

    kinds: tuple[str, ...]
    figure: str
    op: str
    limit: float
    unit: str

    def check(self, figures: dict[str, float | None]) -> tuple[str, str]:
        value = figures.get(self.figure)
        if value is None or math.isnan(value):
            return "FAIL", "not measured (the service reported no such figure)"
        ok = value <= self.limit if self.op == "<=" else value >= self.limit
        return ("PASS" if ok else "FAIL"), f"{value:.1f} {self.unit}"

    def __str__(self) -> str:
        return f"{self.figure} {self.op} {self.limit:g} {self.unit}".strip()


TARGETS = [
    Target(("domain", "generated"), "status p50", "<=", 10, "ms"),
    Target(("domain", "generated"), "status p99", "<=", 50, "ms"),
    Target(("domain", "generated"), "label p50", "<=", 10, "ms"),
    Target(("domain",), "next p50", "<=", 30, "ms"),
    Target(("generated",), "next p50", "<=", 150, "ms"),
    Target(("domain",), "questions/s", ">=", 15, "q/s"),
    Target(("domain",), "next labels_behind median", "<=", 5, ""),
]
TEAM_TARGETS = [  # the consensus policy (--team)
    Target(("domain",), "label p50", "<=", 20, "ms"),
    Target(("domain",), "agreement p50", "<=", 100, "ms"),
    Target(("domain",), "questions/s", ">=", 15, "q/s"),
]


def figures_of(result: LoopResult) -> dict[str, float | None]:
    figures: dict[str, float | None] = {}
    for call in CALLS:
        stats = latency_stats(result.ms(call))
        figures[f"{call} p50"], figures[f"{call} p99"] = stats["p50"], stats["p99"]
    figures["questions/s"] = result.questions_per_second
    figures["next labels_behind median"] = behind_stats(result, "next").get("median")
    return figures


def check_targets(result: LoopResult) -> list[tuple[str, str, str]]:
    """``(PASS|FAIL, target, measured)`` for every target of the workload's kind."""
    figures = figures_of(result)
    checks = []
    for target in TEAM_TARGETS if result.team else TARGETS:
        if result.workload.kind in target.kinds:
            verdict, measured = target.check(figures)
            checks.append((verdict, str(target), measured))
    return checks


def _behind_line(stats: dict[str, Any]) -> str:
    head = (f"min {stats['min']:.0f} / median {stats['median']:.0f} / p90 {stats['p90']:.0f} / "
            f"max {stats['max']:.0f} over {stats['n']}" if stats["n"] else "no value")
    return f"{head}; model null {stats['null']}, labels_behind missing {stats['missing']}"


def report(result: LoopResult, health_p50: float) -> list[str]:
    """The printed (and markdown) lines of one workload."""
    w = result.workload
    end = ("pool decided" if result.decided else
           f"stopped: {result.error}" if result.error else
           "question cap reached" if result.finished else "still running (checkpoint)")
    lines = [f"## {w.name}", "",
             f"{w.describe()}. Setup (project, concepts, pool) {result.setup_seconds:.1f} s. "
             f"{result.questions:,} questions in {result.seconds:.1f} s = "
             f"**{result.questions_per_second:.2f} questions/s**; {end}.", "",
             "| call | n | mean ms | p50 ms | p99 ms | max ms | p50 / health p50 |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for call in CALLS:
        s = latency_stats(result.ms(call))
        if call == "agreement" and not s["n"]:
            continue
        lines.append(f"| {call} | {s['n']} | {s['mean']:.1f} | {s['p50']:.1f} | {s['p99']:.1f} "
                     f"| {s['max']:.1f} | {s['p50'] / health_p50:.0f}x |")
    lines += ["", f"labels_behind, next's model: {_behind_line(behind_stats(result, 'next'))}",
              "", f"labels_behind, pairs/status's model: "
              f"{_behind_line(behind_stats(result, 'status'))}", ""]
    lines += [f"- {verdict}  {target}: {measured}" for verdict, target, measured
              in check_targets(result)]
    return [*lines, ""]


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def plot(path: Path, results: Sequence[LoopResult], health_p50: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(10, 3.6 * len(results)), squeeze=False)
    for ax, result in zip(axes[:, 0], results, strict=True):
        for call, color in zip(CALLS, ("tab:blue", "tab:orange", "tab:green", "tab:red"),
                               strict=True):
            rows = [r for r in result.rows if r["call"] == call]
            if not rows:
                continue
            ax.plot([r["i"] for r in rows], [max(r["ms"], 1e-3) for r in rows], ".",
                    markersize=2.5, color=color, label=f"{call} (p50 "
                    f"{latency_stats(result.ms(call))['p50']:.1f} ms)")
        ax.axhline(health_p50, color="grey", linestyle=":",
                   label=f"/health p50 {health_p50:.1f} ms")
        ax.set_yscale("log")
        ax.set_xlabel("question")
        ax.set_ylabel("ms")
        ax.set_title(f"{result.workload.name}: {result.questions} questions, "
                     f"{result.questions_per_second:.1f} q/s")
        ax.legend(loc="upper left", fontsize=8, markerscale=4)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _parse_generated(spec: str) -> tuple[int, int]:
    n, sep, pool = spec.partition(":")
    if not sep or int(n) < 2 or int(pool) < 1:
        raise ValueError(f"--generated wants N:POOL with N >= 2 and POOL >= 1, got {spec!r}")
    return int(n), int(pool)


def build_workloads(args: argparse.Namespace) -> list[Workload]:
    n, pool = _parse_generated(args.generated or ("60:600" if args.quick else "2000:20000"))
    workloads = []
    for name in args.workloads:
        if name == "generated":
            cap = args.max_questions or (40 if args.quick else 1000)
            workloads.append(generated_workload(n, pool, cap, args.seed))
        elif name in domain_names(args.data):
            cap = args.max_questions or (30 if args.quick else None)
            workloads.append(domain_workload(args.data, name, cap))
        else:
            raise SystemExit(f"unknown workload {name!r}: 'generated' or an AL-CPL domain of "
                             f"{args.data} ({', '.join(domain_names(args.data)) or 'none found'})")
    return workloads


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/datasets/al-cpl",
                        help="the AL-CPL folder")
    parser.add_argument("--workloads", default=None,
                        help="comma list of 'generated' and AL-CPL domains "
                             "(default precalculus,generated; --quick: data_mining,generated)")
    parser.add_argument("--max-questions", type=int, default=None,
                        help="cap every workload's loop (default: a domain's whole pool, "
                             "1,000 on the generated order; --quick: 30 and 40)")
    parser.add_argument("--generated", default=None,
                        help="N:POOL of the generated order (default 2000:20000; --quick 60:600)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the outputs")
    parser.add_argument("--quick", action="store_true", help="small sizes, for the smoke test")
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--team", type=int, default=None, metavar="K",
                        help="consensus policy, K annotators taking turns (default: one, strict)")
    parser.add_argument("--noise", type=float, default=0.0,
                        help="with --team: each answer is wrong with this probability")
    args = parser.parse_args(argv)
    default = "data_mining,generated" if args.quick else "precalculus,generated"
    args.workloads = [w.strip() for w in (args.workloads or default).split(",") if w.strip()]
    if args.max_questions is not None and args.max_questions < 1:
        parser.error("--max-questions must be at least 1")
    if args.team is not None and args.team < 1 or not 0 <= args.noise < 0.5:
        parser.error("--team must be at least 1 and --noise in [0, 0.5)")
    return args


def _who(team: Team | None) -> str:
    if team is None:
        return f"annotator `{ANNOTATOR}` (strict policy)"
    return (f"consensus policy, {team.size} annotators taking turns, each answer wrong with "
            f"probability {team.noise:g}")


def write_outputs(out: Path, command: str, health_rows: list[dict[str, Any]],
                  results: Sequence[LoopResult], log_name: str,
                  load: tuple[float, float], team: Team | None = None) -> list[str]:
    """``calls.csv``, ``latency.png`` and ``summary.md`` of the workloads run so far."""
    health_p50 = float(np.percentile([r["ms"] for r in health_rows], 50))
    write_csv(out / "calls.csv", health_rows + [row for r in results for row in r.rows])
    plot(out / "latency.png", results, health_p50)
    head = ["# Labeling loop", "", f"`{command}`", "",
            f"One sequential client, keep-alive HTTP, strategy {STRATEGY}, "
            f"{_who(team)}; `sporal serve` on SQLite (file on disk), log `{log_name}`. "
            f"Machine: {platform.node()}, {os.cpu_count()} CPUs, load average "
            f"{load[0]:.2f} at the start and {load[1]:.2f} at the end (shared machine: "
            f"other jobs may run beside it).", "",
            f"Baseline: `GET /health` p50 **{health_p50:.2f} ms** over {len(health_rows)} calls "
            f"(same client, same process).", ""]
    lines = head + [line for result in results for line in report(result, health_p50)]
    (out / "summary.md").write_text("\n".join(lines))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every loop ran to its end, 1 when a call failed.

    The outputs are rewritten every 100 questions and after each workload, so a long run
    stopped half-way keeps what it measured.
    """
    args = parse_args(argv)
    workloads = build_workloads(args)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.labeling_loop " + " ".join(
        sys.argv[1:] if argv is None else argv)
    load_start = os.getloadavg()[0]
    results: list[LoopResult] = []
    lines: list[str] = []
    team = None if args.team is None else Team(args.team, args.noise, args.seed)
    with tempfile.TemporaryDirectory(prefix="sporal-loop-") as tmp:
        database = f"sqlite:///{Path(tmp) / 'loop.db'}"
        with Server(database, out, port=args.port or free_port()) as server, \
                httpx.Client(base_url=server.base_url, timeout=600) as client:
            health_rows = measure_health(client)
            def save(current: LoopResult | None = None) -> list[str]:
                return write_outputs(out, command, health_rows,
                                     results + ([current] if current else []),
                                     server.log_path.name, (load_start, os.getloadavg()[0]),
                                     team)

            for workload in workloads:
                results.append(run_loop(client, workload, progress=not args.no_progress,
                                        checkpoint=save, team=team))
                lines = save()
    print("\n".join(lines))
    failed = [r for r in results if r.error]
    for r in failed:
        print(f"ERROR in {r.workload.name}: {r.error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
