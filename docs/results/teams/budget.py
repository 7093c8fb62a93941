"""The tables of budget.md: each consensus variant against ``consensus``, paired by repeat.

Usage: python docs/results/teams/budget.py [DOMAIN ...] [--noise 0.1] [--teams]
(default: every folder under ``budget/``). Reads ``budget/DOMAIN/runs.jsonl`` (written by
``sporal simulate --mode coverage --out docs/results/teams/budget/DOMAIN --resume``) and
prints, per domain, one line per policy over the repeats it shares with ``consensus``: the
wrong share of the pool and the answers per the perfect annotator's of the same repeat
(means with 95% Student-t intervals), then the paired differences (policy − consensus); and
with several domains, those differences pooled over them. ``--teams``: instead, the issue's
other targets under the service's policy (``consensus-now``; ``sweep.sh DOMAIN R 1 now``):
ε = 0.05, ε = 0, one annotator answering the direct relation with four at 0.05, and a
careless annotator (four at 0.10, one at 0.30) weighted against unweighted.
"""

import argparse
import json
from pathlib import Path

from reasoning.report import mean_ci

HERE = Path(__file__).resolve().parent / "budget"


def _cell(values: list[float], digits: int) -> str:
    mean, half = mean_ci(values)
    return f"{mean:.{digits}f}" if half != half else f"{mean:.{digits}f} ± {half:.{digits}f}"


def _runs(domain: str) -> tuple[dict, dict[int, int]]:
    """Every run of ``budget/DOMAIN/runs.jsonl`` by (noise, noise model, policy, repeat), and
    the perfect annotator's answers (``trust`` at ε = 0) by repeat."""
    runs: dict = {}
    perfect: dict[int, int] = {}
    for line in (HERE / domain / "runs.jsonl").read_text().splitlines():
        row = json.loads(line)["row"]
        if row["policy"] == "trust" and row["noise"] in ("0", "0.0"):
            perfect[row["repeat"]] = row["answers"]
        runs[(row["noise"], row["noise_model"], row["policy"], row["repeat"])] = row
    return runs, perfect


def rows(domain: str, noise: str) -> tuple[dict, dict[int, int]]:
    """The runs at ``noise`` by (policy, repeat), and the perfect annotator's answers."""
    runs, perfect = _runs(domain)
    return {(policy, rep): row for (n, model, policy, rep), row in runs.items()
            if n == noise and model == "independent"
            and not (policy == "trust" and n in ("0", "0.0"))}, perfect


def table(domain: str, noise: str) -> list[str]:
    by, perfect = rows(domain, noise)
    base = {rep for (p, rep) in by if p == "consensus" and rep in perfect}
    lines = [f"### {domain}, ε = {noise}", "",
             "| policy | repeats | wrong % of pool | answers / perfect | − consensus: wrong "
             "(points) | − consensus: answers / perfect | second opinions |",
             "|---|---|---|---|---|---|---|"]
    for policy in sorted({p for p, _ in by}, key=lambda p: (p != "consensus", p)):
        reps = sorted(rep for (p, rep) in by if p == policy and rep in base)
        if not reps:
            continue
        mine = [by[(policy, r)] for r in reps]
        ref = [by[("consensus", r)] for r in reps]
        wrong = [100 * r["error_rate"] for r in mine]
        ratio = [r["answers"] / perfect[r["repeat"]] for r in mine]
        d_wrong = [w - 100 * c["error_rate"] for w, c in zip(wrong, ref, strict=True)]
        d_ratio = [q - c["answers"] / perfect[c["repeat"]] for q, c in zip(ratio, ref,
                                                                           strict=True)]
        paired = policy != "consensus"
        lines.append(
            f"| {policy} | {len(reps)} | {_cell(wrong, 2)} | {_cell(ratio, 2)} | "
            f"{_cell(d_wrong, 2) if paired else ''} | {_cell(d_ratio, 3) if paired else ''} | "
            f"{_cell([r['second_opinions'] for r in mine], 0)} |")
    return lines + [""]


