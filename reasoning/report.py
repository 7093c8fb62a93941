"""Tables and plots of a simulation: the paper's Figure 2 (AUC) and Figure 3 (labeled pairs).

:func:`write_outputs` writes, into one folder:

* ``curves.csv``: ``domain,strategy,repeat,queries,labeled,auc,closure_seconds``, one row per
  evaluation point of every run;
* ``summary.csv``: per domain, strategy and number of queries, the mean AUC with its 95%
  confidence interval (Student t over the repeats) and the mean labeled-set size;
* ``summary.md``: the same at 50, 100, 150 queries (or what was run) as a Markdown table;
* ``claims.md``: the paper's comparisons as paired differences over the same splits;
* ``runs.csv`` and ``timing.csv``: seconds per run and wall time per domain;
* ``auc.png`` (LC family and QBC family per domain) and ``labeled.png``.

``python -m reasoning.report DIR`` rebuilds the summary and the plots from ``DIR/curves.csv``.
"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from scipy import stats

from reasoning.strategies import ALL_STRATEGIES

__all__ = [
    "CLAIMS",
    "CURVE_FIELDS",
    "SUMMARY_FIELDS",
    "claims_table",
    "consistent_differences",
    "consistent_table",
    "markdown_table",
    "mean_ci",
    "paired_differences",
    "plot_auc",
    "plot_labeled",
    "read_curves",
    "rebuild",
    "summarize",
    "write_csv",
    "write_outputs",
]

CURVE_FIELDS = ("domain", "strategy", "repeat", "queries", "labeled", "auc", "closure_seconds",
                "auc_consistent")
SUMMARY_FIELDS = ("domain", "strategy", "queries", "runs", "auc_mean", "auc_ci_low",
                  "auc_ci_high", "auc_half_width", "labeled_mean", "labeled_half_width")
_FAMILIES = {"LC": ("LC", "LC-R", "LC-R+"), "QBC": ("QBC", "QBC-R", "QBC-R+")}
_REFERENCES = {"Random": ("grey", ":"), "Random-R": ("grey", "--"), "CNT": ("black", "-."),
               "EDP": ("tab:red", "-"), "EDP-Q": ("tab:purple", "-"),
               "EDP-C": ("tab:brown", "-")}
_LEVEL_COLOR = ("tab:blue", "tab:orange", "tab:green")  # no reasoning, -R, -R+


def write_csv(path: Path, rows: Iterable[dict], fields: Sequence[str]) -> None:
    """Write ``rows`` with the columns ``fields`` (floats with 6 significant digits)."""
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                             for k, v in row.items()})


def read_curves(path: str | Path) -> list[dict]:
    """The rows of a ``curves.csv`` with numbers parsed."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for key in ("repeat", "queries", "labeled"):
            row[key] = int(row[key])
        for key in ("auc", "closure_seconds", "auc_consistent"):
            if key in row:
                row[key] = float(row[key]) if row[key] not in ("", None) else math.nan
    return rows


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the half-width of its 95% Student-t confidence interval (nan for n < 2)."""
    data = np.asarray(values, dtype=np.float64)
    mean = float(data.mean())
    if len(data) < 2:
        return mean, math.nan
    sem = float(data.std(ddof=1)) / math.sqrt(len(data))
    return mean, float(stats.t.ppf(0.975, len(data) - 1)) * sem


def _strategy_key(name: str) -> int:
    """The registry's order; other names (a benchmark's own) after every strategy."""
    return ALL_STRATEGIES.index(name) if name in ALL_STRATEGIES else len(ALL_STRATEGIES)


def summarize(rows: Iterable[dict]) -> list[dict]:
    """Mean AUC (95% CI) and mean labeled-set size per domain, strategy and number of queries.

    Examples
    --------
    >>> rows = [{"domain": "d", "strategy": "LC", "repeat": r, "queries": 0,
    ...          "labeled": 20, "auc": a} for r, a in enumerate([0.6, 0.8])]
    >>> s = summarize(rows)[0]
    >>> round(s["auc_mean"], 2), s["runs"], s["labeled_mean"]
    (0.7, 2, 20.0)
    """
    groups: dict[tuple[str, str, int], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["domain"], row["strategy"], int(row["queries"]))].append(row)
    summary: list[dict] = []
    for (domain, strategy, queries), items in groups.items():
        auc, auc_half = mean_ci([r["auc"] for r in items])
        labeled, labeled_half = mean_ci([r["labeled"] for r in items])
        summary.append({"domain": domain, "strategy": strategy, "queries": queries,
                        "runs": len(items), "auc_mean": auc, "auc_ci_low": auc - auc_half,
                        "auc_ci_high": auc + auc_half, "auc_half_width": auc_half,
                        "labeled_mean": labeled, "labeled_half_width": labeled_half})
    summary.sort(key=lambda s: (s["domain"], _strategy_key(s["strategy"]), s["queries"]))
    return summary


def _series(summary: list[dict], domain: str, strategy: str, key: str):
    items = [s for s in summary if s["domain"] == domain and s["strategy"] == strategy]
    q = np.array([s["queries"] for s in items])
    mean = np.array([s[f"{key}_mean"] for s in items])
    half = np.array([s[f"{key}_half_width"] for s in items])
    return q, mean, half


def _domains(summary: list[dict]) -> list[str]:
    return sorted({s["domain"] for s in summary})


def _present(summary: list[dict], domain: str) -> set[str]:
    return {s["strategy"] for s in summary if s["domain"] == domain}


def plot_auc(summary: list[dict], path: str | Path) -> None:
    """Figure 2: AUC against queries with 95% bands; LC family and QBC family per domain.

    Each panel shows a family with and without reasoning (bands) and the references Random,
    Random-R and CNT (lines).
    """
    domains = _domains(summary)
    fig = Figure(figsize=(11, 3.6 * len(domains)), layout="constrained")
    axes = fig.subplots(len(domains), 2, squeeze=False)
    for row, domain in zip(axes, domains, strict=True):
        present = _present(summary, domain)
        for ax, (fam, members) in zip(row, _FAMILIES.items(), strict=True):
            for name, (color, style) in _REFERENCES.items():
                if name in present:
                    q, mean, _ = _series(summary, domain, name, "auc")
                    ax.plot(q, mean, color=color, linestyle=style, linewidth=1, label=name)
            for color, name in zip(_LEVEL_COLOR, members, strict=True):
                if name in present:
                    q, mean, half = _series(summary, domain, name, "auc")
                    ax.plot(q, mean, color=color, linewidth=2, label=name)
                    ax.fill_between(q, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1),
                                    color=color, alpha=0.2)
            ax.set_title(f"{domain}: {fam} family")
            ax.set_xlabel("queries")
            ax.set_ylabel("ROC AUC (test pairs)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
    fig.savefig(path, dpi=110)


def plot_labeled(summary: list[dict], path: str | Path) -> None:
    """Figure 3: the labeled-set size against queries, every strategy, one panel per domain."""
    domains = _domains(summary)
    fig = Figure(figsize=(5.2 * len(domains), 4), layout="constrained")
    axes = fig.subplots(1, len(domains), squeeze=False)[0]
    styles = {"random": ":", "lc": "-", "qbc": "--"}
    for ax, domain in zip(axes, domains, strict=True):
        present = _present(summary, domain)
        for level, names in enumerate((("Random", "LC", "QBC"), ("Random-R", "LC-R", "QBC-R"),
                                       ("CNT", "LC-R+", "QBC-R+"))):
            for name, style in zip(names, styles.values(), strict=True):
                if name in present:
                    q, mean, half = _series(summary, domain, name, "labeled")
                    ax.plot(q, mean, color=_LEVEL_COLOR[level], linestyle=style, label=name)
                    ax.fill_between(q, mean - half, mean + half, color=_LEVEL_COLOR[level],
                                    alpha=0.12)
        for name in ("EDP", "EDP-Q", "EDP-C"):  # beyond the paper
            if name in present:
                q, mean, half = _series(summary, domain, name, "labeled")
                color = _REFERENCES[name][0]
                ax.plot(q, mean, color=color, label=name)
                ax.fill_between(q, mean - half, mean + half, color=color, alpha=0.12)
        ax.set_title(domain)
        ax.set_xlabel("queries")
        ax.set_ylabel("labeled train pairs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, ncol=3)
    fig.savefig(path, dpi=110)


def _at(summary: list[dict], marks: Sequence[int]) -> list[int]:
    """The requested marks that were evaluated, else the last evaluation point."""
    evaluated = sorted({s["queries"] for s in summary})
    chosen = [q for q in marks if q in evaluated]
    return chosen or evaluated[-1:]


def markdown_table(summary: list[dict], marks: Sequence[int] = (50, 100, 150)) -> str:
    """Mean AUC ± CI half-width at ``marks`` queries and the labeled-set size at the last mark."""
    marks = _at(summary, marks)
    index = {(s["domain"], s["strategy"], s["queries"]): s for s in summary}
    lines = []
    for domain in _domains(summary):
        strategies = sorted(_present(summary, domain), key=_strategy_key)
        runs = max(s["runs"] for s in summary if s["domain"] == domain)
        lines += [f"### {domain} ({runs} repeats)", "",
                  "| strategy | " + " | ".join(f"AUC @{q}" for q in marks)
                  + f" | labeled @{marks[-1]} |",
                  "|---" * (len(marks) + 2) + "|"]
        for name in strategies:
            cells = []
            for q in marks:
                s = index.get((domain, name, q))
                cells.append("" if s is None
                             else f"{s['auc_mean']:.3f} ± {s['auc_half_width']:.3f}")
            last = index.get((domain, name, marks[-1]))
            labeled = "" if last is None else f"{last['labeled_mean']:.0f}"
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {labeled} |")
        lines.append("")
    return "\n".join(lines)


CLAIMS = (("Random-R", "Random"), ("LC-R", "LC"), ("QBC-R", "QBC"),
          ("LC-R+", "LC-R"), ("QBC-R+", "QBC-R"), ("CNT", "Random-R"), ("EDP", "LC-R+"),
          ("EDP-F", "LC-R+"))
"""The paper's comparisons (reasoning against none, then ``-R+`` against ``-R``), and the
strategies beyond the paper against the paper's LC-R+."""


