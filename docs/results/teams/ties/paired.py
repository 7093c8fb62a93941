"""The tie rule's cost, paired by repeat: ``python docs/results/teams/ties/paired.py BEFORE AFTER``
(two ``runs.jsonl`` of ``sporal simulate --mode coverage --policy consensus``) prints the table of
``ties.md``: answers and wrong pool pairs of the consensus runs, before and after, per repeat."""

from __future__ import annotations

import json
import statistics
import sys

__all__ = ["load", "main"]


def load(path: str) -> dict[tuple[str, int], dict]:
    """The rows of a ``runs.jsonl`` by (policy, repeat)."""
    rows = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)["row"]
            rows[(row["policy"], row["repeat"])] = row
    return rows


def _paired(values: list[int]) -> str:
    spread = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
    return f"{statistics.mean(values):+.1f} ± {spread:.1f}"


def main(before_path: str, after_path: str) -> None:
    before, after = load(before_path), load(after_path)
    repeats = sorted(r for p, r in before if p == "consensus" and ("consensus", r) in after)
    print("| repeat | answers before | after | wrong pairs before | after "
          "| disagreement questions before | after |")
    print("|---|---|---|---|---|---|---|")
    for r in repeats:
        x, y, perfect = before[("consensus", r)], after[("consensus", r)], before[("trust", r)]
        print(f"| {r} | {x['answers']} ({x['answers'] / perfect['answers']:.2f}×) "
              f"| {y['answers']} ({y['answers'] / perfect['answers']:.2f}×) "
              f"| {x['wrong_pairs']} | {y['wrong_pairs']} "
              f"| {x['disagreements']} | {y['disagreements']} |")
    answers = [after[("consensus", r)]["answers"] - before[("consensus", r)]["answers"]
               for r in repeats]
    wrong = [after[("consensus", r)]["wrong_pairs"] - before[("consensus", r)]["wrong_pairs"]
             for r in repeats]
    print(f"\n{len(repeats)} paired repeats: answers after − before {_paired(answers)}, "
          f"wrong pool pairs after − before {_paired(wrong)} (mean ± standard error)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
