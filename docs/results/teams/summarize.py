"""The tables of README.md from DOMAIN/runs.jsonl beside this script (paired per repeat).

Usage: python docs/results/teams/summarize.py REPEATS DOMAIN [DOMAIN ...]
(only repeats below REPEATS count; folders other than this one: SPORAL_TEAMS_RESULTS=DIR).
"""

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
from scipy import stats


def ci(values):
    v = np.asarray(values, float)
    if len(v) < 2:
        return float(v.mean()) if len(v) else math.nan, math.nan
    return float(v.mean()), float(
        stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    )


def fmt(values, scale=1.0, d=2):
    m, h = ci([x * scale for x in values])
    return f"{m:.{d}f}" if math.isnan(h) else f"{m:.{d}f} ± {h:.{d}f}"


FOLDER = Path(os.environ.get("SPORAL_TEAMS_RESULTS", Path(__file__).resolve().parent))
LIMIT = int(sys.argv[1])  # only repeats below this
for domain in sys.argv[2:]:
    rows = [json.loads(l)["row"] for l in open(FOLDER / domain / "runs.jsonl", encoding="utf-8")]
    rows = [r for r in rows if r["repeat"] < LIMIT]

    def get(policy, noise, model="independent"):
        return {
            r["repeat"]: r
            for r in rows
            if r["policy"] == policy and str(r["noise"]) == noise and r["noise_model"] == model
        }

    perfect = {k: r["answers"] for k, r in get("trust", "0.0").items()}
    print(
        f"## {domain}: perfect annotator {fmt(list(perfect.values()), d=1)} answers ({len(perfect)} repeats)\n"
    )
    print("| team | policy | repeats | wrong % of pool | answers / perfect | positive F1 |")
    print("|---|---|---|---|---|---|")
    teams = [
        ("ε = 0.10", "0.1", "independent"),
        ("ε = 0.05", "0.05", "independent"),
        ("ε = 0", "0.0", "independent"),
        (
            "1 direct + 4 at ε = 0.05",
            "0.05",
            "direct,independent,independent,independent,independent",
        ),
        ("all 5 direct (ε = 0)", "0.0", "direct"),
        ("4 at 0.05 + 1 at 0.15", "0.05,0.05,0.05,0.05,0.15", "independent"),
        ("4 at 0.10 + 1 at 0.30", "0.1,0.1,0.1,0.1,0.3", "independent"),
    ]
    for label, noise, model in teams:
        for policy in ("trust", "double", "consensus", "consensus-nocheck", "consensus-unweighted"):
            runs = get(policy, noise, model)
            if not runs or (policy == "trust" and noise == "0.0" and model == "independent"):
                continue
            ks = sorted(k for k in runs if k in perfect)
            print(
                f"| {label} | {policy} | {len(runs)} | {fmt([runs[k]['error_rate'] for k in runs], 100)} | "
                f"{fmt([runs[k]['answers'] / perfect[k] for k in ks])} | {fmt([runs[k]['positive_f1'] for k in runs], d=3)} |"
            )
    print()
    print("Paired differences (first − second, same repeats, 95% interval):\n")
    print("| team | comparison | repeats | wrong % of pool (points) | answers |")
    print("|---|---|---|---|---|")
    pairs = [
        ("consensus", "trust"),
        ("consensus", "double"),
        ("consensus", "consensus-unweighted"),
        ("consensus", "consensus-nocheck"),
        ("consensus-nocheck", "trust"),
    ]
    for label, noise, model in teams:
        for a, b in pairs:
            ra, rb = get(a, noise, model), get(b, noise, model)
            ks = sorted(set(ra) & set(rb))
            if not ks:
                continue
            print(
                f"| {label} | {a} − {b} | {len(ks)} | {fmt([100 * (ra[k]['error_rate'] - rb[k]['error_rate']) for k in ks])} | "
                f"{fmt([ra[k]['answers'] - rb[k]['answers'] for k in ks], d=1)} |"
            )
    # eps=0: consensus vs perfect, same map
    c0 = get("consensus", "0.0")
    ks = sorted(set(c0) & set(perfect))
    if ks:
        extra = [100 * (c0[k]["answers"] / perfect[k] - 1) for k in ks]
        print(
            f"\nε = 0: consensus asks {fmt(extra)} % more than trust ({len(ks)} repeats); wrong pairs {[c0[k]['wrong_pairs'] for k in ks]}\n"
        )
