"""A simulated team over HTTP against a real `sporal serve`, beside `sporal simulate`.

The team of ``sporal simulate --mode coverage --policy consensus-now --noise ...`` (the
service's question policy; ``--policy`` runs the simulation with another)
(:class:`reasoning.simulation.oracle.Team`: the same noise model, the same draws for the same
seed and repeat) labels a whole AL-CPL domain through the service, the way a labeling tool
does: K annotators in turn (``annotator-1`` … ``annotator-K``), each ``GET
/projects/{pid}/next?annotator=NAME&k=1``, then ``POST /projects/{pid}/labels`` with that
annotator's answer on the pair asked; an annotator who gets no question passes, and the run
ends when a whole round of annotators got none (as the simulation ends). The project runs the
``consensus`` policy on a SQLite file, the server is started here on 127.0.0.1.

The simulation asks the repeat's seed questions first
(:func:`reasoning.simulation.coverage.coverage_seeds`, before its strategy has a model); so
that both start alike, a ``new`` question of the service is replaced by the next seed pair
nobody answered and nothing decided yet while seed pairs remain (``--no-seed-questions``: take
the service's own cold start). ``--fresh`` asks ``next`` for a model trained on the current
labels (``fresh=true``), as the simulation fits one before every new pair; without it the
service answers with the newest model its trainer has, as it does for a team.

Per run it reports the wrong share of the pool (decided wrongly or left undecided, read from
``GET /predictions``), the answers, the answers divided by one perfect annotator's (the
simulation's ``trust`` at noise 0 on the same repeat), the second opinions and disagreement
questions (each question's ``reason``; a check question says ``new``, as to the annotator) and
the positive F1 against the truth; the same figures of ``simulate`` beside it. Writes
``runs.jsonl`` (one line per run) and ``summary.md`` (mean ± 95% half-width per domain and
mode) to ``--out``::

    nice -n 15 python -m benchmarks.team_http --data ../shared/datasets/al-cpl \\
        --domains data_mining,geometry,precalculus --repeats 2 --out /tmp/team_http
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from scipy import stats

from benchmarks.serving import Server
from reasoning.data import Domain, load_domain
from reasoning.generate import random_order
from reasoning.simulation.coverage import coverage_seeds
from reasoning.simulation.oracle import Team
from reasoning.simulation.team_runs import TeamTask, parse_team
from reasoning.simulation.teams import positive_f1

__all__ = ["HttpTeam", "RunFigures", "main", "quality_lines", "run_http", "run_simulated",
           "summarize", "write_domain"]

PAGE = 1000
MODES = ("http", "simulate")


@dataclass
class RunFigures:
    """What one run delivered (one line of ``runs.jsonl``)."""

    domain: str
    mode: str
    repeat: int
    pool: int
    answers: int
    wrong_pairs: int
    positive_f1: float
    second_opinions: int
    disagreements: int
    seconds: float
    perfect: int = 0
    load: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def wrong_share(self) -> float:
        return self.wrong_pairs / self.pool if self.pool else 0.0

    @property
    def ratio(self) -> float:
        return self.answers / self.perfect if self.perfect else float("nan")


@dataclass
class HttpTeam:
    """One team's run through the service: the domain, the team, the client, the log."""

    client: httpx.Client
    pid: int
    domain: Domain
    team: Team
    seeds: list[int]
    fresh: bool = False
    rows: dict[tuple[str, str], int] = field(default_factory=dict)
    answered: dict[int, set[int]] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    log: list[tuple[str, int, str, bool]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rows = {pair: row for row, pair in enumerate(self.domain.pairs)}

    def _undecided(self, row: int) -> bool:
        a, b = self.domain.pairs[row]
        response = self.client.get(f"/projects/{self.pid}/pairs/status",
                                   params={"a": a, "b": b})
        response.raise_for_status()
        return bool(response.json()["status"] == "undecided")

    def _seed_row(self) -> int | None:
        """The next seed pair nobody answered and nothing decided (dropping the others)."""
        while self.seeds:
            row = self.seeds[0]
            if row not in self.answered and self._undecided(row):
                return row
            self.seeds.pop(0)
        return None

    def turn(self, member: int) -> bool:
        """Annotator ``member`` asks for a question and answers it; False when none came."""
        name = self.team.names[member]
        response = self.client.get(f"/projects/{self.pid}/next", params={
            "annotator": name, "k": 1, "fresh": str(self.fresh).lower()})
        response.raise_for_status()
        queries = response.json()["queries"]
        if not queries:
            return False
        query = queries[0]
        row, reason = self.rows[(query["a"], query["b"])], query["reason"]
        if reason == "new":
            seed = self._seed_row()
            row = self.seeds.pop(0) if seed is not None else row
        value = self.team.answer(row, member)
        a, b = self.domain.pairs[row]
        self.client.post(f"/projects/{self.pid}/labels", json={
            "a": a, "b": b, "label": "positive" if value else "negative",
            "annotator": name}).raise_for_status()
        self.answered.setdefault(row, set()).add(member)
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        self.log.append((name, row, reason, value))
        return True

    def run(self, max_answers: int | None = None) -> None:
        """Annotators in turn until a whole round gets no question (or ``max_answers``)."""
        k, member, idle = len(self.team), 0, 0
        while idle < k and (max_answers is None or len(self.log) < max_answers):
            idle = 0 if self.turn(member) else idle + 1
            member = (member + 1) % k

    def values(self, sources: tuple[str, ...] = ("asserted", "inferred"),
               **params: Any) -> np.ndarray:
        """The service's value of every pool row (1, 0, -1 undecided), from ``predictions``:
        the labels of ``sources`` (``("predicted",)`` with ``consistent=True``: the map
        ``GET quality`` counts the undecided rest of)."""
        out = np.full(len(self.domain.pairs), -1, dtype=np.int8)
        offset = 0
        while True:
            response = self.client.get(f"/projects/{self.pid}/predictions",
                                       params={"limit": PAGE, "offset": offset, **params})
            response.raise_for_status()
            items = response.json()["items"]
            for item in items:
                if item["label"] is not None and item["source"] in sources:
                    out[self.rows[(item["a"], item["b"])]] = item["label"] == "positive"
            offset += len(items)
            if not items:
                return out

    def quality(self, truth: np.ndarray, values: np.ndarray) -> dict[str, Any]:
        """``GET quality`` (with a model trained on the labels) beside the true counts it
        estimates: the decided pool pairs decided wrongly, and the undecided ones the
        predicted map gets wrong."""
        response = self.client.get(f"/projects/{self.pid}/quality", params={"fresh": "true"})
        response.raise_for_status()
        body = response.json()
        decided = values >= 0
        out = {"quality": body,
               "decided_wrong_true": int((decided & ((values == 1) != truth)).sum())}
        if body["predicted_wrong"] is not None and not decided.all():
            predicted = self.values(("predicted",), consistent="true")
            out["predicted_wrong_true"] = int((~decided & ((predicted == 1) != truth)).sum())
        return out


def write_domain(folder: Path, name: str, n: int, pool: int, *, seed: int = 0) -> Path:
    """A small generated domain in the AL-CPL format (for tests): a layered order of ``n``
    concepts, ``pool`` pairs, 38 features of which the first three lean towards the truth."""
    order = random_order(n, pool, degree=2.0, depth=4, positive_share=0.3, random_state=seed)
    names = [f"c{i:03d}" for i in order.concepts]
    features = np.random.default_rng(seed).random((len(order.labels), 38))
    features[:, :3] += 0.5 * order.labels[:, None]
    folder.mkdir(parents=True, exist_ok=True)
    rows = [f"{names[b]},{names[a]}" for a, b in order.pool.tolist()]  # row "B,A": A before B
    (folder / f"{name}.pairs").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (folder / f"{name}.features").write_text("".join(
        f"{int(y)} " + " ".join(f"{k}:{v:.4f}" for k, v in enumerate(x)) + "\n"
        for y, x in zip(order.labels.tolist(), features.tolist(), strict=True)),
        encoding="utf-8")
    (folder / f"{name}.preqs").write_text("\n".join(
        r for r, y in zip(rows, order.labels.tolist(), strict=True) if y) + "\n",
        encoding="utf-8")
    return folder


def _create(client: httpx.Client, domain: Domain) -> int:
    response = client.post("/projects", json={"name": domain.name, "policy": "consensus"})
    response.raise_for_status()
    pid = int(response.json()["id"])
    client.post(f"/projects/{pid}/concepts", json={
        "concepts": [{"name": c} for c in domain.concepts]}).raise_for_status()
    body = [{"a": a, "b": b, "features": row} for (a, b), row in
            zip(domain.pairs, np.asarray(domain.features, float).tolist(), strict=True)]
    client.post(f"/projects/{pid}/pairs", json={"pairs": body}, timeout=600).raise_for_status()
    return pid


def run_http(data: Path, name: str, noise: str, *, annotators: int = 5,
             noise_model: str = "independent", seed: int = 0, repeat: int = 0,
             out: Path, fresh: bool = False, seed_questions: bool = True,
             max_answers: int | None = None, env: dict[str, str] | None = None
             ) -> tuple[RunFigures, HttpTeam]:
    """One team run through a fresh `sporal serve` on SQLite (module docstring)."""
    domain = load_domain(data, name)
    truth = np.asarray(domain.labels, dtype=bool)
    levels, kinds = parse_team(noise, annotators, noise_model)
    team = Team.build(domain.index_pairs(), truth, levels, kinds, seed=seed, repeat=repeat)
    seeds = ([int(r) for r in coverage_seeds(len(truth), seed=seed, repeat=repeat)]
             if seed_questions else [])
    folder = out / f"{name}-{repeat}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "team.db").unlink(missing_ok=True)
    with Server(f"sqlite:///{folder / 'team.db'}", folder, env=env or {}) as server, \
            httpx.Client(base_url=server.base_url, timeout=600.0) as client:
        pid = _create(client, domain)
        loop = HttpTeam(client, pid, domain, team, seeds, fresh=fresh)
        load = os.getloadavg()[0]
        started = time.perf_counter()
        loop.run(max_answers)
        seconds = time.perf_counter() - started
        values = loop.values()
        quality = loop.quality(truth, values)
    wrong = int(((values < 0) | ((values == 1) != truth)).sum())
    figures = RunFigures(name, "http", repeat, len(truth), len(loop.log), wrong,
                         positive_f1(values, truth), loop.reasons.get("second-opinion", 0),
                         loop.reasons.get("disagreement", 0), round(seconds, 1),
                         load=round(load, 2), extra=quality)
    return figures, loop


def _inside(count: dict[str, Any] | None, true: int | None) -> bool | None:
    if count is None or true is None:
        return None
    return bool(count["low"] <= true <= count["high"])


def quality_lines(runs: Sequence[RunFigures]) -> str:
    """Per HTTP run: GET quality's estimate and 90% interval beside the true count, for the
    decided pool pairs and the predicted rest, and how many true counts fell inside."""
    lines = ["| domain | repeat | answers | decided wrong: estimate (90%) | true | inside | "
             "predicted wrong: estimate (90%) | true | inside |",
             "|---|---|---|---|---|---|---|---|---|"]
    inside: list[bool] = []
    for r in runs:
        if r.mode != "http" or "quality" not in r.extra:
            continue
        cells = [f"| {r.domain}", str(r.repeat), str(r.answers)]
        for part in ("decided", "predicted"):
            count, true = r.extra["quality"][f"{part}_wrong"], r.extra.get(f"{part}_wrong_true")
            hit = _inside(count, true)
            inside += [] if hit is None else [hit]
            cells += ["–", "–", "–"] if hit is None else [
                f"{count['estimate']:.1f} ({count['low']}–{count['high']})", str(true),
                "yes" if hit else "no"]
        lines.append(" | ".join(cells) + " |")
    return ("\n".join(lines)
            + f"\n\nTrue counts inside the 90% interval: {sum(inside)} of {len(inside)}.\n")


def run_simulated(data: Path, name: str, noise: str, *, annotators: int = 5,
                  noise_model: str = "independent", seed: int = 0, repeat: int = 0,
                  policy: str = "consensus") -> RunFigures:
    """The same team in ``sporal simulate`` (:class:`TeamTask`), with its perfect reference."""
    levels, kinds = parse_team(noise, annotators, noise_model)
    started = time.perf_counter()
    task = TeamTask(str(data), name, "default", policy, levels, kinds, repeat, seed)
    run = task.run()
    seconds = time.perf_counter() - started
    perfect = TeamTask(str(data), name, "default", "trust", (0.0,) * annotators,
                       ("independent",) * annotators, repeat, seed).run()
    return RunFigures(name, "simulate", repeat, run.pool, run.answers, run.wrong_pairs,
                      run.positive_f1, run.reasons.get("second-opinion", 0),
                      run.reasons.get("disagreement", 0), round(seconds, 1),
                      perfect=perfect.answers, load=round(os.getloadavg()[0], 2))


def _interval(values: Sequence[float]) -> str:
    """``mean ± 95% half-width`` (Student t), or the values when fewer than two."""
    values = [v for v in values if v == v]  # no perfect reference: NaN, left out
    if not values:
        return "–"
    if len(values) < 2:
        return ", ".join(f"{v:.3g}" for v in values)
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return f"{statistics.mean(values):.3g} ± {half:.2g}"


def summarize(runs: Sequence[RunFigures]) -> str:
    """The markdown table: per domain and mode, mean ± 95% half-width over repeats."""
    lines = ["| domain | mode | runs | wrong share of the pool (%) | answers / perfect | "
             "second opinions | disagreement questions | positive F1 |",
             "|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r.domain for r in runs):
        for mode in MODES:
            mine = [r for r in runs if r.domain == name and r.mode == mode]
            if not mine:
                continue
            lines.append(" | ".join([
                f"| {name}", mode, str(len(mine)),
                _interval([100 * r.wrong_share for r in mine]),
                _interval([r.ratio for r in mine]),
                _interval([r.second_opinions for r in mine]),
                _interval([r.disagreements for r in mine]),
                _interval([r.positive_f1 for r in mine])]) + " |")
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the AL-CPL folder")
    parser.add_argument("--domains", default="data_mining")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--first-repeat", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise", default="0.1")
    parser.add_argument("--annotators", type=int, default=5)
    parser.add_argument("--noise-model", default="independent")
    parser.add_argument("--policy", default="consensus-now",
                        help="the simulation's policy (CONSENSUS_VARIANTS): the service's "
                        "question policy is consensus-now")
    parser.add_argument("--fresh", action="store_true", help="next?fresh=true")
    parser.add_argument("--no-seed-questions", action="store_true")
    parser.add_argument("--no-simulate", action="store_true", help="the HTTP runs only")
    parser.add_argument("--max-answers", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="sporal-team-http-"))
    out.mkdir(parents=True, exist_ok=True)
    team = {"annotators": args.annotators, "noise_model": args.noise_model, "seed": args.seed}
    runs: list[RunFigures] = []
    for name in [d.strip() for d in args.domains.split(",") if d.strip()]:
        for repeat in range(args.first_repeat, args.first_repeat + args.repeats):
            sim = None if args.no_simulate else run_simulated(
                args.data, name, args.noise, repeat=repeat, policy=args.policy, **team)
            http, _ = run_http(args.data, name, args.noise, repeat=repeat, out=out,
                               fresh=args.fresh, seed_questions=not args.no_seed_questions,
                               max_answers=args.max_answers, **team)
            http.perfect = sim.perfect if sim is not None else 0
            for figures in (sim, http):
                if figures is not None:
                    runs.append(figures)
                    with (out / "runs.jsonl").open("a", encoding="utf-8") as handle:
                        handle.write(json.dumps(asdict(figures)) + "\n")
                    print(f"{name} repeat {repeat} {figures.mode}: "
                          f"{100 * figures.wrong_share:.2f}% wrong, {figures.answers} answers "
                          f"({figures.ratio:.2f}x), {figures.second_opinions} second opinions, "
                          f"{figures.disagreements} disagreements, {figures.seconds:.0f} s",
                          flush=True)
    table = summarize(runs) + "\n" + quality_lines(runs)
    (out / "summary.md").write_text(
        f"{table}\nMachine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()}\n", encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
