"""The tables of README.md from DOMAIN/runs.jsonl beside this script (paired per repeat), and
``targets.png``: per domain, each team's wrong share of the pool against its answers over the
perfect annotator's, beside the issue's target boxes.

Usage: python docs/results/teams/summarize.py REPEATS DOMAIN [DOMAIN ...]
(only repeats below REPEATS count; folders other than this one: SPORAL_TEAMS_RESULTS=DIR).
"""

import json
import math
import os
import sys
from pathlib import Path

from scipy import stats

from reasoning.report import mean_ci

FOLDER = Path(os.environ.get("SPORAL_TEAMS_RESULTS", Path(__file__).resolve().parent))
DIRECT1 = "direct,independent,independent,independent,independent"
TEAMS = [
    ("ε = 0.10", "0.1", "independent"),
    ("ε = 0.05", "0.05", "independent"),
    ("ε = 0", "0.0", "independent"),
    ("1 direct + 4 at ε = 0.05", "0.05", DIRECT1),
    ("all 5 direct (ε = 0)", "0.0", "direct"),
    ("4 at 0.05 + 1 at 0.15", "0.05,0.05,0.05,0.05,0.15", "independent"),
    ("4 at 0.10 + 1 at 0.30", "0.1,0.1,0.1,0.1,0.3", "independent"),
]
POLICIES = ("trust", "double", "consensus", "consensus-nocheck", "consensus-unweighted")
COMPARISONS = [
    ("consensus", "trust"),
    ("consensus", "double"),
    ("consensus", "consensus-unweighted"),
    ("consensus", "consensus-nocheck"),
    ("consensus-nocheck", "trust"),
]
TARGETS = {  # team: (answers / perfect at most, wrong % at most)
    "ε = 0.10": (1.5, 1.0),
    "ε = 0.05": (1.3, 0.3),
    "1 direct + 4 at ε = 0.05": (1.6, 2.0),
}


def fmt(values, scale=1.0, d=2):
    m, h = mean_ci([x * scale for x in values])
    return f"{m:.{d}f}" if math.isnan(h) else f"{m:.{d}f} ± {h:.{d}f}"


class Runs:
    """The finished runs of one domain, below a repeat limit."""

    def __init__(self, domain, limit):
        path = FOLDER / domain / "runs.jsonl"
        rows = [json.loads(line)["row"] for line in open(path, encoding="utf-8")]
        self.rows = [r for r in rows if r["repeat"] < limit]
        self.perfect = {k: r["answers"] for k, r in self.get("trust", "0.0").items()}

    def get(self, policy, noise, model="independent"):
        return {
            r["repeat"]: r
            for r in self.rows
            if r["policy"] == policy and str(r["noise"]) == noise and r["noise_model"] == model
        }

    def ratios(self, runs):
        return [runs[k]["answers"] / self.perfect[k] for k in sorted(runs) if k in self.perfect]


def table(domain, runs):
    perfect = list(runs.perfect.values())
    print(f"### {domain}: perfect annotator {fmt(perfect, d=1)} answers ({len(perfect)} repeats)\n")
    print("| team | policy | repeats | wrong % of pool | answers / perfect | positive F1 |")
    print("|---|---|---|---|---|---|")
    for label, noise, model in TEAMS:
        for policy in POLICIES:
            got = runs.get(policy, noise, model)
            if not got or (policy == "trust" and noise == "0.0" and model == "independent"):
                continue
            wrong = fmt([r["error_rate"] for r in got.values()], 100)
            f1 = fmt([r["positive_f1"] for r in got.values()], d=3)
            print(f"| {label} | {policy} | {len(got)} | {wrong} | {fmt(runs.ratios(got))} | {f1} |")
    print("\nPaired differences (first − second, same repeats, 95% interval):\n")
    print("| team | comparison | repeats | wrong % of pool (points) | answers |")
    print("|---|---|---|---|---|")
    for label, noise, model in TEAMS:
        for a, b in COMPARISONS:
            ra, rb = runs.get(a, noise, model), runs.get(b, noise, model)
            ks = sorted(set(ra) & set(rb))
            if not ks:
                continue
            wrong = fmt([100 * (ra[k]["error_rate"] - rb[k]["error_rate"]) for k in ks])
            more = fmt([ra[k]["answers"] - rb[k]["answers"] for k in ks], d=1)
            print(f"| {label} | {a} − {b} | {len(ks)} | {wrong} | {more} |")
    zero = runs.get("consensus", "0.0")
    ks = sorted(set(zero) & set(runs.perfect))
    if ks:
        extra = fmt([100 * (zero[k]["answers"] / runs.perfect[k] - 1) for k in ks])
        print(f"\nε = 0: consensus asks {extra} % more than trust ({len(ks)} repeats); "
              f"wrong pairs {[zero[k]['wrong_pairs'] for k in ks]}\n")


