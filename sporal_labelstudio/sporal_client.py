"""A small typed client of sporal's REST API, over httpx.

Only what annotation tools need: the next questions (with an annotator's lease), labels
(asserted with an ``Idempotency-Key``, retracted, listed), a pair's status with its proof,
how right the map is (``GET quality``),
the changes of texts, links and names, whose feature recompute may run as a job (a 202:
the client follows the job, :meth:`SporalClient.follow_job`, and returns its result), and
file imports, which a large file (or ``respond_async``) also turns into a job, followed alike.
Errors come back as :class:`SporalError` carrying the RFC 9457 problem; a contradiction (409)
is :class:`Contradiction`, whose ``proof`` names the asserted labels that force the opposite
answer. Transient answers (503 ``database-busy``/``model-not-ready``/``jobs-busy``, 429
``too-many-requests``, 409 ``idempotency-in-progress``/``conflict``, a dropped connection) are
retried a few times, after ``Retry-After`` where the answer gives one.

Examples
--------
>>> client = SporalClient("http://127.0.0.1:8000")  # doctest: +SKIP
>>> client.post_label(1, "limit", "derivative", "positive", annotator="ana").id  # doctest: +SKIP
7
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx

from sporal_labelstudio import retry

__all__ = [
    "Contradiction",
    "JobCancelled",
    "JobTimeout",
    "Label",
    "LabelRef",
    "NextQueries",
    "PairStatus",
    "Quality",
    "Query",
    "SporalClient",
    "SporalError",
    "WrongPairs",
]

LabelValue = Literal["positive", "negative"]
_TRANSIENT = {"database-busy", "model-not-ready", "idempotency-in-progress", "conflict",
              "too-many-requests", "jobs-busy"}
_FINISHED = {"succeeded", "failed", "cancelled"}

Progress = Callable[[dict[str, Any]], None]
"""Called with the job (``state``, ``progress`` 0 to 1, ``message``) each time it is read."""


class SporalError(Exception):
    """An answer of sporal that is not a success, with its problem body.

    Attributes
    ----------
    status : int
        The HTTP status.
    problem : dict
        The ``application/problem+json`` body (``type``, ``title``, ``detail``, ...).
    """

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        super().__init__(f"{status} {problem.get('title', '')}: {problem.get('detail', '')}")

    @property
    def slug(self) -> str:
        """The end of the problem's ``type`` (``contradiction``, ``label-not-found``, ...)."""
        return str(self.problem.get("type", "")).rsplit("/", 1)[-1]


class JobCancelled(SporalError):
    """The job ended ``cancelled`` (a DELETE, or ``superseded`` by a newer change)."""


