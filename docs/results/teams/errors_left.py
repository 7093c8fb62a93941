"""Where one consensus run's extra answers go, and which wrong labels it leaves (README.md,
"Why the targets are missed").

Usage: python docs/results/teams/errors_left.py DOMAIN NOISE REPEAT
(e.g. ``data_mining 0.1 0``, or ``data_mining 0.1,0.1,0.1,0.1,0.3 0`` for one careless annotator
of five; the data from ``$SPORAL_DATASETS/al-cpl``, by default
``../shared/datasets/al-cpl`` beside the repository). It replays one repeat of the sweep's
``consensus`` run (the same seed, so the same answers as its line in ``runs.jsonl``) and
prints, per reason, the answers, the wrong answers among them and the label changes they
caused, the annotators' estimated accuracies, then every asserted label left wrong with its
answers, its stake (the pool pairs its first answer decided), the value of information that a
second opinion needs to reach (P(wrong) × stake ≥ 0.3) and the model's probability.
"""

import collections
import os
import sys
from pathlib import Path

from reasoning.consensus.asking import AskPolicy
from reasoning.simulation import teams
from reasoning.simulation.oracle import Team
from reasoning.simulation.team_runs import cached_domain, parse_team
from reasoning.strategies import get_strategy

DATA = Path(os.environ.get("SPORAL_DATASETS", Path(__file__).resolve().parents[4] / "shared"
                           / "datasets")) / "al-cpl"


class Traced(teams._Consensus):
    """The consensus policy of the sweep, recording each answer's reason and effect."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = []

    def ask(self, member, choice):
        run = self.run
        row = run.rows[(int(choice.a), int(choice.b))]
        before = dict(self.view.result.labels)
        super().ask(member, choice)
        after = self.view.result.labels
        changed = any(before.get(p) != after.get(p) for p in before)
        right = self.answers[-1].positive == bool(run.truth[row])
        self.log.append(("check" if choice.check else choice.reason, right, changed))


def main(domain_name, noise, repeat):
    domain = cached_domain(str(DATA), domain_name)
    pairs = domain.index_pairs()
    team = Team.build(pairs, domain.labels, *parse_team(noise, 5), seed=0, repeat=repeat)
    # run_team's consensus branch, with the traced policy
    run = teams._Run(pairs, domain.features, domain.labels, len(domain.concepts), team,
                     get_strategy("default"), seed=0, repeat=repeat)
    traced = Traced(run, True, AskPolicy())
    traced.run_all()
    out = run.finish()
    view = traced.view
    print(f"{domain_name}, ε = {noise}, repeat {repeat}: {out.answers} answers, "
          f"{out.wrong_pairs} pool pairs wrong of {out.pool}")
    counts = collections.Counter()
    for reason, right, changed in traced.log:
        counts[reason, "answers"] += 1
        counts[reason, "wrong"] += not right
        counts[reason, "changed"] += changed
    print("| reason | answers | wrong answers | answers that changed a label |")
    print("|---|---|---|---|")
    for reason in ("new", "second-opinion", "disagreement", "check"):
        print(f"| {reason} | {counts[reason, 'answers']} | {counts[reason, 'wrong']} | "
              f"{counts[reason, 'changed']} |")
    accuracy = ", ".join(f"{name} {value:.2f}" for name, value in
                         sorted(view.result.accuracy.items(), key=lambda kv: str(kv[0])))
    print(f"\nestimated accuracies: {accuracy}")
    print("\nwrong labels left: | answers | stake | P(wrong) × stake | model P(positive) |")
    for pair, value in view.result.labels.items():
        if value == bool(run.truth[run.rows[pair]]):
            continue
        stake = traced.stake.get(pair, 1)
        score = traced.policy.p_wrong(view, pair, value, {}) * stake
        print(f"  {pair}: {len(traced.by_pair[pair])} | {stake} | {score:.2f} | "
              f"{run.proba.get(pair, 0.5):.2f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