def pooled(domains: list[str], noise: str) -> list[str]:
    """Per variant, the paired differences from ``consensus`` pooled over the domains (one
    pair per domain and repeat)."""
    diffs: dict[str, list[tuple[float, float]]] = {}
    for domain in domains:
        by, perfect = rows(domain, noise)
        for (policy, rep), row in by.items():
            ref = by.get(("consensus", rep))
            if policy == "consensus" or ref is None or rep not in perfect:
                continue
            diffs.setdefault(policy, []).append((
                100 * (row["error_rate"] - ref["error_rate"]),
                (row["answers"] - ref["answers"]) / perfect[rep]))
    lines = [f"### Pooled over {', '.join(domains)}, ε = {noise}", "",
             "| policy − consensus | pairs | wrong (points) | answers / perfect |",
             "|---|---|---|---|"]
    for policy in sorted(diffs):
        pairs = diffs[policy]
        lines.append(f"| {policy} | {len(pairs)} | {_cell([d[0] for d in pairs], 2)} | "
                     f"{_cell([d[1] for d in pairs], 3)} |")
    return lines + [""]


TEAMS = (("ε = 0.05", "0.05", "independent"), ("ε = 0", "0.0", "independent"),
         ("1 direct + 4 at 0.05", "0.05", "direct,independent,independent,independent,independent"),
         ("4 at 0.10 + 1 at 0.30", "0.1,0.1,0.1,0.1,0.3", "independent"))


def teams(domain: str) -> list[str]:
    """Per team of :data:`TEAMS`, ``consensus-now`` (and ``trust``, and the careless team's
    ``consensus-now-unweighted``) over the repeats with a perfect annotator."""
    runs, perfect = _runs(domain)
    lines = [f"### {domain}: the other teams, the service's policy", "",
             "| team | policy | repeats | wrong % of pool | answers / perfect | second opinions |",
             "|---|---|---|---|---|---|"]
    for name, noise, model in TEAMS:
        policies = ["trust", "consensus-now"] + (["consensus-now-unweighted"]
                                                 if "0.3" in noise else [])
        for policy in policies:
            mine = [row for (n, m, p, rep), row in sorted(runs.items())
                    if (n, m, p) == (noise, model, policy) and rep in perfect]
            if not mine:
                continue
            lines.append(
                f"| {name} | {policy} | {len(mine)} | "
                f"{_cell([100 * r['error_rate'] for r in mine], 2)} | "
                f"{_cell([r['answers'] / perfect[r['repeat']] for r in mine], 3)} | "
                f"{_cell([r['second_opinions'] for r in mine], 0)} |")
        if "0.3" in noise:
            pairs = [(runs[(noise, model, "consensus-now", rep)],
                      runs[(noise, model, "consensus-now-unweighted", rep)]) for rep in perfect
                     if (noise, model, "consensus-now", rep) in runs
                     and (noise, model, "consensus-now-unweighted", rep) in runs]
            if pairs:
                wrong = [100 * (a["error_rate"] - b["error_rate"]) for a, b in pairs]
                more = [(a["answers"] - b["answers"]) / perfect[a["repeat"]] for a, b in pairs]
                lines.append(f"| {name} | weighted − unweighted | {len(pairs)} | "
                             f"{_cell(wrong, 2)} points | {_cell(more, 3)} | |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("domains", nargs="*")
    parser.add_argument("--noise", default="0.1")
    parser.add_argument("--teams", action="store_true", help="the other teams' targets")
    args = parser.parse_args()
    domains = args.domains or sorted(p.name for p in HERE.iterdir()
                                     if (p / "runs.jsonl").exists())
    if args.teams:
        for domain in domains:
            print("\n".join(teams(domain)))
        return
    for domain in domains:
        print("\n".join(table(domain, args.noise)))
    if len(domains) > 1:
        print("\n".join(pooled(domains, args.noise)))


if __name__ == "__main__":
    main()
