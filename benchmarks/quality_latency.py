"""How long ``GET /projects/{pid}/quality`` takes at the size of an AL-CPL domain, over HTTP.

A simulated team labels the domain through a real `sporal serve` on SQLite, as
:mod:`benchmarks.team_http` runs it (``consensus``; K annotators in turn, ``next?annotator=&k=1``
then the answer, drawn from the noise model and seeds of ``sporal simulate``; the run ends when
a whole round got no question). Then ``GET quality`` is timed, each call alone, in three ways:

* ``cached``: ``--calls`` calls with nothing changed (what it computed is kept on the project's
  state, keyed on the answers and the model it read);
* ``cold``: ``--calls`` calls, each right after one more answer (a lead agreeing with one more
  asserted label: the answers move, so the decided part is computed again, while the labels,
  the closure and the model stay; the answer itself is not timed);
* ``label``: up to ``--calls`` calls, each right after one more label and a prediction model
  trained on it (a truthful answer on an undecided pool pair, then ``GET predictions`` with
  ``fresh=true``, both untimed): the decided part and the predicted one are computed again
  (none while nothing is undecided, as at the end of a whole run);
* ``restart``: the first call after the server restarted, ``--restarts`` times (the project's
  state is read again from the database, the answered pairs' served probabilities with it).

It writes ``quality_latency.json`` and ``quality_latency.md`` (p50, p99 and max per kind, the
domain's size, the answers, the machine and its 1-minute load) to ``--out``::

    nice -n 10 python -m benchmarks.quality_latency --data ../shared/datasets/al-cpl \\
        --domain precalculus --out /tmp/quality_latency
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.serving import Server, create_pool_project
from benchmarks.team_http import HttpTeam
from reasoning.data import load_domain
from reasoning.simulation.coverage import coverage_seeds
from reasoning.simulation.oracle import Team
from reasoning.simulation.team_runs import parse_team

__all__ = ["figures", "main", "time_calls"]

LEAD = "lead"  # the annotator whose agreeing answers make the cold calls cold


def time_calls(call: Callable[[], httpx.Response], before: Callable[[int], None] | None,
               calls: int) -> list[float]:
    """Milliseconds of ``calls`` calls, each alone, ``before(i)`` run untimed before each."""
    spent = []
    for i in range(calls):
        if before is not None:
            before(i)
        started = time.perf_counter()
        response = call()
        spent.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return spent


def figures(ms: list[float]) -> dict[str, float | int]:
    """p50, p99 and max of ``ms``, and how many."""
    values = np.asarray(ms, dtype=float)
    return {"calls": len(ms), "p50_ms": round(float(np.percentile(values, 50)), 1),
            "p99_ms": round(float(np.percentile(values, 99)), 1),
            "max_ms": round(float(values.max()), 1)}


def _team(client: httpx.Client, args: argparse.Namespace) -> HttpTeam:
    """The domain's project, labeled by the simulated team."""
    domain = load_domain(args.data, args.domain)
    truth = np.asarray(domain.labels, dtype=bool)
    levels, kinds = parse_team(args.noise, args.annotators, "independent")
    team = Team.build(domain.index_pairs(), truth, levels, kinds, seed=args.seed, repeat=0)
    pid = create_pool_project(client, domain.name, domain.concepts, domain.pairs,
                              np.asarray(domain.features, float))
    client.patch(f"/projects/{pid}", json={"policy": "consensus"}).raise_for_status()
    seeds = [int(r) for r in coverage_seeds(len(truth), seed=args.seed, repeat=0)]
    loop = HttpTeam(client, pid, domain, team, seeds)
    loop.run(args.max_answers)
    return loop


def _agreeing(client: httpx.Client, pid: int) -> Callable[[int], None]:
    """Before call ``i``: the lead agrees with the ``i``-th asserted label."""
    labels = client.get(f"/projects/{pid}/labels",
                        params={"source": "asserted", "limit": 10_000}).json()["items"]

    def agree(i: int) -> None:
        item = labels[i % len(labels)]
        client.post(f"/projects/{pid}/labels", json={
            "a": item["a"], "b": item["b"], "label": item["label"], "annotator": LEAD,
        }).raise_for_status()

    return agree


