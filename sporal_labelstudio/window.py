"""The window's diff: which open tasks to retire, which pairs to add and which scores to change.

A pure function of what Label Studio holds and what sporal asks, so that it is tested without
either. The window is stable: an open task leaves it only when sporal has decided its pair (and
it was asked as a new question), new tasks only fill the free places, and the existing tasks'
scores change only when their order disagrees with sporal's ranking.

Label Studio's "Uncertainty sampling" serves the task with the lowest prediction score first, so
a score here is a rank in (0, 1) (lower: asked sooner), never a probability.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Asked", "Held", "Plan", "plan_window"]

Pair = tuple[str, str]

# Below this gap between two neighbouring scores, new tasks are not squeezed in: every open
# task is ranked again, evenly in (0, 1) (floats would lose the order after many halvings).
MIN_GAP = 1e-6


@dataclass(frozen=True)
class Held:
    """An open task of the window."""

    task_id: int
    pair: Pair
    score: float | None
    reason: str = "new"


@dataclass(frozen=True)
class Asked:
    """A question of sporal's ``next``, in its rank order."""

    pair: Pair
    reason: str = "new"


@dataclass
class Plan:
    """What a refresh changes.

    Attributes
    ----------
    retire : list[int]
        Open tasks whose pair sporal has decided: they leave the window.
    create : list[tuple[Asked, float]]
        New tasks, with their scores, best first.
    rescore : dict[int, float]
        Open tasks that stay, whose score changes.
    keep : list[int]
        Open tasks that stay.
    """

    retire: list[int] = field(default_factory=list)
    create: list[tuple[Asked, float]] = field(default_factory=list)
    rescore: dict[int, float] = field(default_factory=dict)
    keep: list[int] = field(default_factory=list)

    @property
    def touched(self) -> int:
        """Tasks created or retired (a changed score only reorders the queue)."""
        return len(self.retire) + len(self.create)


def plan_window(held: Sequence[Held], asked: Sequence[Asked], decided: Iterable[Pair],
                window: int, rerank: bool = True) -> Plan:
    """The changes that make ``held`` the window for ``asked``.

    Parameters
    ----------
    held : sequence of Held
        The open tasks.
    asked : sequence of Asked
        sporal's questions, best first (``next?k=window``).
    decided : iterable of pairs
        The held pairs that sporal has decided.
    window : int
        How many open tasks the window holds.
    rerank : bool, default True
        Whether open tasks may get new scores (two more calls to Label Studio). Without it,
        new tasks that cannot be squeezed into sporal's places go after the open ones.

    Examples
    --------
    >>> held = [Held(1, ("a", "b"), 0.0), Held(2, ("c", "d"), 0.5)]
    >>> plan = plan_window(held, [Asked(("c", "d")), Asked(("e", "f"))], [("a", "b")], 2)
    >>> plan.retire, [(q.pair, s) for q, s in plan.create], plan.rescore
    ([1], [(('e', 'f'), 0.75)], {})
    """
    decided = set(decided)
    retire = [t.task_id for t in held if t.pair in decided and t.reason == "new"]
    stay = [t for t in held if t.task_id not in set(retire)]
    open_pairs = {t.pair for t in stay}
    free = max(0, window - len(stay))
    new: list[Asked] = []
    for question in asked:
        if len(new) >= free:
            break
        if question.pair not in open_pairs:
            open_pairs.add(question.pair)
            new.append(question)
    plan = Plan(retire=retire, keep=[t.task_id for t in stay])
    order = _order(stay, new, asked)
    squeezed = _squeeze(order)
    if squeezed is None and not rerank:
        squeezed = _after(order)
    if squeezed is None:
        ranks = [(i + 1) / (len(order) + 1) for i in range(len(order))]
        plan.rescore = {t.task_id: ranks[i] for i, t in enumerate(order)
                        if isinstance(t, Held) and t.score != ranks[i]}
        plan.create = [(t, ranks[i]) for i, t in enumerate(order) if isinstance(t, Asked)]
    else:
        plan.create = [(t, squeezed[i]) for i, t in enumerate(order) if isinstance(t, Asked)]
    plan.create.sort(key=lambda item: item[1])
    return plan


def _order(stay: Sequence[Held], new: Sequence[Asked],
           asked: Sequence[Asked]) -> list[Held | Asked]:
    """Every task of the window in sporal's order: those it asks by its rank, then the open
    tasks it no longer lists, in their present order."""
    rank: Mapping[Pair, int] = {q.pair: i for i, q in enumerate(asked)}
    listed: list[Held | Asked] = [*stay, *new]
    ranked = sorted((t for t in listed if t.pair in rank), key=lambda t: rank[t.pair])
    rest = sorted((t for t in stay if t.pair not in rank),
                  key=lambda t: (t.score is None, t.score or 0.0, t.task_id))
    return [*ranked, *rest]


def _after(order: Sequence[Held | Asked]) -> list[float] | None:
    """Scores that keep every held task's score and put the new ones after them all, in
    their order (None when a held task has no score or there is no room left)."""
    held = [t.score for t in order if isinstance(t, Held)]
    if any(score is None for score in held):
        return None
    low = max((float(s) for s in held if s is not None), default=0.0)
    new = sum(1 for t in order if isinstance(t, Asked))
    if (1.0 - low) / (new + 1) < MIN_GAP:
        return None
    scores, placed = [], 0
    for task in order:
        if isinstance(task, Held):
            scores.append(float(task.score or 0.0))
        else:
            placed += 1
            scores.append(low + (1.0 - low) * placed / (new + 1))
    return scores


def _squeeze(order: Sequence[Held | Asked]) -> list[float] | None:
    """Scores that keep every held task's score and put the new ones in their places, or
    None when the held tasks' scores disagree with ``order`` (then all are ranked again).

    Label Studio takes scores in [0, 1]: a new task before the first held one goes between 0
    and its score, one after the last between its score and 1.
    """
    known = [(i, t.score) for i, t in enumerate(order) if isinstance(t, Held)]
    bounds = [0.0, *(float(s) for _, s in known if s is not None), 1.0]
    if len(bounds) != len(known) + 2:
        return None  # a held task without a score
    if any(b - a < MIN_GAP for a, b in zip(bounds, bounds[1:], strict=False)):
        return None
    scores: list[float | None] = [None] * len(order)
    for i, score in known:
        scores[i] = score
    start = 0
    while start < len(order):
        if scores[start] is not None:
            start += 1
            continue
        end = start
        while end < len(order) and scores[end] is None:
            end += 1
        low = scores[start - 1] if start > 0 else 0.0
        high = scores[end] if end < len(order) else 1.0
        assert low is not None and high is not None
        run = end - start
        if (high - low) / (run + 1) < MIN_GAP:
            return None
        for j in range(run):
            scores[start + j] = low + (high - low) * (j + 1) / (run + 1)
        start = end
    return [float(s) for s in scores if s is not None]
