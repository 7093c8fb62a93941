"""The label policies, by name: what a project does with each label posted.

A project's ``policy`` names one :class:`LabelPolicy` of :data:`POLICIES`; the services look
it up once (:func:`policy_of`) and call it, never testing the name. To add a policy, write a
module with a class of the protocol's methods (as :mod:`app.services.labels.strict` and
:mod:`app.services.labels.consensus` do) and add one line to :data:`POLICIES`; the schemas'
``PolicyName`` lists the names a client may choose.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from app.schemas import (
    AnswerRetracted,
    BulkLabels,
    BulkLabelsCreated,
    LabelCreated,
    LabelIn,
    LabelRetracted,
)
from app.security import Caller
from app.services.asking import TeamQuestion
from app.services.labels.consensus import CONSENSUS
from app.services.labels.shared import Refused, Written
from app.services.labels.strict import STRICT
from app.services.unit import ProjectWork
from models import Project

__all__ = ["DEFAULT_POLICY", "POLICIES", "LabelPolicy", "policy_of"]


class LabelPolicy(Protocol):
    """What a project does with labels: how it keeps them, retracts them, asks the team."""

    name: str
    refuses: bool
    """Whether a label against what the order decides is refused (else kept as an answer)."""

    def post(self, work: ProjectWork, body: LabelIn) -> Written[LabelCreated] | Refused:
        """One label posted."""
        ...

    def post_bulk(self, work: ProjectWork, body: BulkLabels,
                  source: str) -> Written[BulkLabelsCreated] | Refused:
        """Many labels posted at once (a bulk post, an import): all kept, or none."""
        ...

    def retract_label(self, work: ProjectWork, label_id: int,
                      caller: Caller) -> LabelRetracted:
        """``DELETE`` of an asserted label, once ``caller`` may remove the answers it rests
        on (:meth:`~app.security.Caller.check_retract`)."""
        ...

    def retract_answer(self, work: ProjectWork, answer_id: int,
                       caller: Caller) -> AnswerRetracted:
        """``DELETE`` of one answer, once ``caller`` may remove it."""
        ...

    def team_question(self, work: ProjectWork, annotator: str | None,
                      proba: np.ndarray | None) -> TeamQuestion | None:
        """The team's question for ``annotator`` before the strategy's (None: the policy
        has none, every question is the strategy's)."""
        ...

    def adopt(self, work: ProjectWork) -> None:
        """Switch the project to this policy, recomputing what it derives from the answers."""
        ...


POLICIES: dict[str, LabelPolicy] = {policy.name: policy for policy in (STRICT, CONSENSUS)}
"""Every label policy by name (the values of a project's ``policy``)."""

DEFAULT_POLICY = STRICT.name


def policy_of(project: Project) -> LabelPolicy:
    """The policy of ``project``."""
    return POLICIES[project.policy]