def paired_differences(rows: Iterable[dict], comparisons: Sequence[tuple[str, str]] = CLAIMS,
                       marks: Sequence[int] = (50, 100, 150)) -> list[dict]:
    """AUC and labeled-set differences of strategy pairs on the same repeats (same splits).

    Every strategy of a repeat shares the split and the seed queries, so the per-repeat
    difference removes the split's luck; its mean comes with a 95% Student-t interval and the
    count of repeats where the first strategy was ahead.
    """
    index = {(r["domain"], r["strategy"], r["repeat"], int(r["queries"])): r for r in rows}
    domains = sorted({key[0] for key in index})
    evaluated = sorted({key[3] for key in index})
    chosen = [q for q in marks if q in evaluated] or evaluated[-1:]
    out = []
    for domain in domains:
        for first, second in comparisons:
            for q in chosen:
                repeats = sorted(key[2] for key in index
                                 if key[0] == domain and key[1] == first and key[3] == q
                                 and (domain, second, key[2], q) in index)
                if not repeats:
                    continue
                a = [index[(domain, first, r, q)] for r in repeats]
                b = [index[(domain, second, r, q)] for r in repeats]
                diff = [x["auc"] - y["auc"] for x, y in zip(a, b, strict=True)]
                mean, half = mean_ci(diff)
                out.append({"domain": domain, "first": first, "second": second, "queries": q,
                            "runs": len(diff), "auc_difference": mean, "half_width": half,
                            "ahead": sum(d > 0 for d in diff),
                            "labeled_first": float(np.mean([x["labeled"] for x in a])),
                            "labeled_second": float(np.mean([y["labeled"] for y in b]))})
    return out


