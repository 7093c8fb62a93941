"""Domain errors of the service and the one place that maps them to HTTP.

Services raise :class:`ServiceError` subclasses that know nothing of HTTP requests; the
handlers installed by :func:`install_error_handlers` turn them, FastAPI's validation errors,
Starlette's HTTP errors and database lock timeouts into RFC 9457 ``application/problem+json``
answers. Each kind of error has its own ``type`` (``/problems/<slug>``, served by the service).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from reasoning.closure import ContradictionError, ReasoningError

__all__ = [
    "PROBLEMS",
    "PROBLEM_MEDIA_TYPE",
    "AnnotatorNotFound",
    "AnswerNotFound",
    "BudgetExceeded",
    "BulkContradiction",
    "DisagreementNotFound",
    "ConsensusOnly",
    "ReviewConflict",
    "InternalError",
    "MethodNotAllowed",
    "NotFound",
    "ConcurrentChange",
    "Contradiction",
    "DatabaseBusy",
    "DatabaseUnavailable",
    "Forbidden",
    "IdempotencyInProgress",
    "IdempotencyKeyReused",
    "ImportsBusy",
    "InvalidCursor",
    "InvalidItems",
    "InvalidLabel",
    "JobInterrupted",
    "JobNotFound",
    "JobsBusy",
    "InUse",
    "LabelNotFound",
    "ModelNotReady",
    "PayloadTooLarge",
    "ProblemResponse",
    "ProjectNotFound",
    "ServiceError",
    "TooManyHeavyRequests",
    "Unauthorized",
    "UnknownConcepts",
    "UnknownStrategy",
    "ValidationFailed",
    "install_error_handlers",
    "problem_body",
]

logger = logging.getLogger("sporal")

PROBLEM_MEDIA_TYPE = "application/problem+json"


@dataclass(frozen=True)
class ProblemKind:
    """One documented kind of problem: its slug (the end of ``type``), status and title."""

    slug: str
    status: int
    title: str
    description: str

    @property
    def type(self) -> str:
        return f"/problems/{self.slug}"


class ServiceError(Exception):
    """Base of the errors the service raises; each subclass is one documented kind.

    A kind carries its ``slug`` (the end of its ``type``), ``status``, ``title`` and
    ``description``; :data:`PROBLEMS` is derived from the classes. Extra keyword arguments
    become members of the problem body (e.g. ``proof``).
    """

    slug: ClassVar[str] = "http-error"
    status: ClassVar[int] = 400
    title: ClassVar[str] = "HTTP error"
    description: ClassVar[str] = "A protocol-level error."

    def __init__(self, detail: str, *, headers: Mapping[str, str] | None = None,
                 **members: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = dict(headers or {})
        self.members = members

    @property
    def kind(self) -> ProblemKind:
        return PROBLEMS[self.slug]


class ValidationFailed(ServiceError):
    slug, status, title = "validation-error", 422, "Invalid request"
    description = "The request does not match the schema: see `errors` for each location."


class UnknownConcepts(ServiceError):
    slug, status, title = "unknown-concept", 422, "Unknown concept"
    description = ("A concept named in the request is not registered in the project: "
                   "see `unknown_concepts`.")

    def __init__(self, names: Iterable[str], errors: list[dict[str, Any]] | None = None) -> None:
        unique = list(dict.fromkeys(names))
        shown = ", ".join(repr(n) for n in unique[:20])
        more = f" and {len(unique) - 20} more" if len(unique) > 20 else ""
        members: dict[str, Any] = {"unknown_concepts": unique}
        if errors is not None:
            members["errors"] = errors
        super().__init__(f"unknown concept(s): {shown}{more}", **members)


class InvalidItems(ServiceError):
    slug, status, title = "invalid-items", 422, "Invalid items"
    description = ("Some items of the request cannot be accepted: see `errors`, one per "
                   "offending item (its index and reason). Nothing of the request was stored.")

    def __init__(self, errors: list[dict[str, Any]], what: str = "items") -> None:
        super().__init__(f"{len(errors)} of the {what} cannot be accepted; nothing was stored",
                         errors=errors)


class InvalidLabel(ServiceError):
    slug, status, title = "invalid-label", 422, "Invalid label"
    description = "The label cannot be applied (e.g. a concept paired with itself)."


class InvalidCursor(ServiceError):
    slug, status, title = "invalid-cursor", 422, "Invalid cursor"
    description = "The `after` cursor is not one this service gave as `next`."

    def __init__(self, cursor: str) -> None:
        super().__init__(f"cursor {cursor[:80]!r} was not given by this service: page from "
                         "the first page and follow `next` (labels) or `next_cursor` (answers)")


class UnknownStrategy(ServiceError):
    slug, status, title = "unknown-strategy", 422, "Unknown strategy"
    description = "The strategy is not one of the thirteen known names (or `default`)."


class IdempotencyKeyReused(ServiceError):
    slug, status, title = "idempotency-key-reused", 422, "Idempotency key reused"
    description = "The Idempotency-Key was already used with another request body."


class Contradiction(ServiceError):
    slug, status, title = "contradiction", 409, "Contradiction"
    description = ("The label contradicts the asserted labels; `proof` lists the asserted "
                   "labels that force the opposite label.")


class BulkContradiction(ServiceError):
    slug, status, title = "bulk-contradiction", 409, "Contradictions in bulk import"
    description = ("Some labels of the import contradict others or the stored labels; "
                   "`contradictions` lists each one with its proof. Nothing was stored.")


class InUse(ServiceError):
    slug, status, title = "in-use", 409, "Used by live labels"
    description = ("The concept or pool pair carries live asserted labels, listed in `labels`; "
                   "retract them first (DELETE .../labels/{id}).")

    def __init__(self, what: str, labels: list[dict[str, Any]]) -> None:
        super().__init__(f"{what} is used by {len(labels)} live label(s): retract them first",
                         labels=labels)


class IdempotencyInProgress(ServiceError):
    slug, status, title = "idempotency-in-progress", 409, "Request still running"
    description = "A request with this Idempotency-Key is still being processed; retry later."

    def __init__(self, key: str) -> None:
        super().__init__(f"a request with Idempotency-Key {key!r} is still running",
                         headers={"Retry-After": "1"})


class BudgetExceeded(ServiceError):
    slug, status, title = "budget-exceeded", 422, "Project budget exceeded"
    description = ("The request would grow the project past a budget (SPORAL_MAX_DECIDED_PAIRS "
                   "decided pairs, SPORAL_MAX_CONCEPTS concepts); `budget`, `limit` and "
                   "`would_reach` say which and by how much. Nothing was done.")

    def __init__(self, budget: str, limit: int, would_reach: int, what: str) -> None:
        super().__init__(f"{what} would make {would_reach:,} {budget.replace('_', ' ')}, over "
                         f"the budget of {limit:,}; nothing was done",
                         budget=budget, limit=limit, would_reach=would_reach)


class ConcurrentChange(ServiceError):
    slug, status, title = "conflict", 409, "Concurrent change"
    description = "Another request changed the same data at the same time; retry."


class ReviewConflict(ServiceError):
    slug, status, title = "review-conflict", 409, "Review step not possible"
    description = ("The disagreement cannot be undone or reopened as asked: it has no live "
                   "resolution to undo, another disagreement is open on its pair, or the "
                   "project is not in `consensus`.")


class ConsensusOnly(ServiceError):
    slug, status, title = "consensus-only", 409, "Needs the consensus policy"
    description = ("Excluding, including and re-asking an annotator act on the consensus of "
                   "the answers: the project's policy is `strict`, where the first answer on "
                   "each pair decides. Switch it to `consensus` first.")


class AnnotatorNotFound(ServiceError):
    slug, status, title = "annotator-not-found", 404, "Annotator not found"
    description = "No answer of this project comes from this annotator."

    def __init__(self, name: str) -> None:
        super().__init__(f"no answer of this project comes from annotator {name!r}")


class ProjectNotFound(ServiceError):
    slug, status, title = "project-not-found", 404, "Project not found"
    description = "No project has this id."

    def __init__(self, project_id: int) -> None:
        super().__init__(f"no project with id {project_id}")


class LabelNotFound(ServiceError):
    slug, status, title = "label-not-found", 404, "Label not found"
    description = "No live asserted label of this project has this id."

    def __init__(self, label_id: int, reason: str = "no such label in this project") -> None:
        super().__init__(f"label {label_id}: {reason}")


class AnswerNotFound(ServiceError):
    slug, status, title = "answer-not-found", 404, "Answer not found"
    description = "No live answer of this project has this id."

    def __init__(self, answer_id: int, reason: str = "no such answer in this project") -> None:
        super().__init__(f"answer {answer_id}: {reason}")


class DisagreementNotFound(ServiceError):
    slug, status, title = "disagreement-not-found", 404, "Disagreement not found"
    description = "No disagreement of this project has this id."

    def __init__(self, disagreement_id: int) -> None:
        super().__init__(f"no disagreement with id {disagreement_id} in this project")


class NotFound(ServiceError):
    slug, status, title = "not-found", 404, "Not found"
    description = "No resource at this path."


class MethodNotAllowed(ServiceError):
    slug, status, title = "method-not-allowed", 405, "Method not allowed"
    description = "The path exists but not with this method."


class Unauthorized(ServiceError):
    slug, status, title = "unauthorized", 401, "Missing or unknown API key"
    description = "Send the project's key or the admin key in the X-API-Key header."

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": 'APIKey header="X-API-Key"'})


class Forbidden(ServiceError):
    slug, status, title = "forbidden", 403, "Key not valid for this resource"
    description = "The API key belongs to another project, or the route needs the admin key."


class PayloadTooLarge(ServiceError):
    slug, status, title = "payload-too-large", 413, "Request body too large"
    description = "The body exceeds the configured limit (SPORAL_MAX_BODY_BYTES)."

    def __init__(self, size: str, max_bytes: int) -> None:
        # The rest of an oversized body is never read, so the connection cannot be reused.
        super().__init__(f"the request body ({size}) exceeds the limit of {max_bytes} bytes",
                         headers={"Connection": "close"})


class DatabaseBusy(ServiceError):
    slug, status, title = "database-busy", 503, "Database busy"
    description = "The database stayed locked longer than the busy timeout; retry."

    def __init__(self) -> None:
        super().__init__("the database is busy; retry the request", headers={"Retry-After": "1"})


class DatabaseUnavailable(ServiceError):
    slug, status, title = "database-unavailable", 503, "Database unavailable"
    description = ("The database could not be reached (refused or lost the connection); retry "
                   "once it is back.")

    def __init__(self) -> None:
        super().__init__("the database could not be reached; retry the request",
                         headers={"Retry-After": "5"})


class ImportsBusy(ServiceError):
    slug, status, title = "imports-busy", 503, "Too many imports at once"
    description = ("The imports running in this process already spool as much as "
                   "SPORAL_MAX_IMPORT_SPOOL_BYTES allows; retry after `Retry-After` seconds.")

    def __init__(self, limit: int) -> None:
        # The rest of the body is never read, so the connection cannot be reused.
        super().__init__(f"the imports running now spool {limit} bytes already, the most "
                         "allowed; retry later", headers={"Retry-After": "5",
                                                          "Connection": "close"})


class ModelNotReady(ServiceError):
    slug, status, title = "model-not-ready", 503, "Model not trained yet"
    description = ("`fresh=true` asked for a model trained on the current labels, and none was "
                   "ready within SPORAL_FRESH_TIMEOUT; retry after `Retry-After` seconds, or "
                   "ask without `fresh` to use the newest model that exists.")

    def __init__(self, name: str, waited: float) -> None:
        super().__init__(f"no {name} model trained on the current labels after {waited:g} s",
                         headers={"Retry-After": "1"})


class JobNotFound(ServiceError):
    slug, status, title = "job-not-found", 404, "Job not found"
    description = ("No job of this project has this id (finished jobs are deleted after "
                   "SPORAL_JOB_TTL_SECONDS).")

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id}: no such job in this project")


class TooManyHeavyRequests(ServiceError):
    slug, status, title = "too-many-requests", 429, "Too many heavy requests"
    description = ("The project already has SPORAL_HEAVY_REQUESTS_PER_PROJECT heavy requests "
                   "(link or text changes, renames) in flight; retry after `Retry-After` "
                   "seconds.")

    def __init__(self, project_id: int, limit: int) -> None:
        super().__init__(f"project {project_id} already has {limit} heavy request(s) in "
                         "flight; retry", headers={"Retry-After": "1"})


class JobsBusy(ServiceError):
    slug, status, title = "jobs-busy", 503, "Too many jobs"
    description = ("The process already holds SPORAL_MAX_JOBS queued or running jobs; nothing "
                   "was stored. Retry after `Retry-After` seconds.")

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} jobs are queued or running; nothing was stored, retry",
                         headers={"Retry-After": "2"})


class JobInterrupted(ServiceError):
    slug, status, title = "job-interrupted", 503, "Job interrupted"
    description = ("The process running the job stopped (a restart) before it ended; what "
                   "the job was to do was not done. Send the change again to redo it.")


class InternalError(ServiceError):
    slug, status, title = "internal-error", 500, "Internal error"
    description = "An unexpected error; it was logged. Please report it."


def _kinds(cls: type[ServiceError]) -> Iterator[type[ServiceError]]:
    yield cls
    for sub in cls.__subclasses__():
        yield from _kinds(sub)


PROBLEMS: dict[str, ProblemKind] = {
    kind.slug: ProblemKind(kind.slug, kind.status, kind.title, kind.description)
    for kind in _kinds(ServiceError)
}
"""Every documented kind of problem, by slug, derived from the error classes."""


def _json_safe(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


class ProblemResponse(Response):
    """``application/problem+json``; ASCII-escaped so that no input can break the encoding."""

    media_type = PROBLEM_MEDIA_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          default=_json_safe).encode("ascii")


def problem_body(slug: str, detail: str, instance: str | None = None,
                 status: int | None = None, **members: Any) -> dict[str, Any]:
    """The RFC 9457 body of a problem of kind ``slug``."""
    kind = PROBLEMS[slug]
    body: dict[str, Any] = {"type": kind.type, "title": kind.title,
                            "status": status or kind.status, "detail": detail}
    if instance is not None:
        body["instance"] = instance
    body.update(members)
    return body


def problem(slug: str, detail: str, request: Request | None = None, *, status: int | None = None,
            headers: Mapping[str, str] | None = None, **members: Any) -> ProblemResponse:
    instance = request.url.path if request is not None else None
    body = problem_body(slug, detail, instance, status=status, **members)
    return ProblemResponse(body, status_code=body["status"], headers=dict(headers or {}))


def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Only location, message and type: echoing the input could be huge or unencodable.
    return [
        {"loc": [_json_safe(part) for part in error.get("loc", ())],
         "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))}
        for error in exc.errors()
    ]


def _is_lock_timeout(exc: DBAPIError) -> bool:
    text = str(exc.orig).lower()
    return "database is locked" in text or "lock timeout" in text or "deadlock" in text


def _is_unreachable(exc: DBAPIError) -> bool:
    text = str(exc.orig).lower()
    return any(sign in text for sign in (
        "connection refused", "could not connect", "connection failed", "server closed the "
        "connection", "terminating connection", "unable to open database file"))


def _allow_table(schema: dict[str, Any]) -> list[tuple[re.Pattern[str], set[str]]]:
    """Path patterns of the OpenAPI schema with their methods (integer parameters: digits)."""
    table = []
    for path, operations in schema.get("paths", {}).items():
        types = {p["name"]: p.get("schema", {}).get("type")
                 for op in operations.values() for p in op.get("parameters", [])
                 if p.get("in") == "path"}
        parts = re.split(r"(\{\w+\})", path)
        regex = "".join(
            ("[0-9]+" if types.get(part[1:-1]) == "integer" else "[^/]+")
            if part.startswith("{") else re.escape(part) for part in parts)
        table.append((re.compile(regex), {m.upper() for m in operations}))
    return table


def _allowed_methods(request: Request) -> list[str]:
    """Every method the schema lists at this path (FastAPI answers 405 with one route's)."""
    state = request.app.state
    if getattr(state, "allow_table", None) is None:
        state.allow_table = _allow_table(request.app.openapi())
    path = request.url.path
    return sorted({m for regex, methods in state.allow_table if regex.fullmatch(path)
                   for m in methods})


_STATUS_SLUGS = {401: "unauthorized", 403: "forbidden", 404: "not-found",
                 405: "method-not-allowed", 413: "payload-too-large", 422: "validation-error"}


async def _service_error(request: Request, exc: ServiceError) -> Response:
    return problem(exc.slug, exc.detail, request, headers=exc.headers, **exc.members)


async def _reasoning_error(request: Request, exc: ReasoningError) -> Response:
    # The services check labels before the core sees them; this is the safety net.
    if isinstance(exc, ContradictionError):
        return problem(Contradiction.slug, str(exc), request)
    return problem(InvalidLabel.slug, str(exc), request)


async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    errors = _validation_errors(exc)
    detail = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:5]
    ) or "invalid request"
    return problem("validation-error", detail, request, errors=errors)


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    if exc.status_code == 400:
        # FastAPI's only 400: a body it could not even decode (e.g. not UTF-8). The same
        # kind of error as malformed JSON, which FastAPI reports as 422: say 422 for both.
        return problem("validation-error", str(exc.detail), request,
                       errors=[{"loc": ["body"], "msg": str(exc.detail),
                                "type": "body_undecodable"}])
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
    slug = _STATUS_SLUGS.get(exc.status_code, "http-error")
    return problem(slug, str(exc.detail), request, status=exc.status_code, headers=headers)


