"""What a lead does about one annotator of a ``consensus`` project (``docs/teams.md``).

* **Exclude** (``POST .../annotators/{name}/exclude``): the annotator's answers stop counting.
  They are kept (and so are their later answers, stored with the outcome ``excluded``); the
  consensus is computed again without them, one full-path event
  (:class:`app.services.labels.change.TeamChange` naming the exclusions after it), and the
  exclusion is stored (:class:`models.AnnotatorExclusion`) in the same write transaction,
  so that every later consensus leaves them out
  (:func:`app.services.team.excluded_annotators`). Excluding an excluded annotator changes
  nothing (200, ``changed`` false).
* **Include** (``DELETE`` of the same): the exclusion goes, the consensus counts their answers
  again. Including one not excluded changes nothing.
* **Re-ask** (``POST .../annotators/{name}/reask``): the pairs whose live answers all come from
  this annotator are stored (:class:`models.ReaskedPair`); ``next`` serves them to the others
  as second opinions until one of them answers (:func:`app.services.team.reasked_pairs`).

All three need the ``consensus`` policy (409 ``consensus-only`` in ``strict``) and an annotator
with an answer in the project (404 ``annotator-not-found``).
"""

from __future__ import annotations

from sqlalchemy import delete, select

from app.errors import AnnotatorNotFound, ConsensusOnly
from app.schemas import AnnotatorExcluded, AnnotatorReasked
from app.security import Caller
from app.services.labels.change import Applied, Recomputed, TeamChange, plan_change, store_change
from app.services.labels.policy import policy_of
from app.services.team import counting, excluded_annotators, live_answers, reasked_pairs
from app.services.unit import ProjectView, ProjectWork
from models import AnnotatorExclusion, Answer, Project, ReaskedPair, utcnow

__all__ = ["exclude_annotator", "include_annotator", "reask_annotator"]


def _acting_on(view: ProjectView, name: str, what: str) -> None:
    """409 unless the project is in ``consensus``; 404 unless ``name`` answered in it (or
    is excluded)."""
    if policy_of(view.project).refuses:  # the first answer decides: no consensus to act on
        raise ConsensusOnly(f"{what} an annotator needs the consensus policy; the project is "
                            f"{view.project.policy!r} (PATCH it to \"consensus\" first)")
    pid = view.state.project_id
    found = view.session.scalar(select(Answer.id).where(
        Answer.project_id == pid, Answer.annotator == name).limit(1))
    if found is None and name not in excluded_annotators(view.session, pid):
        raise AnnotatorNotFound(name)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _summary(name: str, excluded: bool, counts: AnnotatorExcluded) -> str:
    """One sentence: what the exclusion (or inclusion) changed."""
    if not counts.changed:
        return f"{name} was {'excluded' if excluded else 'counted'} already; nothing changed."
    answers = _plural(counts.answers, "answer")
    head = (f"Excluded {name}: {answers} no longer count" if excluded
            else f"Included {name} again: {answers} count again")
    parts = [f"{_plural(counts.labels_created, 'label')} created",
             f"{_plural(counts.labels_retracted, 'label')} retracted",
             f"{_plural(counts.disagreements_opened, 'disagreement')} opened",
             f"{_plural(counts.disagreements_closed, 'disagreement')} closed"]
    return f"{head}; {', '.join(parts)}."


def _result(name: str, excluded: bool, applied: Applied | None) -> AnnotatorExcluded:
    """The response to an exclude or include (``applied`` None: nothing changed)."""
    counts = AnnotatorExcluded(annotator=name, excluded=excluded, changed=False, answers=0,
                               labels_created=0, labels_retracted=0, disagreements_opened=0,
                               disagreements_closed=0, summary="")
    if applied is not None:
        plan = applied.plan
        states = [ref.state for ref in applied.changed.values()]
        theirs = plan.left_out if excluded else plan.rows
        counts = counts.model_copy(update={
            "changed": True,
            "answers": sum(1 for r in theirs if r.annotator == name and not r.reviewer),
            "labels_created": len(plan.add), "labels_retracted": len(plan.remove),
            "disagreements_opened": states.count("opened"),
            "disagreements_closed": states.count("closed")})
    return counts.model_copy(update={"summary": _summary(name, excluded, counts)})