class JobTimeout(TimeoutError):
    """The job did not end within the timeout; ``job`` is its last state (it goes on)."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(f"job {job.get('location')} still {job.get('state')} "
                         f"({float(job.get('progress') or 0):.0%})")
        self.job = job


@dataclass(frozen=True)
class LabelRef:
    """An asserted label as a proof cites it."""

    id: int | None
    a: str
    b: str
    label: LabelValue

    @classmethod
    def parse(cls, body: dict[str, Any]) -> LabelRef:
        return cls(id=body.get("id"), a=body["a"], b=body["b"], label=body["label"])


class Contradiction(SporalError):
    """409 ``contradiction``: the asserted labels in ``proof`` force the opposite answer."""

    @property
    def proof(self) -> list[LabelRef]:
        return [LabelRef.parse(ref) for ref in self.problem.get("proof", [])]

    @property
    def chains(self) -> list[list[str]]:
        return [list(chain) for chain in self.problem.get("chains", [])]


@dataclass(frozen=True)
class Label:
    """An asserted label as ``POST labels`` answers it (``replayed``: it already existed)."""

    id: int
    a: str
    b: str
    label: LabelValue
    annotator: str | None
    replayed: bool
    check_failed: bool = False  # a "no" to a check question: show the definition again
    contested: bool = False  # consensus: the answer opened or joined a disagreement


@dataclass(frozen=True)
class Query:
    """One question of ``next``: ask whether ``a`` is a prerequisite of ``b``."""

    a: str
    b: str
    score: float | None
    reason: str = "new"  # "new", "second-opinion" or "disagreement"


@dataclass(frozen=True)
class NextQueries:
    """The answer of ``next``: the questions, best first, and the lease on them."""

    queries: list[Query]
    undecided: int
    reserved_until: datetime | None


@dataclass(frozen=True)
class PairStatus:
    """Whether a pair is decided, and the asserted labels that decide it."""

    a: str
    b: str
    status: Literal["positive", "negative", "undecided"]
    source: Literal["asserted", "inferred"] | None
    proof: list[LabelRef]
    chains: list[list[str]]

    @property
    def decided(self) -> bool:
        return self.status != "undecided"


@dataclass(frozen=True)
class WrongPairs:
    """The expected number of wrong pool pairs and its 90% interval."""

    estimate: float
    low: int
    high: int

    @classmethod
    def parse(cls, body: dict[str, Any]) -> WrongPairs:
        return cls(float(body["estimate"]), int(body["low"]), int(body["high"]))


@dataclass(frozen=True)
class Quality:
    """How many pool pairs of the map are likely wrong (``GET quality``): among the
    ``decided`` ones, and among the ``undecided`` ones were the model's predicted map taken
    (None before a model)."""

    decided_wrong: WrongPairs
    predicted_wrong: WrongPairs | None
    decided: int
    undecided: int


class SporalClient:
    """sporal's REST API at ``base_url``, with ``api_key`` sent as ``X-API-Key`` when given.

    Parameters
    ----------
    base_url : str
        Such as ``http://127.0.0.1:8000``.
    api_key : str, optional
        The project's key (or the admin key); omit when the service runs open.
    timeout : float, default 30.0
        Seconds per request.
    retries : int, default 5
        How often a transient answer is retried (with a growing pause).
    transport : httpx.BaseTransport, optional
        For tests.
    """

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 30.0,
                 retries: int = 5, transport: httpx.BaseTransport | None = None) -> None:
        headers = {"X-API-Key": api_key} if api_key else {}
        self.url = base_url.rstrip("/")
        self.retries = retries
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                  timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SporalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport
    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        def retry_after(response: httpx.Response, attempt: int) -> float | None:
            if response.is_success or _error(response).slug not in _TRANSIENT:
                return None
            return float(response.headers.get("Retry-After", 0.2 * 2 ** attempt))

        response = retry.send(self._http, method, url, retries=self.retries, base_delay=0.2,
                              retry_after=retry_after, **kwargs)
        if not response.is_success:
            raise _error(response)
        return response

    # ------------------------------------------------------------------ reading
    def project(self, project_id: int) -> dict[str, Any]:
        """The project with its ``counts`` and ``query_bounds``."""
        return dict(self._request("GET", f"/projects/{project_id}").json())

    def concepts(self, project_id: int) -> dict[str, str | None]:
        """Every concept's name and description."""
        found: dict[str, str | None] = {}
        for item in self._pages(f"/projects/{project_id}/concepts", {}):
            found[item["name"]] = item.get("description")
        return found

    def next(self, project_id: int, *, k: int = 1, annotator: str | None = None,
             strategy: str | None = None) -> NextQueries:
        """Up to ``k`` questions, best first; with ``annotator`` they are leased to it."""
        params: dict[str, Any] = {"k": k}
        if annotator is not None:
            params["annotator"] = annotator
        if strategy is not None:
            params["strategy"] = strategy
        body = self._request("GET", f"/projects/{project_id}/next", params=params).json()
        until = body.get("reserved_until")
        return NextQueries(
            queries=[Query(q["a"], q["b"], q.get("score"), q.get("reason") or "new")
                     for q in body["queries"]],
            undecided=int(body["undecided"]),
            reserved_until=datetime.fromisoformat(until) if until else None)

    def pair_status(self, project_id: int, a: str, b: str) -> PairStatus:
        """The status of ``(a, b)`` with the proof that decides it."""
        body = self._request("GET", f"/projects/{project_id}/pairs/status",
                             params={"a": a, "b": b}).json()
        return PairStatus(a=body["a"], b=body["b"], status=body["status"], source=body["source"],
                          proof=[LabelRef.parse(r) for r in body["proof"]],
                          chains=[list(c) for c in body["chains"]])

    def quality(self, project_id: int) -> Quality:
        """How many pool pairs of the map are likely wrong, decided and predicted."""
        body = self._request("GET", f"/projects/{project_id}/quality").json()
        predicted = body.get("predicted_wrong")
        return Quality(decided_wrong=WrongPairs.parse(body["decided_wrong"]),
                       predicted_wrong=None if predicted is None else WrongPairs.parse(predicted),
                       decided=int(body["decided"]), undecided=int(body["undecided"]))

    def labels(self, project_id: int, *, source: str = "asserted") -> list[dict[str, Any]]:
        """Every decided pair of ``source`` (``asserted``, ``inferred`` or ``all``)."""
        return list(self._pages(f"/projects/{project_id}/labels", {"source": source}))

    def _pages(self, url: str, params: dict[str, Any]) -> Any:
        """Every item of a listing: by its ``next`` cursor where it gives one, else by offset."""
        offset, limit, after = 0, 10_000, None
        while True:
            paging = {"after": after} if after is not None else {"offset": offset}
            body = self._request("GET", url, params={**params, "limit": limit, **paging}).json()
            yield from body["items"]
            offset += len(body["items"])
            after = body.get("next")
            if after is None and (not body["items"] or offset >= body["total"]):
                return

    # ------------------------------------------------------------------ writing
    def post_label(self, project_id: int, a: str, b: str, label: LabelValue, *,
                   annotator: str | None = None, idempotency_key: str | None = None,
                   source: str | None = None) -> Label:
        """Assert ``(a, b, label)``; raises :class:`Contradiction` on a 409 ``contradiction``.

        With ``idempotency_key`` a retry (even one after a crash, with the same key and
        body) replays the first answer instead of asserting twice. ``source`` (such as
        ``"labelstudio"``) is sent only when given: a service that records answers takes it.
        """
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        payload: dict[str, Any] = {"a": a, "b": b, "label": label, "annotator": annotator}
        if source is not None:
            payload["source"] = source
        response = self._request("POST", f"/projects/{project_id}/labels", headers=headers,
                                 json=payload)
        body = response.json()
        disagreement = body.get("disagreement") or {}
        return Label(id=int(body["id"]), a=body["a"], b=body["b"], label=body["label"],
                     annotator=body.get("annotator"), replayed=response.status_code == 200,
                     check_failed=bool(body.get("check_failed")),
                     contested=disagreement.get("state") in ("opened", "open"))

    # ------------------------------------------------------------------ texts, links, jobs
    def add_links(self, project_id: int, links: list[tuple[str, str]], *,
                  respond_async: bool = False, timeout: float | None = 600.0,
                  progress: Progress | None = None) -> dict[str, Any]:
        """Add links; the answer ``{"created", "unchanged", "recomputed_pairs"}``.

        A large project (or ``respond_async``) recomputes its features in a job: the 202's
        job is followed (:meth:`follow_job`) and its result returned, the same answer.
        """
        return self._changed("POST", f"/projects/{project_id}/links", respond_async, timeout,
                             progress, json={"links": [{"source": u, "target": v}
                                                       for u, v in links]})

    def remove_link(self, project_id: int, source: str, target: str, *,
                    respond_async: bool = False, timeout: float | None = 600.0,
                    progress: Progress | None = None) -> dict[str, Any]:
        """Remove a link (followed like :meth:`add_links`)."""
        return self._changed("DELETE", f"/projects/{project_id}/links", respond_async, timeout,
                             progress, params={"source": source, "target": target})

    def set_texts(self, project_id: int, texts: dict[str, str], *, respond_async: bool = False,
                  timeout: float | None = 600.0,
                  progress: Progress | None = None) -> dict[str, Any]:
        """Register concepts with their texts (``""`` removes one; followed like
        :meth:`add_links`); the answer ``{"created", "concepts", ...}``."""
        return self._changed("POST", f"/projects/{project_id}/concepts", respond_async,
                             timeout, progress, json={"concepts": [
                                 {"name": name, "text": text} for name, text in texts.items()]})

    def rename_concept(self, project_id: int, name: str, new_name: str, *,
                       respond_async: bool = False, timeout: float | None = 600.0,
                       progress: Progress | None = None) -> dict[str, Any]:
        """Rename a concept (followed like :meth:`add_links`); the concept as stored."""
        return self._changed("POST", f"/projects/{project_id}/concepts/rename", respond_async,
                             timeout, progress, json={"name": name, "new_name": new_name})

    def _changed(self, method: str, url: str, respond_async: bool, timeout: float | None,
                 progress: Progress | None, **kwargs: Any) -> dict[str, Any]:
        headers = {"Prefer": "respond-async"} if respond_async else {}
        response = self._request(method, url, headers=headers, **kwargs)
        if response.status_code != 202:
            return dict(response.json())
        return self.follow_job(response.headers["Location"], timeout=timeout,
                               progress=progress)

    def import_file(self, project_id: int, content: bytes, *,
                    fmt: Literal["jsonl", "csv"] = "jsonl", respond_async: bool = False,
                    timeout: float | None = 600.0,
                    progress: Progress | None = None) -> dict[str, Any]:
        """Import a JSON Lines or CSV file (``content``); the import's summary.

        A file over the service's SPORAL_IMPORT_ASYNC_BYTES (or ``respond_async``) is imported
        by a job: the 202's job is followed (:meth:`follow_job`) and its result returned, the
        same summary; a refused file raises its problem (422 with every bad line) either way.
        """
        headers = {"Content-Type": "text/csv" if fmt == "csv" else "application/jsonl"}
        if respond_async:
            headers["Prefer"] = "respond-async"
        response = self._request("POST", f"/projects/{project_id}/import",
                                 params={"format": fmt}, headers=headers, content=content)
        if response.status_code != 202:
            return dict(response.json())
        return self.follow_job(response.headers["Location"], timeout=timeout,
                               progress=progress)

    def job(self, location: str) -> dict[str, Any]:
        """A job as ``GET /projects/{pid}/jobs/{id}`` (``location``) shows it."""
        return dict(self._request("GET", location).json())

    def follow_job(self, location: str, *, timeout: float | None = 600.0,
                   progress: Progress | None = None, interval: float = 0.25) -> dict[str, Any]:
        """Read the job at ``location`` until it ends; its ``result``.

        Raises
        ------
        SporalError
            The job failed: its problem (status and body).
        JobCancelled
            The job was cancelled (or superseded by a newer change, which has its own job).
        JobTimeout
            ``timeout`` seconds passed first (the job goes on; ``job`` is its last state).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = min(interval, 0.05)
        while True:
            job = self.job(location)
            if progress is not None:
                progress(job)
            if job["state"] in _FINISHED:
                return _ended(job)
            if deadline is not None and time.monotonic() >= deadline:
                raise JobTimeout(job)
            time.sleep(pause if deadline is None else
                       max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, interval)

    def retract_label(self, project_id: int, label_id: int) -> bool:
        """Retract a label; ``False`` when it is already gone (404 ``label-not-found``)."""
        try:
            self._request("DELETE", f"/projects/{project_id}/labels/{label_id}")
        except SporalError as error:
            if error.slug == "label-not-found":
                return False
            raise
        return True


def _ended(job: dict[str, Any]) -> dict[str, Any]:
    """A finished job's result, or its problem raised."""
    if job["state"] == "succeeded":
        return dict(job.get("result") or {})
    if job["state"] == "cancelled":
        raise JobCancelled(409, {"type": "about:blank", "title": "Job cancelled",
                                 "detail": f"job {job['location']} was cancelled "
                                           f"({job.get('reason')})", "job": job})
    problem = dict(job.get("problem") or {"title": "Job failed", "detail": job.get("reason")})
    problem.setdefault("job", job)
    raise (Contradiction if str(problem.get("type", "")).endswith("/contradiction")
           else SporalError)(int(problem.get("status", 500)), problem)


def _error(response: httpx.Response) -> SporalError:
    try:
        problem = response.json()
    except ValueError:
        problem = {"title": response.reason_phrase, "detail": response.text[:500]}
    if not isinstance(problem, dict):
        problem = {"detail": problem}
    cls = Contradiction if str(problem.get("type", "")).endswith("/contradiction") else SporalError
    return cls(response.status_code, problem)