async def _operational_error(request: Request, exc: OperationalError) -> Response:
    if _is_lock_timeout(exc):
        busy = DatabaseBusy()
        return problem(busy.slug, busy.detail, request, headers=busy.headers)
    if exc.connection_invalidated or _is_unreachable(exc):
        logger.warning("database unreachable on %s: %s", request.url.path, exc.orig)
        down = DatabaseUnavailable()
        return problem(down.slug, down.detail, request, headers=down.headers)
    logger.exception("database error on %s", request.url.path)
    return problem("internal-error", "database error", request)


async def _pool_timeout(request: Request, exc: PoolTimeout) -> Response:
    busy = DatabaseBusy()
    return problem(busy.slug, busy.detail, request, headers=busy.headers)


async def _integrity_error(request: Request, exc: IntegrityError) -> Response:
    # Writes are serialized per project, so this only happens in a genuine race
    # (e.g. two processes creating the same row); the client can retry.
    logger.warning("integrity error on %s: %s", request.url.path, exc.orig)
    return problem("conflict", "a concurrent request changed the same data; retry", request)


async def _unexpected(request: Request, exc: Exception) -> Response:
    logger.exception("unexpected error on %s", request.url.path)
    return problem("internal-error", "unexpected error; it was logged", request)


_HANDLERS: tuple[tuple[type[Exception], Callable[[Request, Any], Awaitable[Response]]], ...] = (
    (ServiceError, _service_error),
    (ReasoningError, _reasoning_error),
    (RequestValidationError, _validation_error),
    (StarletteHTTPException, _http_error),
    (OperationalError, _operational_error),
    (PoolTimeout, _pool_timeout),
    (IntegrityError, _integrity_error),
    (Exception, _unexpected),
)
"""Each error the service can raise, with the handler that answers it (the most specific
class that matches wins, whatever the order)."""


def install_error_handlers(app: FastAPI) -> None:
    """Map every error the service can raise to a problem+json answer (never a bare 500)."""
    for error, handler in _HANDLERS:
        app.add_exception_handler(error, handler)
