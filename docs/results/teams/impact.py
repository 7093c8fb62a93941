"""The impact curve (budget.md): how much of the complete map rests on single answers, by the
stake of the answer it rests on, at the end of the sweep's consensus runs.

Usage: python docs/results/teams/impact.py DOMAIN:REPEATS [DOMAIN:REPEATS ...] [--noise 0.1]
(e.g. ``data_mining:0,1,2,3 geometry:0,1``; the data from ``$SPORAL_DATASETS/al-cpl``, by
default ``../shared/datasets/al-cpl`` beside the repository). Each repeat replays the
``consensus`` run of ``budget/DOMAIN/runs.jsonl`` (the same seed and code, so the same
answers; the script says whether the answers and the wrong pairs match; the perfect
annotator's answers come from there too; each replay is kept in ``budget/DOMAIN/impact.jsonl``
and read from there next time), then reads the final map:
per asserted label, its answers, whether it is wrong, the pool pairs it decided when it was
answered (the stake the policy used) and the pool pairs that rest on it alone now
(:func:`reasoning.consensus.asking.held_alone`). It writes ``impact.csv`` (one row per
domain and stake now of a single-answer label; the rows of domains not named are kept) and
``impact.png`` beside this file.
"""

import argparse
import csv
import json
import os
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from reasoning.consensus.asking import AskPolicy, held_alone  # noqa: E402
from reasoning.simulation import teams  # noqa: E402
from reasoning.simulation.oracle import Team  # noqa: E402
from reasoning.simulation.team_runs import cached_domain, parse_team  # noqa: E402
from reasoning.strategies import get_strategy  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("SPORAL_DATASETS", HERE.parents[3] / "shared" / "datasets")) / "al-cpl"
BINS = ((0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 10**9))
FIELDS = ("domain", "repeats", "stake_now", "single_labels", "single_wrong", "pairs_held",
          "wrong_pairs_held", "answers_perfect")


def replay(domain_name: str, noise: str, repeat: int) -> dict:
    """One consensus run of the sweep; the final map's labels and pool pairs."""
    domain = cached_domain(str(DATA), domain_name)
    pairs = domain.index_pairs()
    team = Team.build(pairs, domain.labels, *parse_team(noise, 5), seed=0, repeat=repeat)
    run = teams._Run(pairs, domain.features, domain.labels, len(domain.concepts), team,
                     get_strategy("default"), seed=0, repeat=repeat)
    policy = teams._Consensus(run, True, AskPolicy())
    policy.run_all()
    out = run.finish()
    pool = [(int(a), int(b)) for a, b in pairs.tolist()]
    keys, held = held_alone(run.closure, pool)
    wrong_pair = (run.values < 0) | ((run.values == 1) != run.truth)
    labels = []
    for k, pair in enumerate(keys):
        value = run.closure.asserted[pair]
        labels.append({"answers": len(policy.by_pair.get(pair, ())),
                       "wrong": bool(value != bool(run.truth[run.rows[pair]])),
                       "asked": policy.stake.get(pair, 1), "now": int(held[k].sum()),
                       "wrong_held": int((held[k] & wrong_pair).sum())})
    single = [k for k, lab in enumerate(labels) if lab["answers"] == 1]
    return {"domain": domain_name, "noise": noise, "repeat": repeat, "answers": out.answers,
            "wrong_pairs": out.wrong_pairs, "pool": out.pool, "labels": labels,
            "wrong_by_single": int((wrong_pair & held[single].any(axis=0)).sum())}


def bin_of(stake: int) -> int:
    return next(k for k, (lo, hi) in enumerate(BINS) if lo <= stake <= hi)


def tally(domain_name: str, runs: list[dict], perfect: float) -> list[dict]:
    """Per stake bin, the single-answer labels and the pool pairs they hold alone."""
    rows = [Counter() for _ in BINS]
    for run in runs:
        for lab in run["labels"]:
            if lab["answers"] != 1:
                continue
            row = rows[bin_of(lab["now"])]
            row["single_labels"] += 1
            row["single_wrong"] += lab["wrong"]
            row["pairs_held"] += lab["now"]
            if lab["wrong"]:
                row["wrong_pairs_held"] += lab["wrong_held"]
    return [{"domain": domain_name, "repeats": len(runs),
             "stake_now": f"{lo}" if lo == hi else f"{lo}+" if hi > 10**8 else f"{lo}-{hi}",
             **{k: rows[i][k] for k in FIELDS[3:7]}, "answers_perfect": round(perfect, 1)}
            for i, (lo, hi) in enumerate(BINS)]


def _rows(domain_name: str) -> list[dict]:
    """The runs of ``budget/DOMAIN/runs.jsonl`` (budget.md's runs, this code's)."""
    path = HERE / "budget" / domain_name / "runs.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [{"key": item["key"], **item["row"]} for item in map(json.loads, lines)]


