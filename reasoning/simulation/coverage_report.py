"""The tables and the plot of the coverage measure (:mod:`reasoning.simulation.coverage`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from reasoning.report import mean_ci

__all__ = [
    "COVERAGE_FIELDS",
    "ORACLE",
    "ORACLE_FIELDS",
    "SHARES",
    "coverage_table",
    "plot_coverage",
]

SHARES = (0.5, 0.8, 0.9, 0.95, 0.99, 1.0)
"""The decided shares of the pool reported as ``q50 … q100``."""

COVERAGE_FIELDS = ("domain", "strategy", "repeat", "pool") + tuple(
    f"q{round(s * 100)}" for s in SHARES)
ORACLE_FIELDS = ("domain", "pool", "cover_pairs", "greedy_oracle")
ORACLE = "oracle"
"""The name of the greedy oracle's rows in ``coverage.csv`` (paired with the strategies)."""


def _cell(values: list[float]) -> str:
    if not values:
        return ""
    mean, half = mean_ci(values)
    return f"{mean:.0f}" if math.isnan(half) else f"{mean:.0f} ± {half:.0f}"


def _shares_table(items: list[dict], strategies: list[str], keys: list[str]) -> list[str]:
    """One line per strategy: the mean questions to each share, and q100 against the oracle."""
    oracle_q = [r["q100"] for r in items if r["strategy"] == ORACLE and r["q100"] != ""]
    lines = []
    for name in strategies:
        mine = [r for r in items if r["strategy"] == name]
        cells = [_cell([r[k] for r in mine if r[k] != ""]) for k in keys]
        done = [r["q100"] for r in mine if r["q100"] != ""]
        ratio = (f"{np.mean(done) / np.mean(oracle_q):.2f}" if done and oracle_q
                 and len(done) == len(mine) else "")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    return lines


def _paired_table(items: list[dict], strategies: list[str]) -> list[str]:
    """The paired q100 differences against the best of LC-R+ and QBC-R+ present."""
    baselines = [s for s in ("LC-R+", "QBC-R+") if s in strategies]
    if not baselines:
        return []
    by = {(r["strategy"], r["repeat"]): r for r in items}
    means = {}
    for name in strategies:
        done = [r["q100"] for r in items if r["strategy"] == name and r["q100"] != ""]
        means[name] = float(np.mean(done)) if done else math.inf
    best = min(baselines, key=means.__getitem__)
    lines = [f"Paired q100 differences against {best} (same seeds):", "",
             "| strategy | q100 difference (95% CI) | relative | fewer in |",
             "|---|---|---|---|"]
    for name in strategies:
        if name == best:
            continue
        diff = [by[(name, r)]["q100"] - by[(best, r)]["q100"]
                for (s, r) in by if s == name and (best, r) in by
                and by[(name, r)]["q100"] != "" and by[(best, r)]["q100"] != ""]
        if not diff:
            continue
        mean, half = mean_ci(diff)
        lines.append(f"| {name} | {mean:+.1f} ± {half:.1f} | {mean / means[best]:+.1%} | "
                     f"{sum(d < 0 for d in diff)}/{len(diff)} |")
    return lines + [""]


def coverage_table(rows: list[dict], oracle: list[dict]) -> str:
    """The mean questions to each decided share (95% interval), and paired q100 differences.

    Every strategy of a repeat starts from the same seed questions, so the q100 differences
    are paired per repeat against the best (lowest mean q100) of LC-R+ and QBC-R+ present.
    """
    keys = [f"q{round(s * 100)}" for s in SHARES]
    lines: list[str] = []
    for domain in dict.fromkeys(r["domain"] for r in rows):
        items = [r for r in rows if r["domain"] == domain]
        runs = len({r["repeat"] for r in items})
        found = [o for o in oracle if o["domain"] == domain]
        covers = found[0]["cover_pairs"] if found else ""
        lines += [f"### {domain} (pool {items[0]['pool']}, {covers} cover pairs, {runs} "
                  "repeats)", "",
                  "| strategy | " + " | ".join(keys) + " | q100 / oracle |",
                  "|---" * (len(keys) + 2) + "|"]
        strategies = list(dict.fromkeys(r["strategy"] for r in items))
        lines += _shares_table(items, strategies, keys)
        lines.append("")
        lines += _paired_table(items, strategies)
    return "\n".join(lines)


def plot_coverage(curves: dict[tuple[str, str], list[np.ndarray]],
                  pools: dict[str, int], path: str | Path) -> None:
    """Decided share against questions, the mean over repeats per strategy; the oracle dashed."""
    domains = list(dict.fromkeys(d for d, _ in curves))
    fig = Figure(figsize=(5.4 * len(domains), 4.2), layout="constrained")
    axes = fig.subplots(1, len(domains), squeeze=False)[0]
    for ax, domain in zip(axes, domains, strict=True):
        for (d, name), runs in curves.items():
            if d != domain:
                continue
            length = max(len(r) for r in runs)
            padded = np.array([np.pad(r, (0, length - len(r)), mode="edge") for r in runs])
            share = padded.mean(axis=0) / pools[domain]
            x = np.arange(1, length + 1)
            if name == ORACLE:
                ax.plot(x, share, color="black", linestyle="--", linewidth=1.5,
                        label="greedy oracle")
            else:
                ax.plot(x, share, linewidth=1.5, label=name)
        ax.set_title(domain)
        ax.set_xlabel("questions (seed questions included)")
        ax.set_ylabel("decided share of the pool")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.savefig(path, dpi=110)
