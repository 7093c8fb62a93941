"""``/projects/{pid}/agreement``: how far the annotators agree, with each other and with the
consensus of their answers."""

from __future__ import annotations

from fastapi import APIRouter

from app.routes.common import ReadProject, StrictJSONRoute, problem_responses
from app.schemas import AgreementRead
from app.security import ProjectKeyDep
from app.services.agreement import agreement_view

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/agreement", tags=["answers"],
                   dependencies=[ProjectKeyDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


@router.get("", response_model=AgreementRead)
def get_agreement(view: ReadProject) -> AgreementRead:
    """Per annotator: the answers that count, their agreement with the consensus, an
    estimated accuracy with its 95% interval and the check questions asked and failed;
    Cohen's kappa per pair of annotators with at least 20 shared pairs; Krippendorff's alpha
    over the project.

    The consensus is that of every live answer (one-coin Dawid–Skene by EM, then a consistent
    set of labels; docs/consensus.md), whatever the project's policy: in `strict` it may differ
    from the asserted labels, which the first answer on each pair decided.
    """
    return agreement_view(view.session, view.state, view.project.policy)