def _switch(work: ProjectWork, name: str, exclude: bool, role: str) -> AnnotatorExcluded:
    """Exclude (``exclude``) or include ``name``: the consensus computed again with the
    exclusions after it, stored with them in one write transaction."""
    _acting_on(work, name, "excluding" if exclude else "including")
    work.end_read()

    def plan(work: ProjectWork) -> tuple[TeamChange, Recomputed] | None:
        before = excluded_annotators(work.session, work.state.project_id)
        if (name in before) == exclude:
            return None  # so already: nothing to change
        after = before | {name} if exclude else before - {name}
        change = TeamChange(exclude=frozenset(after))
        return change, plan_change(work, change)

    def store(work: ProjectWork, project: Project,
              planned: tuple[TeamChange, Recomputed] | None) -> Applied | None:
        if planned is None:
            return None
        pid = project.id
        if exclude:
            work.session.add(AnnotatorExclusion(project_id=pid, annotator=name, role=role,
                                                excluded_at=utcnow()))
        else:
            work.session.execute(delete(AnnotatorExclusion).where(
                AnnotatorExclusion.project_id == pid, AnnotatorExclusion.annotator == name))
        return store_change(work, project, *planned)

    return _result(name, exclude, work.write(plan, store))


def exclude_annotator(work: ProjectWork, name: str, caller: Caller) -> AnnotatorExcluded:
    """Exclude ``name``'s answers from the consensus (module docstring); ``caller``: who."""
    return _switch(work, name, True, caller.role)


def include_annotator(work: ProjectWork, name: str) -> AnnotatorExcluded:
    """Count ``name``'s answers again (module docstring)."""
    return _switch(work, name, False, "")


def _theirs_alone(work: ProjectWork, name: str) -> list[tuple[int, int]]:
    """The pairs whose live answers all come from ``name`` (no reviewer's), in the order of
    their first answers."""
    who: dict[tuple[int, int], set[tuple[str | None, bool]]] = {}
    for r in live_answers(work.session, work.state.project_id):
        who.setdefault((r.a_id, r.b_id), set()).add((r.annotator, r.reviewer))
    return [pair for pair, names in who.items() if names == {(name, False)}]


def reask_annotator(work: ProjectWork, name: str) -> AnnotatorReasked:
    """Make the pairs only ``name`` answered second-opinion questions for the others."""
    _acting_on(work, name, "re-asking")
    work.end_read()

    def plan(work: ProjectWork) -> list[tuple[int, int]]:
        asked = {(a, b) for a, b in work.session.execute(
            select(ReaskedPair.a_id, ReaskedPair.b_id).where(
                ReaskedPair.project_id == work.state.project_id))}
        return [pair for pair in _theirs_alone(work, name) if pair not in asked]

    def store(work: ProjectWork, project: Project, pairs: list[tuple[int, int]]) -> int:
        now = utcnow()
        work.session.add_all([ReaskedPair(project_id=project.id, a_id=a, b_id=b,
                                          annotator=name, asked_at=now) for a, b in pairs])
        if pairs:
            project.version += 1
        work.session.flush()
        return len(pairs)

    count = work.write(plan, store)
    session, pid = work.session, work.state.project_id
    mine = {(a, b) for a, b in session.execute(
        select(ReaskedPair.a_id, ReaskedPair.b_id).where(
            ReaskedPair.project_id == pid, ReaskedPair.annotator == name))}
    rows = counting(live_answers(session, pid), excluded_annotators(session, pid))
    waiting = sum(1 for pair in reasked_pairs(session, pid, rows) if pair in mine)
    work.session.rollback()
    summary = (f"Re-asked {_plural(count, 'pair')} only {name} answered: the others get "
               f"them as second opinions; {waiting} waiting for one.")
    return AnnotatorReasked(annotator=name, pairs=count, waiting=waiting, summary=summary)
