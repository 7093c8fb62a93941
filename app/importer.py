"""``sporal import``: a file or an AL-CPL domain into a project, in-process or over HTTP.

In-process (no ``--url``) it runs the same service code as ``POST /projects/{pid}/import``
against the database at ``SPORAL_DATABASE_URL``; with ``--url`` it streams the file (an AL-CPL
domain as JSON Lines) to that route of a running service. Either way the project is created,
or the one project of that name is adopted. A service that imports the file by a job (``202
Accepted``: a large file, or ``--async``) is followed until the job ends, with a progress bar;
its result is the summary, its problem printed as a refusal's.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session
from tqdm import tqdm

from app.errors import ServiceError
from app.schemas import ProjectCreate, ProjectUpdate
from app.security import ANYONE
from app.services.importing import (
    ImportSummary,
    InputLimits,
    Source,
    al_cpl_records,
    al_cpl_source,
    file_source,
    import_source,
    record_json,
)
from app.settings import Settings
from models import Project

if TYPE_CHECKING:
    from app.runtime import Runtime

__all__ = ["ImportFailed", "import_local", "import_remote", "file_format"]

LARGE = 1024 * 1024
"""Files at least this large get a progress bar over their bytes."""
CHUNK = 1024 * 1024


class ImportFailed(Exception):
    """The import was refused; the message says why (every bad line, for a bad file)."""


def file_format(path: Path, given: str | None) -> Literal["csv", "jsonl"]:
    """The format named, or the one the file's suffix says (``.csv``; anything else JSONL)."""
    if given in ("csv", "jsonl"):
        return given  # type: ignore[return-value]
    return "csv" if path.suffix.lower() == ".csv" else "jsonl"


class _Counted(io.RawIOBase):
    """A raw file whose reads advance a progress bar."""

    def __init__(self, raw: IO[bytes], bar: tqdm[Any]) -> None:
        self.raw, self.bar = raw, bar

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n: int = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        self.bar.update(n)
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def _opener(path: Path, desc: str) -> Callable[[], AbstractContextManager[IO[bytes]]]:
    size = path.stat().st_size

    @contextmanager
    def open_file() -> Iterator[IO[bytes]]:
        with tqdm(total=size, unit="B", unit_scale=True, desc=desc,
                  disable=size < LARGE) as bar:
            with io.BufferedReader(_Counted(path.open("rb", buffering=0), bar)) as handle:
                yield handle

    return open_file


