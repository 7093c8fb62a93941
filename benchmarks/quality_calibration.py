"""How well ``GET quality``'s intervals hold: simulated teams on the AL-CPL domains, checked
against the truth at checkpoints of each run.

Each run is the project's team simulation (:func:`reasoning.simulation.teams.run_team`,
``--policy``, by default ``consensus-now``, the service's question policy, and the default
strategy). At each checkpoint (a share of the run's answers) the
consensus of the answers so far is computed as the service computes it, then:

* ``decided``: :func:`reasoning.quality.decided_wrong` from each label's P(wrong) as the
  service reads it (:func:`reasoning.quality.label_risk`: the annotators' accuracies, the
  model's probability of the pair when the strategy chose it, recalibrated on the run's second
  opinions) and the share of a wrong label's other pairs wrong with it measured on the run's
  overruled answers (:func:`reasoning.quality.derived_share`), against the decided pool pairs
  the planted order contradicts;
* ``predicted``: the service's prediction model (a random forest with its out-of-bag isotonic
  calibration, :mod:`app.services.fitting`) trained on the decided pool pairs,
  the pool completed into a strict order (:func:`reasoning.consistent.consistent_map`) and
  :func:`reasoning.quality.predicted_wrong` against the completed pairs the order contradicts.

It prints, per domain and part, how often the true count fell in the 90% interval (the target
is at least 80%), the mean absolute error of the estimate and the interval's mean width, and
writes every checkpoint to ``--out`` (CSV) and a plot of estimate against truth beside it.
``--runs`` keeps each team run's answers in a folder and reads them back, so that the
computation can be measured again without simulating the teams again::

    python -m benchmarks.quality_calibration --repeats 8 --runs runs/ \
        --out docs/results/teams/quality.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import pickle
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from app.services.fitting import PREDICTION_MODELS, RANDOM_STATE
from reasoning.closure import Closure
from reasoning.consensus import consensus
from reasoning.consensus.asking import AskPolicy, TeamView
from reasoning.consistent import consistent_map
from reasoning.data import load_domain
from reasoning.quality import (
    decided_wrong,
    derived_share,
    label_risk,
    overruled_firsts,
    predicted_wrong,
)
from reasoning.simulation.oracle import Team
from reasoning.simulation.teams import CONSENSUS_VARIANTS, run_team

DOMAINS = ("data_mining", "geometry", "precalculus")
DEFAULT_POLICY = "consensus-now"
"""The team's question policy by default: the service's (``app.services.asking.POLICY``)."""
CHECKPOINTS = (0.25, 0.5, 0.75, 1.0)
FIELDS = ["domain", "repeat", "noise", "answers", "decided", "decided_wrong", "decided_estimate",
          "decided_low", "decided_high", "undecided", "predicted_wrong", "predicted_estimate",
          "predicted_low", "predicted_high"]


def _predicted(closure: Closure, pairs: np.ndarray, X: np.ndarray, values: np.ndarray,
               truth: np.ndarray) -> dict[str, float | int | str]:
    decided = values >= 0
    undecided = ~decided
    y = values[decided] == 1
    if not undecided.any() or len(set(y.tolist())) < 2:
        return {"predicted_wrong": "", "predicted_estimate": "", "predicted_low": "",
                "predicted_high": ""}
    family = {f.name: f for f in PREDICTION_MODELS}["random_forest"]
    model = family.fit(X[decided], y, RANDOM_STATE, None)
    outputs = family.outputs(model, X)
    completed = consistent_map(closure, pairs, outputs.proba)
    count = predicted_wrong(outputs.calibrated[undecided], completed.label[undecided])
    wrong = int((completed.label[undecided] != truth[undecided]).sum())
    return {"predicted_wrong": wrong, "predicted_estimate": round(count.estimate, 3),
            "predicted_low": count.low, "predicted_high": count.high}


def _checkpoint(votes: list, asked: dict, n: int, pairs: np.ndarray, X: np.ndarray,
                truth: np.ndarray) -> dict[str, float | int | str]:
    result = consensus(votes, range(n))
    closure = result.closure if result.closure is not None else Closure(range(n))
    answers: dict = {}
    for vote in votes:
        answers.setdefault((vote.a, vote.b), []).append(vote)
    pool = [(int(a), int(b)) for a, b in pairs.tolist()]
    view = TeamView(result, answers, set(pool), {p: asked[p] for p in answers if p in asked})
    p_wrong, recalibration = label_risk(view, closure.asserted, AskPolicy())
    values = closure.values_by_index(pairs[:, 0], pairs[:, 1])
    share = derived_share(closure, overruled_firsts(view, closure.asserted), pool, values)
    count = decided_wrong(closure, p_wrong, pool, values, recalibration=recalibration,
                          share=share)
    decided = values >= 0
    wrong = int(((values == 1) != truth)[decided].sum())
    return {"answers": len(votes), "decided": int(decided.sum()), "decided_wrong": wrong,
            "decided_estimate": round(count.estimate, 3), "decided_low": count.low,
            "decided_high": count.high, "undecided": int((~decided).sum()),
            **_predicted(closure, pairs, X, values, truth)}


def _simulate(data, domain: str, repeat: int, noise: float, annotators: int,
              runs: Path | None, policy: str) -> tuple[list, dict]:
    """One team run's answers in order and the model's probability of each pair when it was
    chosen new, read from ``runs`` (a folder of earlier runs) when it holds this run."""
    name = f"{domain}-{repeat}-{noise}-{annotators}-{policy}.pkl"
    path = None if runs is None else runs / name
    if path is not None and path.exists():
        with path.open("rb") as handle:
            return pickle.load(handle)
    pairs, truth = data.index_pairs(), np.asarray(data.labels, dtype=bool)
    team = Team.build(pairs, data.labels, (noise,) * annotators, ("independent",) * annotators,
                      seed=0, repeat=repeat)
    run = run_team(pairs, np.asarray(data.features, dtype=float), truth, len(data.concepts),
                   team, policy, repeat=repeat)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            pickle.dump((run.votes, run.asked), handle)
    return run.votes, run.asked


def one_run(folder: str, domain: str, repeat: int, noise: float, annotators: int,
            runs: Path | None = None, policy: str = DEFAULT_POLICY) -> list[dict]:
    """Every checkpoint of one team run on ``domain`` (``runs``: :func:`_simulate`)."""
    data = load_domain(folder, domain)
    pairs, truth = data.index_pairs(), np.asarray(data.labels, dtype=bool)
    X = np.asarray(data.features, dtype=float)
    votes, asked = _simulate(data, domain, repeat, noise, annotators, runs, policy)
    rows = []
    for share in CHECKPOINTS:
        k = max(1, int(round(share * len(votes))))
        rows.append({"domain": domain, "repeat": repeat, "noise": noise,
                     **_checkpoint(votes[:k], asked, len(data.concepts), pairs, X, truth)})
    return rows


def summary(rows: list[dict]) -> Iterator[str]:
    """Per domain and part: the interval's coverage, the estimate's mean absolute error and the
    interval's mean width."""
    for domain in sorted({r["domain"] for r in rows}):
        mine = [r for r in rows if r["domain"] == domain]
        for part in ("decided", "predicted"):
            got = [r for r in mine if r[f"{part}_wrong"] != ""]
            if not got:
                continue
            inside = np.mean([r[f"{part}_low"] <= r[f"{part}_wrong"] <= r[f"{part}_high"]
                              for r in got])
            mae = np.mean([abs(r[f"{part}_estimate"] - r[f"{part}_wrong"]) for r in got])
            width = np.mean([r[f"{part}_high"] - r[f"{part}_low"] for r in got])
            true = np.mean([r[f"{part}_wrong"] for r in got])
            yield (f"| {domain} | {part} | {len(got)} | {100 * inside:.0f}% | {mae:.1f} | "
                   f"{width:.1f} | {true:.1f} |")