def pooled(domains):
    """Weighted against unweighted consensus over every domain's paired repeats."""
    print("### Reliability weights, pooled over the domains\n")
    print("| team | domains | paired repeats | wrong % (points), weighted − unweighted "
          "| Wilcoxon p | answers, weighted − unweighted |")
    print("|---|---|---|---|---|---|")
    for label, noise, model in TEAMS:
        if "+ 1 at" not in label:
            continue
        wrong, more, names = [], [], []
        for domain, runs in domains:
            ra = runs.get("consensus", noise, model)
            rb = runs.get("consensus-unweighted", noise, model)
            ks = sorted(set(ra) & set(rb))
            wrong += [100 * (ra[k]["error_rate"] - rb[k]["error_rate"]) for k in ks]
            more += [ra[k]["answers"] - rb[k]["answers"] for k in ks]
            names += [domain] if ks else []
        if len(wrong) < 2:
            continue
        p = stats.wilcoxon(wrong).pvalue if any(wrong) else 1.0
        print(f"| {label} | {', '.join(names)} | {len(wrong)} | {fmt(wrong)} | {p:.2f} | "
              f"{fmt(more, d=1)} |")
    print()


def figure(domains, path):
    """Wrong % against answers / perfect per team and policy, with the target boxes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(domains), figsize=(5.2 * len(domains), 4.6), squeeze=False)
    markers = {"trust": "x", "double": "s", "consensus": "o"}
    colours = dict(zip(TARGETS, ("tab:red", "tab:blue", "tab:green"), strict=True))
    for ax, (domain, runs) in zip(axes[0], domains, strict=True):
        for label, noise, model in TEAMS:
            if label not in TARGETS:
                continue
            limit_x, limit_y = TARGETS[label]
            ax.add_patch(plt.Rectangle((0.9, 0), limit_x - 0.9, limit_y, fill=False,
                                       ls="--", lw=1, ec=colours[label]))
            for policy, marker in markers.items():
                got = runs.get(policy, noise, model)
                if not got:
                    continue
                x, dx = mean_ci(runs.ratios(got))
                y, dy = mean_ci([100 * r["error_rate"] for r in got.values()])
                ax.errorbar(x, y, xerr=dx, yerr=dy, fmt=marker, color=colours[label],
                            ms=7, capsize=2, label=f"{label}, {policy}")
        shown = len(runs.get("consensus", "0.1"))
        ax.set_title(f"{domain} ({shown} repeats)")
        ax.set_xlabel("answers / one perfect annotator's")
        ax.set_ylabel("pool pairs wrong or undecided (%)")
        ax.set_xlim(0.9, 2.4)
        ax.set_ylim(0, None)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper right")
    fig.suptitle("Teams of five against the targets (dashed: the target box of each team)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    limit = int(argv[1])
    domains = [(d, Runs(d, limit)) for d in argv[2:]]
    for domain, runs in domains:
        table(domain, runs)
    pooled(domains)
    figure(domains, FOLDER / "targets.png")


if __name__ == "__main__":
    main(sys.argv)
