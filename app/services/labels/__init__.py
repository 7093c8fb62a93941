"""Asserted labels, by topic: the label policies (:mod:`~app.services.labels.policy`, one module
each: :mod:`~app.services.labels.strict`, :mod:`~app.services.labels.consensus`, and what they
share, :mod:`~app.services.labels.shared`), the team's changes as values
(:mod:`~app.services.labels.change`), listing the decided pairs, explaining a pair (proofs),
and the stored closure rows they all keep (:mod:`~app.services.labels.store`).

The functions here are the entry points: each reads the project's policy once and calls it.
"""

from app.schemas import (
    AnswerRetracted,
    BulkLabels,
    BulkLabelsCreated,
    LabelCreated,
    LabelIn,
    LabelRetracted,
)
from app.security import Caller
from app.services.labels.listing import list_labels
from app.services.labels.policy import DEFAULT_POLICY, POLICIES, LabelPolicy, policy_of
from app.services.labels.proofs import pair_status
from app.services.labels.shared import Refused, Written
from app.services.unit import ProjectWork

__all__ = ["DEFAULT_POLICY", "POLICIES", "LabelPolicy", "Refused", "Written", "list_labels",
           "pair_status", "policy_of", "post_bulk", "post_label", "retract_answer",
           "retract_label"]


def post_label(work: ProjectWork, body: LabelIn) -> Written[LabelCreated] | Refused:
    """One label posted, by the project's policy."""
    return policy_of(work.project).post(work, body)


def post_bulk(work: ProjectWork, body: BulkLabels,
              source: str = "bulk") -> Written[BulkLabelsCreated] | Refused:
    """Labels posted in bulk (or imported), by the project's policy: all kept, or none."""
    return policy_of(work.project).post_bulk(work, body, source)


def retract_label(work: ProjectWork, label_id: int, caller: Caller) -> LabelRetracted:
    """``DELETE`` of an asserted label, by the project's policy; ``caller`` must be allowed
    to remove the answers it rests on (:meth:`~app.security.Caller.check_retract`)."""
    return policy_of(work.project).retract_label(work, label_id, caller)


def retract_answer(work: ProjectWork, answer_id: int, caller: Caller) -> AnswerRetracted:
    """``DELETE`` of one answer, by the project's policy, once ``caller`` may remove it."""
    return policy_of(work.project).retract_answer(work, answer_id, caller)
