"""The tables and the plot of the team runs (:mod:`~reasoning.simulation.team_runs`).

``coverage.md`` has, per domain and team (noise, noise model), one line per policy: the
answers (and their ratio to the perfect annotator's of the same repeat), the share of the pool
decided wrongly and the positive-pair F1, each a mean with its 95% interval; then the paired
comparisons between policies on the same repeats (the same seed questions and the same noise
draws where they ask the same pair of the same annotator), paired 95% intervals.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from reasoning import report
from reasoning.report import mean_ci
from reasoning.simulation.teams import CONSENSUS_VARIANTS

__all__ = ["PAIRED", "team_table", "write_reports"]

PAIRED = (("consensus", "trust"), ("consensus", "double"),
          ("consensus", "consensus-unweighted"), ("consensus", "consensus-nocheck"),
          ("consensus-nocheck", "trust"), ("double", "trust"),
          ("consensus-now", "trust"), ("consensus-now", "consensus-now-unweighted"),
          *((name, "consensus") for name in CONSENSUS_VARIANTS
            if name not in ("consensus", "consensus-unweighted", "consensus-nocheck")))
"""The policy pairs compared repeat by repeat (first minus second); every other consensus
variant against ``consensus``; the service's policy (``consensus-now``) against ``trust``
and against itself without reliability weights."""

_ORDER = ("trust", "double", "consensus", "consensus-unweighted", "consensus-nocheck")


def _team(row: dict) -> tuple[str, str]:
    return str(row["noise"]), str(row["noise_model"])


def _perfect(row: dict) -> bool:
    """One annotator who never errs: ``trust`` at noise 0, every annotator independent (a
    team that answers the direct relation at noise 0 errs all the same)."""
    return row["policy"] == "trust" and all(
        float(x) == 0.0 for x in str(row["noise"]).split(",")) and all(
        m == "independent" for m in str(row["noise_model"]).split(","))


def _cell(values: Sequence[float], scale: float = 1.0, digits: int = 1) -> str:
    if not values:
        return ""
    mean, half = mean_ci([v * scale for v in values])
    if math.isnan(half):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def _policy_lines(items: list[dict], perfect: dict[int, int]) -> list[str]:
    lines = ["| policy | runs | answers | answers / perfect | wrong % of pool | positive F1 "
             "| 2nd opinions | disagreements | checks |", "|---" * 9 + "|"]
    policies = sorted({r["policy"] for r in items},
                      key=lambda p: (_ORDER.index(p) if p in _ORDER else 99, p))
    for policy in policies:
        mine = [r for r in items if r["policy"] == policy]
        ratio = [r["answers"] / perfect[r["repeat"]] for r in mine if r["repeat"] in perfect]
        lines.append(
            f"| {policy} | {len(mine)} | {_cell([r['answers'] for r in mine], digits=0)} | "
            f"{_cell(ratio, digits=2)} | {_cell([r['error_rate'] for r in mine], 100, 2)} | "
            f"{_cell([r['positive_f1'] for r in mine], digits=3)} | "
            f"{_cell([r['second_opinions'] for r in mine], digits=0)} | "
            f"{_cell([r['disagreements'] for r in mine], digits=0)} | "
            f"{_cell([r['checks'] for r in mine], digits=0)} |")
    return lines


def _paired_lines(items: list[dict]) -> list[str]:
    by = {(r["policy"], r["repeat"]): r for r in items}
    lines = []
    for first, second in PAIRED:
        shared = sorted(rep for (p, rep) in by if p == first and (second, rep) in by)
        if not shared:
            continue
        error = [100 * (by[(first, r)]["error_rate"] - by[(second, r)]["error_rate"])
                 for r in shared]
        answers = [by[(first, r)]["answers"] - by[(second, r)]["answers"] for r in shared]
        fewer = sum(e < 0 for e in error)
        lines.append(f"| {first} − {second} | {len(shared)} | {_cell(error, digits=2)} | "
                     f"{fewer}/{len(shared)} | {_cell(answers, digits=0)} |")
    if not lines:
        return []
    return ["", "Paired differences (same repeats):", "",
            "| policies | repeats | wrong % of pool (points) | fewer wrong in | answers |",
            "|---|---|---|---|---|", *lines]


def team_table(rows: list[dict]) -> str:
    """``coverage.md``: per domain and team the policies, then the paired comparisons."""
    out: list[str] = []
    for domain in dict.fromkeys(r["domain"] for r in rows):
        items = [r for r in rows if r["domain"] == domain]
        perfect = {r["repeat"]: r["answers"] for r in items if _perfect(r)}
        pool = items[0]["pool"]
        reference = _cell(list(perfect.values()), digits=0)
        out += [f"## {domain} (pool {pool}; the perfect annotator: {reference} answers, "
                f"{len(perfect)} repeats)", ""]
        for team in dict.fromkeys(_team(r) for r in items):
            mine = [r for r in items if _team(r) == team and not _perfect(r)]
            if not mine:
                continue
            out += [f"### noise {team[0]}, noise model {team[1]}, "
                    f"{mine[0]['annotators']} annotators", ""]
            out += _policy_lines(mine, perfect) + _paired_lines(mine) + [""]
    return "\n".join(out)


_COLOURS = {"trust": "tab:red", "double": "tab:grey", "consensus": "tab:blue",
            "consensus-unweighted": "tab:orange", "consensus-nocheck": "tab:green"}


def _team_title(team: tuple[str, str]) -> str:
    noise, model = team
    models = model.split(",")
    who = model if len(set(models)) == 1 else ", ".join(
        f"{models.count(m)} {m}" for m in dict.fromkeys(models))
    return f"ε {noise}; {who}"


def plot_teams(lines: list[dict], path: Path) -> None:
    """The wrong share of the pool against the answers: one panel per domain (row) and team
    (column), the mean curve of each policy in its own colour."""
    curves: dict[tuple[str, tuple[str, str], str], list[np.ndarray]] = defaultdict(list)
    pools: dict[str, int] = {}
    for line in lines:
        row = line["row"]
        if _perfect(row):
            continue
        pools[row["domain"]] = row["pool"]
        curves[(row["domain"], _team(row), row["policy"])].append(
            np.asarray(line["wrong"], dtype=np.float64))
    domains = list(pools)
    teams = list(dict.fromkeys(team for _, team, _ in curves))
    if not domains:
        return
    cols = min(3, len(teams))
    per = -(-len(teams) // cols)  # rows of panels per domain
    fig = Figure(figsize=(4.6 * cols, 3.4 * per * len(domains)), layout="constrained")
    grid = fig.subplots(per * len(domains), cols, squeeze=False, sharey=True)

    def axis(domain: str, team: tuple[str, str]):
        k = teams.index(team)
        return grid[domains.index(domain) * per + k // cols][k % cols]

    for (domain, team, policy), runs in curves.items():
        length = max(len(r) for r in runs)
        padded = np.array([np.pad(r, (0, length - len(r)), mode="edge") for r in runs])
        axis(domain, team).plot(np.arange(1, length + 1),
                                100 * padded.mean(axis=0) / pools[domain], linewidth=1.3,
                                color=_COLOURS.get(policy), label=f"{policy} ({len(runs)})")
    for ax in grid.flat:
        ax.set_visible(False)
    for domain in domains:
        for team in teams:
            ax = axis(domain, team)
            ax.set_visible(True)
            ax.set_title(f"{domain}: {_team_title(team)}", fontsize=9)
            ax.set_yscale("log")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7, loc="upper right", title="policy (repeats)",
                          title_fontsize=7)
            ax.set_xlabel("answers (seed and check questions included)", fontsize=8)
            ax.set_ylabel("wrong or undecided, % of pool", fontsize=8)
    fig.savefig(path, dpi=100)


def write_reports(out: Path, lines: list[dict], fields: Sequence[str]) -> None:
    """Write ``coverage.csv``, ``coverage.md`` and ``coverage.png`` from the runs' lines."""
    rows = sorted((line["row"] for line in lines),
                  key=lambda r: (r["domain"], str(r["noise"]), str(r["noise_model"]),
                                 _ORDER.index(r["policy"]) if r["policy"] in _ORDER else 99,
                                 r["repeat"]))
    report.write_csv(out / "coverage.csv", rows, fields)
    (out / "coverage.md").write_text(team_table(rows), encoding="utf-8")
    plot_teams(lines, out / "coverage.png")
