"""``/projects/{pid}/agreement``: how far the annotators agree, with each other and with the
consensus of their answers; as JSON, or one CSV row per annotator."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from app.routes.common import (
    CSV_RESPONSE,
    ReadProject,
    StrictJSONRoute,
    TableFormat,
    csv_download,
    problem_responses,
)
from app.schemas import AgreementRead
from app.security import ProjectKeyDep
from app.services.agreement import AGREEMENT_CSV_COLUMNS, agreement_rows, agreement_view
from app.services.export import csv_chunks

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/agreement", tags=["answers"],
                   dependencies=[ProjectKeyDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


@router.get("", response_model=AgreementRead, responses={200: CSV_RESPONSE})
def get_agreement(view: ReadProject, format: TableFormat = "json") -> AgreementRead | Response:
    """Per annotator: the answers that count, their agreement with the consensus, an
    estimated accuracy with its 95% interval and the check questions asked and failed; their
    false "no" and false "yes", their minority answers (`minority`, listed at `minority_url`),
    how many of their pairs someone else answered (`shared_pairs`; `rests_on_prior` and `note`
    when the estimate is mostly the prior's), whether anything tells them apart from whoever
    contradicts them (`identifiable`), and their agreement over windows of 20 answers
    (`trend`). The reviewers apart (`reviewers`). Cohen's kappa per pair of annotators with at
    least 20 shared pairs; Krippendorff's alpha over the project.

    The consensus is that of every live answer (one-coin Dawid–Skene by EM, then a consistent
    set of labels; docs/consensus.md), whatever the project's policy: in `strict` it may differ
    from the asserted labels, which the first answer on each pair decided. `format=csv`: one
    row per annotator, the fields flattened (docs/api.md).
    """
    found = agreement_view(view.session, view.state, view.project.policy)
    if format == "csv":
        return csv_download(csv_chunks(AGREEMENT_CSV_COLUMNS, agreement_rows(found)),
                            f"project-{view.project.id}-agreement.csv")
    return found