def perfect_answers(domain_name: str, repeats: list[int]) -> float:
    """The mean answers of the perfect annotator on these repeats."""
    found = []
    for row in _rows(domain_name):
        if (row["policy"] == "trust" and row["noise"] in ("0.0", "0") and row["repeat"] in repeats
                and row["noise_model"] == "independent"):
            found.append(row["answers"])
    return float(np.mean(found)) if found else float("nan")


def sweep_line(domain_name: str, noise: str, repeat: int) -> tuple[int, int] | None:
    """The answers and wrong pairs of the same consensus run in ``budget/DOMAIN``."""
    key = f"{domain_name}|EDP-F|consensus|{noise}|independent|{repeat}|0|0.05|0.3"
    for row in _rows(domain_name):
        if row["key"] == key:
            return row["answers"], row["wrong_pairs"]
    return None


def plot(rows: list[dict], path: Path) -> None:
    """Left: the map's pool pairs held alone by single answers, by stake now; right: the
    impact curve (second opinions on every single answer of stake ≥ s: answers against the
    wrong pool pairs they could catch)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    domains = list(dict.fromkeys(r["domain"] for r in rows))
    width = 0.8 / len(domains)
    for d, name in enumerate(domains):
        mine = [r for r in rows if r["domain"] == name]
        x = np.arange(len(mine)) + d * width
        reps = mine[0]["repeats"]
        left.bar(x, [r["pairs_held"] / reps for r in mine], width, alpha=0.35,
                 color=f"C{d}", label=f"{name}: pairs held")
        left.bar(x, [r["wrong_pairs_held"] / reps for r in mine], width, color=f"C{d}",
                 label=f"{name}: wrong pairs held")
        labels = np.array([r["single_labels"] for r in mine][::-1]).cumsum()[::-1] / reps
        wrong = np.array([r["wrong_pairs_held"] for r in mine][::-1]).cumsum()[::-1] / reps
        total = max(wrong[0], 1e-9)
        right.plot(labels / mine[0]["answers_perfect"], wrong / total, "o-", color=f"C{d}",
                   label=name)
        for xi, yi, r in zip(labels / mine[0]["answers_perfect"], wrong / total, mine,
                             strict=True):
            right.annotate(f"≥{r['stake_now'].rstrip('+').split('-')[0]}", (xi, yi),
                           fontsize=7, xytext=(3, 3), textcoords="offset points")
    left.set_xticks(np.arange(len(BINS)) + 0.4 - width / 2,
                    [r["stake_now"] for r in rows[:len(BINS)]])
    left.set_xlabel("pool pairs resting on the single answer now (stake)")
    left.set_ylabel("pool pairs per run")
    left.set_yscale("symlog", linthresh=1.0)
    left.set_title("The map held alone by single answers, ε = 0.10")
    left.legend(fontsize=7)
    right.set_xlabel("second opinions on every single answer of stake ≥ s (× perfect)")
    right.set_ylabel("share of the wrong pairs held by wrong single answers")
    right.set_title("Impact curve")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def replays(name: str, noise: str, repeats: list[int]) -> list[dict]:
    """The replays of these repeats: read from ``budget/DOMAIN/impact.jsonl``, else run and
    added there (a replay is a whole consensus run)."""
    path = HERE / "budget" / name / "impact.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {(item["noise"], item["repeat"]): item
            for item in map(json.loads, path.read_text().splitlines() if path.exists() else [])}
    runs = []
    for r in repeats:
        run = kept.get((noise, r))
        if run is None:
            run = replay(name, noise, r)
            with path.open("a") as handle:
                handle.write(json.dumps(run) + "\n")
        single = [lab for lab in run["labels"] if lab["answers"] == 1]
        print(f"{name} repeat {r}: {run['answers']} answers, {run['wrong_pairs']} wrong of "
              f"{run['pool']} (budget run: {sweep_line(name, noise, r)}); {len(single)} "
              f"single-answer labels of {len(run['labels'])}, "
              f"{sum(lab['wrong'] for lab in single)} wrong; wrong pairs held by a single "
              f"answer: {run['wrong_by_single']} of {run['wrong_pairs']}", flush=True)
        print("  wrong single answers (stake when answered -> resting on it now): "
              + ", ".join(f"{lab['asked']}->{lab['now']}" for lab in single if lab["wrong"]))
        runs.append(run)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="DOMAIN:R1,R2,...")
    parser.add_argument("--noise", default="0.1")
    args = parser.parse_args()
    rows = []
    for spec in args.runs:
        name, reps = spec.split(":")
        repeats = [int(r) for r in reps.split(",")]
        rows += tally(name, replays(name, args.noise, repeats), perfect_answers(name, repeats))
    path = HERE / "impact.csv"
    done = {row["domain"] for row in rows}
    if path.exists():  # the other domains' rows stay
        with path.open(newline="") as handle:
            kept = [{k: v if k in ("domain", "stake_now") else float(v) for k, v in r.items()}
                    for r in csv.DictReader(handle) if r["domain"] not in done]
        rows = kept + rows
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(row)
    plot(rows, HERE / "impact.png")


if __name__ == "__main__":
    main()