def _labeling(client: httpx.Client, loop: HttpTeam) -> tuple[Callable[[int], None], int]:
    """Before call ``i``: the lead's truthful answer on the ``i``-th undecided pool pair, and
    a prediction model trained on it; how many such pairs there are."""
    pid, undecided = loop.pid, np.flatnonzero(loop.values() < 0)

    def answer(i: int) -> None:
        a, b = loop.domain.pairs[int(undecided[i])]
        value = "positive" if loop.domain.labels[int(undecided[i])] else "negative"
        response = client.post(f"/projects/{pid}/labels", json={
            "a": a, "b": b, "label": value, "annotator": LEAD})
        if response.status_code != 409:  # decided meanwhile by an earlier one: refused
            response.raise_for_status()
        client.get(f"/projects/{pid}/predictions",
                   params={"fresh": "true", "limit": 1}).raise_for_status()

    return answer, len(undecided)


def _measure(server: Server, client: httpx.Client, loop: HttpTeam,
             args: argparse.Namespace) -> dict[str, Any]:
    url = f"/projects/{loop.pid}/quality"
    quality = client.get(url, params={"fresh": "true"})  # a model trained on these labels
    quality.raise_for_status()
    cached = time_calls(lambda: client.get(url), None, args.calls)
    cold = time_calls(lambda: client.get(url), _agreeing(client, loop.pid), args.calls)
    before, undecided = _labeling(client, loop)
    label = time_calls(lambda: client.get(url), before, min(args.calls, undecided))
    restart = []
    for _ in range(args.restarts):
        server.stop()
        server.start()
        restart += time_calls(lambda: client.get(url), None, 1)
    return {"quality": quality.json(), "cached": figures(cached), "cold": figures(cold),
            "label": figures(label) if label else None,
            "restart": figures(restart) if restart else None}


def _table(result: dict[str, Any]) -> str:
    rows = ["| calls | n | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for kind in ("cached", "cold", "label", "restart"):
        f = result.get(kind)
        if f:
            rows.append(f"| {kind} | {f['calls']} | {f['p50_ms']} | {f['p99_ms']} | "
                        f"{f['max_ms']} |")
    quality = result["quality"]
    return "\n".join([
        f"{result['domain']}: {result['pool']} pool pairs, {result['answers']} answers of "
        f"{result['annotators']} annotators (noise {result['noise']}) and {result['lead']} "
        f"agreeing ones; {quality['decided']} decided, decided_wrong "
        f"{quality['decided_wrong']}, predicted_wrong {quality['predicted_wrong']}.",
        f"{result['machine']}, {result['cpus']} CPUs; 1-minute load {result['load_before']} "
        f"before the calls, {result['load_after']} after; team run {result['team_s']} s.",
        "", *rows, ""])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality_latency",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/datasets/al-cpl"))
    parser.add_argument("--domain", default="precalculus")
    parser.add_argument("--annotators", type=int, default=5)
    parser.add_argument("--noise", default="0.10")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-answers", type=int, default=None,
                        help="stop the team after this many answers (default: a whole run)")
    parser.add_argument("--calls", type=int, default=60, help="timed calls per kind")
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality.db").unlink(missing_ok=True)
    with Server(f"sqlite:///{args.out / 'quality.db'}", args.out) as server, \
            httpx.Client(base_url=server.base_url, timeout=600.0) as client:
        started = time.perf_counter()
        loop = _team(client, args)
        team_s = round(time.perf_counter() - started, 1)
        load_before = round(os.getloadavg()[0], 2)
        result = _measure(server, client, loop, args)
    result.update(domain=args.domain, pool=len(loop.domain.pairs), answers=len(loop.log),
                  annotators=args.annotators, noise=args.noise, lead=args.calls,
                  team_s=team_s, load_before=load_before,
                  load_after=round(os.getloadavg()[0], 2),
                  machine=platform.processor() or platform.machine(), cpus=os.cpu_count())
    (args.out / "quality_latency.json").write_text(json.dumps(result, indent=2) + "\n",
                                                   encoding="utf-8")
    table = _table(result)
    (args.out / "quality_latency.md").write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