def consistent_differences(rows: Iterable[dict],
                           marks: Sequence[int] = (25, 50, 100, 150)) -> list[dict]:
    """The consistent map's AUC minus the forest's, paired on the same runs.

    Also the mean over every evaluation point of a run up to each mark (the paper's AUC
    summary), as ``queries`` = ``"mean 0–q"``.
    """
    runs: dict[tuple[str, str, int], dict[int, tuple[float, float]]] = defaultdict(dict)
    for r in rows:
        value = r.get("auc_consistent", math.nan)
        if value == value:  # not nan: a reasoning setting
            runs[(r["domain"], r["strategy"], r["repeat"])][int(r["queries"])] = (
                float(value), float(r["auc"]))
    out = []
    for domain, strategy in sorted({(d, s) for d, s, _ in runs}):
        mine = [points for (d, s, _), points in runs.items() if d == domain and s == strategy]
        evaluated = sorted({q for points in mine for q in points})
        for q in [m for m in marks if m in evaluated] or evaluated[-1:]:
            at = [points[q][0] - points[q][1] for points in mine if q in points]
            upto = [float(np.mean([v[0] - v[1] for k, v in points.items() if k <= q]))
                    for points in mine]
            for label, diff in ((str(q), at), (f"mean 0–{q}", upto)):
                mean, half = mean_ci(diff)
                out.append({"domain": domain, "strategy": strategy, "queries": label,
                            "runs": len(diff), "difference": mean, "half_width": half,
                            "ahead": sum(d > 0 for d in diff)})
    return out


