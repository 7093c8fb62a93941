"""``/projects/{pid}/agreement``: how far the annotators agree, with each other and with the
consensus of their answers; as JSON, or one CSV row per annotator."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.routes.common import (
    CSV_RESPONSE,
    ReadProject,
    SettingsDep,
    StrictJSONRoute,
    TableFormat,
    csv_download,
    problem_responses,
)
from app.schemas import AgreementRead
from app.security import ProjectKeyDep
from app.services.agreement import (
    AGREEMENT_CSV_COLUMNS,
    agreement_rows,
    agreement_view,
    save_view,
)
from app.services.agreement_job import schedule_view
from app.services.export import csv_chunks

__all__ = ["router"]

router = APIRouter(prefix="/projects/{project_id}/agreement", tags=["answers"],
                   dependencies=[ProjectKeyDep], route_class=StrictJSONRoute,
                   responses=problem_responses(401, 403, 404, 422, 503))


@router.get("", response_model=AgreementRead, responses={200: CSV_RESPONSE})
def get_agreement(view: ReadProject, request: Request, settings: SettingsDep,
                  format: TableFormat = "json",
                  fresh: Annotated[bool, Query(description=(
                      "Compute the view of the answers as they are now in the request, "
                      "even for a large project (seconds at 100,000 answers)."))] = False
                  ) -> AgreementRead | Response:
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

    From `SPORAL_AGREEMENT_JOB_FROM` answers (default 5,000), a read after new answers serves
    the last view computed, `as_of.current` false, while a job (`as_of.job`) computes the
    next once the answers pause; `fresh=true` computes it now.
    """
    stale_from = None if fresh else settings.agreement_job_from
    found, served = agreement_view(view.session, view.state, view.project.policy,
                                   stale_from=stale_from)
    state = request.app.state
    if stale_from is not None and found.answers >= stale_from:
        if served.computed:  # the first view of a large project: kept for the next process
            save_view(state.runtime.database, view.project.id, served.mark, served.view)
        elif not served.current:
            job = schedule_view(state.jobs, state.runtime, view.project.id)
            found.as_of.job = None if job is None else \
                request.scope.get("root_path", "") + job.location
    if format == "csv":
        return csv_download(csv_chunks(AGREEMENT_CSV_COLUMNS, agreement_rows(found)),
                            f"project-{view.project.id}-agreement.csv")
    return found