def _describe(error: ServiceError) -> str:
    lines = [error.detail]
    for item in error.members.get("errors", [])[:50]:
        where = f"line {item['line']}" if "line" in item else f"item {item.get('index')}"
        lines.append(f"  {where}: {item.get('reason') or item}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- in-process
def project_fields(policy: str | None, question: str | None) -> dict[str, str]:
    """The project's ``policy`` and ``question`` that ``--policy`` and ``--question`` give
    (validated as a project's: :class:`ImportFailed` otherwise)."""
    from pydantic import ValidationError

    try:
        changes = ProjectUpdate.model_validate({"policy": policy, "question": question})
    except ValidationError as exc:
        raise ImportFailed("; ".join(f"--{e['loc'][0]}: {e['msg']}" for e in exc.errors())
                           ) from None
    return changes.model_dump(exclude_none=True, include={"policy", "question"})


def _project_named(session: Session, name: str, settings: Settings, runtime: Runtime,
                   fields: dict[str, str]) -> tuple[int, str | None]:
    """The id of the one project named ``name``, created (with its new key) when none is;
    with ``fields`` (its policy, its question) set either way, before the file is read."""
    from app.services.projects import create_project, update_project

    ids = list(session.scalars(select(Project.id).where(Project.name == name)))
    session.rollback()
    if len(ids) > 1:
        raise ImportFailed(f"{len(ids)} projects are named {name!r}; rename one first")
    if ids:
        if fields:
            update_project(session, ids[0], ProjectUpdate.model_validate(fields), runtime)
        return ids[0], None
    project, key = create_project(session, ProjectCreate.model_validate({"name": name, **fields}),
                                  settings.default_prediction_model)
    return project.id, key


def import_local(settings: Settings, project: str, source: Source,
                 fields: dict[str, str] | None = None) -> tuple[int, str | None, ImportSummary]:
    """Import ``source`` into the project named ``project`` of the configured database,
    the project created or updated first with ``fields`` (:func:`project_fields`).

    Returns the project id, its new key (when it was created here, else None) and the summary.
    """
    from app.db import migrate
    from app.runtime import Runtime
    from app.services.staging import StagePolicy
    from app.services.unit import ProjectWork

    migrate(settings.database_url)
    runtime = Runtime.start(settings)
    try:
        with runtime.database.sessions() as session:
            pid, key = _project_named(session, project, settings, runtime, fields or {})
            with runtime.open(ProjectWork, pid, session) as work, \
                    tqdm(unit="records", desc="writing", disable=None) as bar:
                def progress(done: int, total: int) -> None:
                    bar.total = total
                    bar.update(done)

                try:
                    summary = import_source(work, source, caller=ANYONE, progress=progress,
                                            policy=StagePolicy.of(settings))
                except ServiceError as exc:
                    raise ImportFailed(_describe(exc)) from exc
    finally:
        runtime.close()
    return pid, key, summary


def local_source(*, al_cpl: Path | None, domain: str | None, with_labels: bool,
                 file: Path | None, fmt: str | None,
                 limits: InputLimits | None = None) -> Source:
    """The source of the CLI's options: an AL-CPL domain or a file (read line by line under
    ``limits``, as the route reads its body)."""
    if al_cpl is not None:
        if domain is None:
            raise ImportFailed("--al-cpl needs --domain")
        return al_cpl_source(al_cpl, domain, with_labels=with_labels)
    if file is None:
        raise ImportFailed("give --al-cpl DIR --domain NAME, or --file PATH")
    if not file.is_file():
        raise ImportFailed(f"{file}: no such file")
    return file_source(_opener(file, file.name), file_format(file, fmt),
                       limits or InputLimits())


# ---------------------------------------------------------------------------- over HTTP
def _body(*, al_cpl: Path | None, domain: str | None, with_labels: bool,
          file: Path | None) -> Iterator[bytes]:
    if al_cpl is not None:
        assert domain is not None
        buffer: list[str] = []
        for record in al_cpl_records(al_cpl, domain, with_labels=with_labels):
            buffer.append(record_json(record) + "\n")
            if len(buffer) >= 1000:
                yield "".join(buffer).encode("utf-8")
                buffer = []
        yield "".join(buffer).encode("utf-8")
        return
    assert file is not None
    size = file.stat().st_size
    with file.open("rb") as handle, tqdm(total=size, unit="B", unit_scale=True,
                                         desc="sending", disable=size < LARGE) as bar:
        while chunk := handle.read(CHUNK):
            bar.update(len(chunk))
            yield chunk


def import_remote(url: str, api_key: str | None, project: str, *, al_cpl: Path | None,
                  domain: str | None, with_labels: bool, file: Path | None,
                  fmt: str | None, respond_async: bool = False,
                  fields: dict[str, str] | None = None
                  ) -> tuple[int, str | None, dict[str, Any]]:
    """Stream the import to a running service at ``url``; the same answer as in-process
    (the project created or updated first with ``fields``).

    ``respond_async`` sends ``Prefer: respond-async``; a 202 (asked, or a file over the
    service's threshold) is followed until its job ends.
    """
    try:
        import httpx
    except ImportError as exc:  # a dev dependency; the service itself does not need it
        raise ImportFailed("--url needs httpx: pip install httpx") from exc
    if al_cpl is not None and domain is None:
        raise ImportFailed("--al-cpl needs --domain")
    if al_cpl is None and file is None:
        raise ImportFailed("give --al-cpl DIR --domain NAME, or --file PATH")
    headers = {"X-API-Key": api_key} if api_key else {}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=None) as client:
        ids: list[int] = []
        offset = 0
        while True:
            page = _ok(client.get("/projects", params={"limit": 10_000, "offset": offset}))
            ids += [p["id"] for p in page["items"] if p["name"] == project]
            offset += len(page["items"])
            if not page["items"] or offset >= page["total"]:
                break
        key: str | None = None
        if len(ids) > 1:
            raise ImportFailed(f"{len(ids)} projects are named {project!r}; rename one first")
        if ids:
            pid = ids[0]
            if fields:
                _ok(client.patch(f"/projects/{pid}", json=fields))
        else:
            created = _ok(client.post("/projects", json={"name": project, **(fields or {})}))
            pid, key = created["id"], created["api_key"]
            if not api_key:
                client.headers["X-API-Key"] = key
        fmt = "jsonl" if al_cpl is not None else file_format(file, fmt)  # type: ignore[arg-type]
        headers = {"Content-Type": "text/csv" if fmt == "csv" else "application/jsonl"}
        if respond_async:
            headers["Prefer"] = "respond-async"
        response = client.post(f"/projects/{pid}/import", params={"format": fmt},
                               headers=headers, content=_body(
                                   al_cpl=al_cpl, domain=domain, with_labels=with_labels,
                                   file=file))
        answer = _ok(response)
        if response.status_code == 202:
            answer = follow(client, response.headers["Location"])
    return pid, key, answer


BUSY = (429, 503)
"""Answers to a job's read that are retried after ``Retry-After``."""


def follow(client: Any, location: str, *, interval: float = 1.0) -> dict[str, Any]:
    """Read the job at ``location`` until it ends, showing its progress; its ``result``.

    Raises :class:`ImportFailed` with the job's problem (as a refused request's) when it
    failed, or its reason when it was cancelled.
    """
    pause = 0.05
    with tqdm(total=100, unit="%", desc="importing (job)", disable=None,
              bar_format="{l_bar}{bar}| {n:.0f}/{total} % [{elapsed}]") as bar:
        while True:
            response = client.get(location)
            if response.status_code in BUSY:
                time.sleep(float(response.headers.get("Retry-After", interval)))
                continue
            job = _ok(response)
            bar.update(100 * float(job.get("progress") or 0) - bar.n)
            if job.get("message"):
                bar.set_postfix_str(str(job["message"]), refresh=False)
            if job["state"] == "succeeded" or job.get("result") is not None:
                return dict(job.get("result") or {})  # a cancel after the last step: stored
            if job["state"] == "failed":
                raise ImportFailed(_problem(job.get("problem") or {}, 500))
            if job["state"] == "cancelled":
                raise ImportFailed(f"the import's job {location} was cancelled "
                                   f"({job.get('reason')}); nothing of the file was stored")
            time.sleep(pause)
            pause = min(pause * 2, interval)


def _problem(body: dict[str, Any], status: int) -> str:
    """A problem+json body as the CLI prints it: its status, title, detail and bad lines."""
    lines = [f"{body.get('status', status)} {body.get('title')}: {body.get('detail')}"]
    for item in body.get("errors", [])[:50]:
        where = f"line {item['line']}" if "line" in item else f"{item.get('loc', '')}"
        lines.append(f"  {where}: {item.get('reason') or item.get('msg') or item}")
    return "\n".join(lines)


def _ok(response: Any) -> Any:
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            raise ImportFailed(f"{response.status_code}: {response.text[:2000]}") from None
        raise ImportFailed(_problem(body, response.status_code))
    return response.json()