def plot(rows: list[dict], path: Path) -> None:
    """Estimate (with its interval) against the true count, one panel per part."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax, part in zip(axes, ("decided", "predicted"), strict=True):
        got = [r for r in rows if r[f"{part}_wrong"] != ""]
        for domain in sorted({r["domain"] for r in got}):
            mine = [r for r in got if r["domain"] == domain]
            true = np.array([r[f"{part}_wrong"] for r in mine], dtype=float)
            est = np.array([r[f"{part}_estimate"] for r in mine], dtype=float)
            low = np.array([r[f"{part}_low"] for r in mine], dtype=float)
            high = np.array([r[f"{part}_high"] for r in mine], dtype=float)
            ax.errorbar(true, est, yerr=[est - low, high - est], fmt="o", ms=3, alpha=0.6,
                        label=domain, capsize=2)
        top = max([1.0] + [float(r[f"{part}_high"]) for r in got])
        ax.plot([0, top], [0, top], color="grey", lw=1)
        ax.set_xlabel("wrong pairs (truth)")
        ax.set_ylabel("expected wrong pairs, 90% interval")
        ax.set_title(f"{part} pool pairs")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get(
        "SPORAL_DATASETS", str(Path(__file__).resolve().parents[2] / "shared" / "datasets"))
        + "/al-cpl")
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--annotators", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("quality.csv"))
    parser.add_argument("--policy", default=DEFAULT_POLICY, choices=list(CONSENSUS_VARIANTS))
    parser.add_argument("--runs", type=Path, default=None,
                        help="a folder that keeps each team run's answers (read back when there)")
    args = parser.parse_args()
    started = time.time()
    tasks = [(args.data, d, r, args.noise, args.annotators, args.runs, args.policy)
             for r in range(args.repeats) for d in args.domains.split(",")]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = [row for rows in pool.map(one_run, *zip(*tasks, strict=True)) for row in rows]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out.with_suffix(".png"))
    print(f"{len(tasks)} runs, {len(rows)} checkpoints in {time.time() - started:.0f} s, "
          f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print("| domain | part | checkpoints | true count in the 90% interval | mean abs. error | "
          "mean interval width | mean true count |")
    print("|---|---|---|---|---|---|---|")
    for line in summary(rows):
        print(line)


if __name__ == "__main__":
    main()