def _table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table of ``columns`` and one line per row of cells."""
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def consistent_table(differences: list[dict]) -> str:
    """The consistent map against the raw forest as a Markdown table."""
    return _table(["domain", "strategy", "queries", "consistent − forest AUC (95% CI)", "ahead"],
                  ([d["domain"], d["strategy"], d["queries"],
                    f"{d['difference']:+.4f} ± {d['half_width']:.4f}",
                    f"{d['ahead']}/{d['runs']}"] for d in differences))


def curve_mean_differences(rows: Iterable[dict],
                           comparisons: Sequence[tuple[str, str]] = CLAIMS) -> list[dict]:
    """Paired differences of each run's mean AUC over every evaluated point (0 … the last).

    The issue-level summary of a whole curve: "mean AUC over 0–150 queries" for the default
    profile.

    Examples
    --------
    >>> rows = [{"domain": "d", "strategy": s, "repeat": r, "queries": q, "auc": a,
    ...          "labeled": 0}
    ...         for s, base in (("EDP", 0.8), ("LC-R+", 0.7)) for r in (0, 1)
    ...         for q, a in ((0, 0.5), (10, base + r / 10))]
    >>> [(d["first"], round(d["difference"], 3), d["ahead"]) for d in
    ...  curve_mean_differences(rows)]
    [('EDP', 0.05, 2)]
    """
    runs: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    last: dict[str, int] = {}
    for r in rows:
        runs[(r["domain"], r["strategy"], r["repeat"])].append(float(r["auc"]))
        last[r["domain"]] = max(last.get(r["domain"], 0), int(r["queries"]))
    means = {key: float(np.mean(values)) for key, values in runs.items()}
    out = []
    for domain in sorted(last):
        for first, second in comparisons:
            repeats = sorted(k[2] for k in means if k[0] == domain and k[1] == first
                             and (domain, second, k[2]) in means)
            if not repeats:
                continue
            diff = [means[(domain, first, r)] - means[(domain, second, r)] for r in repeats]
            mean, half = mean_ci(diff)
            out.append({"domain": domain, "first": first, "second": second,
                        "queries": last[domain], "runs": len(diff), "difference": mean,
                        "half_width": half, "ahead": sum(d > 0 for d in diff),
                        "mean_first": float(np.mean([means[(domain, first, r)]
                                                     for r in repeats])),
                        "mean_second": float(np.mean([means[(domain, second, r)]
                                                      for r in repeats]))})
    return out


def curve_mean_table(differences: list[dict]) -> str:
    """:func:`curve_mean_differences` as a Markdown table."""
    return _table(["domain", "comparison", "queries", "mean AUC", "difference (95% CI)",
                   "ahead"],
                  ([d["domain"], f"{d['first']} − {d['second']}", f"0–{d['queries']}",
                    f"{d['mean_first']:.4f} vs {d['mean_second']:.4f}",
                    f"{d['difference']:+.4f} ± {d['half_width']:.4f}",
                    f"{d['ahead']}/{d['runs']}"] for d in differences))


def claims_table(differences: list[dict]) -> str:
    """The paired differences as a Markdown table."""
    return _table(["domain", "comparison", "queries", "AUC difference (95% CI)", "ahead",
                   "labeled"],
                  ([d["domain"], f"{d['first']} − {d['second']}", d["queries"],
                    f"{d['auc_difference']:+.3f} ± {d['half_width']:.3f}",
                    f"{d['ahead']}/{d['runs']}",
                    f"{d['labeled_first']:.0f} vs {d['labeled_second']:.0f}"]
                   for d in differences))


def write_outputs(out: Path, rows: list[dict], runs: list[dict], timing: list[dict], *,
                  domains: Sequence[str]) -> None:
    """Write every file of a simulation into ``out`` (see the module docstring)."""
    order = {d: i for i, d in enumerate(domains)}
    rows = sorted(rows, key=lambda r: (order.get(r["domain"], 0), _strategy_key(r["strategy"]),
                                       r["repeat"], r["queries"]))
    runs = sorted(runs, key=lambda r: (order.get(r["domain"], 0), _strategy_key(r["strategy"]),
                                       r["repeat"]))
    write_csv(out / "curves.csv", rows, CURVE_FIELDS)
    write_csv(out / "runs.csv", runs, ("domain", "strategy", "repeat", "seconds",
                                       "closure_seconds"))
    write_csv(out / "timing.csv", timing, ("domain", "runs", "jobs", "wall_seconds",
                                           "run_seconds"))
    rebuild(out)


def rebuild(out: str | Path) -> list[dict]:
    """Summary, Markdown table and plots from ``out/curves.csv``; returns the summary."""
    out = Path(out)
    curves = read_curves(out / "curves.csv")
    summary = summarize(curves)
    write_csv(out / "summary.csv", summary, SUMMARY_FIELDS)
    (out / "summary.md").write_text(markdown_table(summary), encoding="utf-8")
    claims = claims_table(paired_differences(curves))
    whole = curve_mean_differences(curves)
    if whole:
        claims += ("\n### Whole curves: each run's mean AUC over every evaluated point\n\n"
                   + curve_mean_table(whole))
    consistent = consistent_differences(curves)
    if consistent:
        claims += ("\n### The consistent map against the raw forest (same runs)\n\n"
                   + consistent_table(consistent))
    (out / "claims.md").write_text(claims, encoding="utf-8")
    plot_auc(summary, out / "auc.png")
    plot_labeled(summary, out / "labeled.png")
    return summary


if __name__ == "__main__":  # pragma: no cover
    for folder in sys.argv[1:]:
        rebuild(folder)
        print((Path(folder) / "summary.md").read_text(encoding="utf-8"))
