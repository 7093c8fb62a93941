"""The adapter: Label Studio's annotations become sporal's labels, sporal's questions its tasks.

Label Studio Community has no per-user task assignment, so each person answers in a Label Studio
project of their own (``sporal labelstudio add-person``), and the adapter asks sporal's ``next``
for that person by name (``next?annotator=<name>``): sporal never asks them a pair they
answered, leases their questions to them (nobody else is asked those while their tasks are
open) and sends them second opinions, disagreements and check questions as it sends them to
``/ui/``, as plain tasks (no note says why a pair is asked). Label Studio is driven through its
REST API and webhooks (not its ML-backend protocol, which caches predictions per model version
and cannot create tasks). One worker applies every change, in order, so that the state file
(:mod:`sporal_labelstudio.state`) never sees two writers:

- an annotation created or updated → ``POST labels`` as its author (the Label Studio user's
  email or username, ``names``), with an ``Idempotency-Key`` made of the annotation's identity
  and ``updated_at`` (an event seen twice changes nothing); its previous label, if the answer
  changed, is retracted first; then the author's window is refilled at once, before the
  webhook is answered, so that the task Label Studio serves next is sporal's;
- a 409 contradiction → the annotation is kept, the problem stored, the proof written into the
  task, naming the Label Studio annotations behind the asserted labels, and the refusal shown
  to its annotator on the open tasks of their own project until they answer again; an answer
  that fails a check question, or that a consensus project contests, is told the same way
  (only its owner sees it: nobody else's project holds it);
- a deleted annotation → ``DELETE labels/{id}`` (unless another annotation asserts the same
  label), then every stored conflict is tried again;
- each person's window (:mod:`sporal_labelstudio.window`): ``W`` open tasks from
  ``next?annotator=<name>&k=W``, ranked by a prediction score that Label Studio's "Uncertainty
  sampling" reads (lowest first; predictions are hidden from annotators). The window is the
  lease: asking ``next`` again renews the lease on what it lists and ends it on the rest, so a
  new question that ``next`` no longer lists leaves the window (deleted, in one call, and only
  while nobody has annotated it). A person's window is asked again right after they answer
  and on a timer well inside the lease; after anyone else's answer only the tasks sporal has
  decided leave it. Second opinions, disagreements and check questions (sporal lists its
  team question first; a decided pair there is a check) stay open until answered;
- each project's description says sporal's decided share, how many of the map's pairs are
  likely wrong (``GET quality``: the decided ones and the predicted rest, each with its 90%
  interval; :func:`quality_line`) and the adapter's health;
- the reconcile: Label Studio sends each webhook once, with a 1 s timeout and no retry, and none
  for imported annotations, so each project's export is compared with the state at start and
  periodically. The team's one project of earlier versions is adopted: its answers are
  forwarded, its bot retirements withdrawn, its open tasks taken out.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from sporal_labelstudio.ls_client import LabelStudioClient, LabelStudioError
from sporal_labelstudio.sporal_client import (
    Contradiction,
    LabelRef,
    Quality,
    SporalClient,
    SporalError,
    WrongPairs,
)
from sporal_labelstudio.state import AnnotationRow, MessageRow, PersonRow, State, TaskRow
from sporal_labelstudio.window import Asked, Held, plan_window

__all__ = ["Adapter", "DEFAULT_QUESTION", "LABEL_CONFIG", "MODEL_VERSION", "NAMES", "Refreshed",
           "WEBHOOK_ACTIONS", "parse_label", "quality_line", "user_name"]

logger = logging.getLogger("sporal.labelstudio")

MODEL_VERSION = "sporal"
BOT_EMAIL = "sporal-bot@example.com"
SECRET_HEADER = "X-Sporal-Secret"
WEBHOOK_ACTIONS = ["ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED",
                   "ANNOTATIONS_DELETED"]
FROM_NAME = "prerequisite"
DEFAULT_QUESTION = "Is {a} needed before {b}, directly or through other concepts?"
DEFINITION = ("What the question asks: answer Yes when B cannot be learned without A, whether "
              "B needs A directly or through other concepts (A before C and C before B is a "
              "Yes); answer No only when B can be learned without A at all.")
CONTESTED = ("Your answer on {a!r} → {b!r} ({label}) differs from what other answers say "
             "(directly or through other pairs): sporal counts it and asks others too.")
NAMES = ("email", "username")  # how a Label Studio user is named in sporal
DESCRIBE_EVERY = 60.0  # seconds between health lines when nothing else changed
DESCRIBE_AFTER = 15.0  # seconds at least between two descriptions (a slow PATCH of a project)

# The alias makes Label Studio write sporal's own label words into value.choices. The note is
# a Text (read-only); the question and the descriptions come from the task's data.
LABEL_CONFIG = """<View>
  <Text name="question" value="$question"/>
  <Text name="a_description" value="$a_description"/>
  <Text name="b_description" value="$b_description"/>
  <Choices name="prerequisite" toName="question" choice="single" required="true" showInline="true">
    <Choice value="Yes" alias="positive" hotkey="y"/>
    <Choice value="No" alias="negative" hotkey="n"/>
  </Choices>
  <Text name="note" value="$sporal_note"/>
</View>"""


def parse_label(annotation: dict[str, Any]) -> str | None:
    """The yes/no answer of an annotation (``"positive"``, ``"negative"``), else None."""
    if annotation.get("was_cancelled"):
        return None
    for result in annotation.get("result") or []:
        if result.get("from_name") != FROM_NAME:
            continue
        for choice in (result.get("value") or {}).get("choices") or []:
            if choice in ("positive", "negative"):
                return str(choice)
            if str(choice).lower().startswith("yes"):
                return "positive"
            if str(choice).lower().startswith("no"):
                return "negative"
    return None


def _user_id(completed_by: Any) -> int | None:
    if isinstance(completed_by, dict):
        completed_by = completed_by.get("id")
    return int(completed_by) if completed_by is not None else None


def user_name(user: dict[str, Any], names: str = "email") -> str:
    """A Label Studio user's name in sporal: their ``email`` or ``username`` (``names``), the
    other one when that is empty."""
    first, second = ("email", "username") if names == "email" else ("username", "email")
    return str(user.get(first) or user.get(second) or f"labelstudio:user:{user.get('id')}")


def _about(count: float) -> str:
    """An expected count as a person reads it: one decimal under ten, else whole."""
    return f"{count:.1f}" if count < 10 else f"{count:,.0f}"


def _wrong(count: WrongPairs) -> str:
    return f"≈ {_about(count.estimate)} (90%: {count.low:,}–{count.high:,})"


def quality_line(quality: Quality) -> str | None:
    """The description's line on how right the map is (None while nothing is decided nor
    predicted).

    Examples
    --------
    >>> from sporal_labelstudio.sporal_client import Quality, WrongPairs
    >>> quality_line(Quality(WrongPairs(3.24, 1, 6), None, 1204, 0))
    'Likely wrong: ≈ 3.2 (90%: 1–6) of the 1,204 decided pairs.'
    >>> quality_line(Quality(WrongPairs(0.0, 0, 0), WrongPairs(12.4, 8, 17), 0, 300))
    'Likely wrong: ≈ 12 (90%: 8–17) of the 300 predicted ones.'
    >>> quality_line(Quality(WrongPairs(0.0, 0, 0), None, 0, 300)) is None
    True
    """
    parts = []
    if quality.decided:
        parts.append(f"{_wrong(quality.decided_wrong)} of the {quality.decided:,} decided pairs")
    if quality.undecided and quality.predicted_wrong is not None:
        parts.append(f"{_wrong(quality.predicted_wrong)} of the {quality.undecided:,} "
                     "predicted ones")
    return f"Likely wrong: {'; '.join(parts)}." if parts else None


def _stamp(updated_at: Any) -> str:
    """``updated_at`` in one spelling, whether it came from a webhook or the export."""
    text = str(updated_at)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat()
    except ValueError:
        return text


@dataclass(frozen=True)
class Refreshed:
    """What one refresh of the window did."""

    retired: int  # decided tasks taken out
    created: int  # new tasks that refill the window
    rescored: int  # open tasks given a new rank (their order changed)
    notes: int  # tasks whose note was written
    seconds: float

    @property
    def touched(self) -> int:
        return self.retired + self.created

    def __add__(self, other: Refreshed) -> Refreshed:
        return Refreshed(self.retired + other.retired, self.created + other.created,
                         self.rescored + other.rescored, self.notes + other.notes,
                         self.seconds + other.seconds)


NOTHING = Refreshed(retired=0, created=0, rescored=0, notes=0, seconds=0.0)


class Adapter:
    """Keeps each person's Label Studio project and one sporal project in step.

    Parameters
    ----------
    sporal : SporalClient
    ls : LabelStudioClient
    state : State
    project : int
        The sporal project.
    window : int, default 3
        How many open tasks each person's Label Studio project holds (``next?k=``).
    strategy : str, optional
        sporal's strategy (default: the service's default).
    names : {"email", "username"}, default "email"
        How a Label Studio user is named in sporal.
    """

    def __init__(self, sporal: SporalClient, ls: LabelStudioClient, state: State, *,
                 project: int, window: int = 3, strategy: str | None = None,
                 names: str = "email") -> None:
        if names not in NAMES:
            raise ValueError(f"names is one of {', '.join(NAMES)}, not {names!r}")
        self.sporal = sporal
        self.ls = ls
        self.state = state
        self.project = project
        self.window = window
        self.strategy = strategy
        self.names = names
        self.lease_seconds: float | None = None
        # Labels are forwarded at once by the event worker while the window worker talks to
        # Label Studio; this lock keeps two forwards (or two refreshes) apart.
        self.lock = threading.RLock()
        self._descriptions: dict[str, str | None] | None = None
        self._info: dict[str, Any] | None = None
        self._users: dict[int, str] = {}
        self._described: dict[int, tuple[str, float]] = {}
        self._undecided: int | None = None
        self._asked: dict[int, float] = {}  # person -> when their window was last asked
        self.recent: deque[Refreshed] = deque(maxlen=1000)  # the last windows asked
        self.config_kept: str | None = None  # why setup kept an older labeling config

    # ------------------------------------------------------------------ setup
    @property
    def legacy_project(self) -> int | None:
        """The team's one Label Studio project of earlier versions, if setup adopted one."""
        value = self.state.get("ls_project")
        return int(value) if value else None

    @property
    def bot_user(self) -> int:
        return int(self.state.get("bot_user") or 0)

    @property
    def secret(self) -> str:
        return self.state.get("secret") or ""

    @property
    def info(self) -> dict[str, Any]:
        """sporal's project (read once; the reconcile reads it again)."""
        if self._info is None:
            self._info = self.sporal.project(self.project)
        return self._info

    def people(self) -> list[PersonRow]:
        """Everyone with a project of their own."""
        return self.state.people()

    def identity(self, person: str | None = None) -> str:
        """A description's first line: which sporal project a Label Studio project serves, and
        for whom, so that setup adopts it (after a lost state file) and never another
        server's. Without ``person``: the team's one project of earlier versions."""
        line = f"Questions chosen by sporal project {self.project} at {self.sporal.url}"
        return f"{line} for {person}." if person else f"{line}."

    def _fields(self) -> dict[str, Any]:
        return {"label_config": LABEL_CONFIG, "sampling": "Uncertainty sampling",
                "model_version": MODEL_VERSION, "maximum_annotations": 1,
                "show_skip_button": True, "show_collab_predictions": False}

    def setup(self, webhook_url: str) -> list[int]:
        """The webhook secret, the bot of earlier versions, the team's project of earlier
        versions (adopted, when there is one) and each person's project with its webhook.

        Running it again changes nothing but what drifted (config, sampling, webhook).
        Returns the Label Studio projects it keeps in step.
        """
        self.state.put("webhook_url", webhook_url)
        self.state.put("secret", self.secret or secrets.token_hex(24))
        self._setup_bot()
        projects = self.ls.projects()
        known = self.legacy_project
        found = [p for p in projects if (known and p["id"] == known) or (not known and str(
            p.get("description") or "").split("\n")[0] == self.identity())]
        if found:
            self.state.put("ls_project", str(found[0]["id"]))
            self._update_config(int(found[0]["id"]), self._fields())
            self._setup_webhook(int(found[0]["id"]), webhook_url)
        for person in self.people():
            self._update_config(person.ls_project, self._fields())
            self._setup_webhook(person.ls_project, webhook_url)
        return [p for p in [self.legacy_project, *(x.ls_project for x in self.people())]
                if p is not None]

    def add_person(self, who: str, title: str | None = None) -> PersonRow:
        """Give the Label Studio user ``who`` (an email or a username; they signed up
        already) a project of their own, or adopt the one made for them before."""
        users = [u for u in self.ls.users() if who in (u.get("email"), u.get("username"))]
        if not users:
            raise LookupError(f"no Label Studio user {who!r}: they sign up first")
        user_id, name = int(users[0]["id"]), user_name(users[0], self.names)
        for person in self.people():
            if person.user_id == user_id:
                return person
        identity = self.identity(name)
        found = [p for p in self.ls.projects()
                 if str(p.get("description") or "").split("\n")[0] == identity]
        if found:
            ls_project = int(found[0]["id"])
            self._update_config(ls_project, self._fields())
        else:
            title = title or f"sporal #{self.project} {self.info['name']}: {name}"
            ls_project = int(self.ls.create_project(
                title=title[:50], description=identity, **self._fields())["id"])
        self._setup_webhook(ls_project, self.state.get("webhook_url") or "")
        person = PersonRow(user_id=user_id, name=name, ls_project=ls_project)
        with self.state.session() as session:
            session.merge(person)
        self._users[user_id] = name
        return person

    def _update_config(self, ls_project: int, fields: dict[str, Any]) -> None:
        """Bring an adopted project to ``fields``. Label Studio refuses a labeling config that
        existing annotations do not fit (an earlier version's bot annotations wrote a text
        area): those are withdrawn first; if it still refuses, the old config is kept. It
        refuses a model version that no prediction has yet: the first refresh sets it."""
        fields, withdrawn = dict(fields), False
        while True:
            try:
                self.ls.update_project(ls_project, **fields)
                return
            except LabelStudioError as error:
                if error.status != 400:
                    raise
                if "model_version" in fields and "model_version" in str(error):
                    del fields["model_version"]
                    self.state.put(f"model_version_pending:{ls_project}", "1")
                elif "label_config" in fields and not withdrawn:
                    withdrawn = True
                    self.withdraw_bot_tasks(ls_project, self.ls.export(ls_project))
                elif "label_config" in fields:
                    del fields["label_config"]
                    self.config_kept = ("Label Studio refused the new labeling config, so the "
                                        f"project keeps its own: {error}")
                    logger.warning("%s", self.config_kept)
                else:
                    raise

    def _setup_bot(self) -> None:
        """The bot user of earlier versions, whose annotations are withdrawn (none is made
        now: the adapter annotates nothing)."""
        users = self.ls.users()
        self._users = {int(u["id"]): user_name(u, self.names) for u in users}
        bots = [u for u in users if u.get("email") == BOT_EMAIL]
        self.state.put("bot_user", str(bots[0]["id"]) if bots else "0")

    def _setup_webhook(self, ls_project: int, webhook_url: str) -> None:
        hook = {"project": ls_project, "url": webhook_url, "send_payload": True,
                "send_for_all_actions": False, "headers": {SECRET_HEADER: self.secret},
                "is_active": True, "actions": WEBHOOK_ACTIONS}
        hooks = [h for h in self.ls.webhooks(ls_project)
                 if h.get("project") == ls_project and h.get("url") == webhook_url]
        if hooks:
            self.ls.update_webhook(int(hooks[0]["id"]), **hook)
        else:
            self.ls.create_webhook(**hook)

    def name_of(self, user: int | None) -> str | None:
        """The sporal annotator name of Label Studio user ``user``."""
        if user is None:
            return None
        with self.state.session() as session:
            person = session.get(PersonRow, user)
            if person is not None:
                return person.name
        if user not in self._users:
            try:
                self._users = {int(u["id"]): user_name(u, self.names) for u in self.ls.users()}
            except LabelStudioError:
                logger.warning("could not read Label Studio's users", exc_info=True)
        return self._users.get(user) or f"labelstudio:user:{user}"

    # ------------------------------------------------------------------ events
    def handle(self, payload: dict[str, Any]) -> None:
        """Apply one webhook payload (an event seen before changes nothing); see
        :meth:`serve_next` for what follows it."""
        action = payload.get("action")
        if action in ("ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_CREATED"):
            annotations = payload.get("annotation")
            if isinstance(annotations, dict):
                annotations = [annotations]
            task = payload.get("task")
            tasks = task if isinstance(task, list) else [task] * len(annotations or [])
            for annotation, task_body in zip(annotations or [], tasks, strict=False):
                task_id = annotation.get("task") or (task_body or {}).get("id")
                if task_id is not None:
                    self.forward(annotation, int(task_id))
        elif action == "ANNOTATIONS_DELETED":
            self.deleted([int(a["id"]) for a in payload.get("annotations") or []])
        else:
            logger.debug("ignored webhook action %s", action)

    @staticmethod
    def authors(payload: dict[str, Any]) -> set[int]:
        """The Label Studio users whose annotations a webhook payload created or updated."""
        annotations = payload.get("annotation")
        if isinstance(annotations, dict):
            annotations = [annotations]
        if payload.get("action") == "ANNOTATIONS_DELETED" or not isinstance(annotations, list):
            return set()
        found = {_user_id(a.get("completed_by")) for a in annotations if isinstance(a, dict)}
        return {user for user in found if user is not None}

    def forward(self, annotation: dict[str, Any], task_id: int) -> None:
        """An annotation was created or updated: make sporal's labels say the same."""
        with self.lock:
            self._forward(annotation, task_id)

    def _forward(self, annotation: dict[str, Any], task_id: int) -> None:
        annotation_id = int(annotation["id"])
        user = _user_id(annotation.get("completed_by"))
        stamp = _stamp(annotation.get("updated_at"))
        with self.state.session() as session:
            task = session.get(TaskRow, task_id)
            if task is None or (user is not None and user == self.bot_user):
                return  # not a task of ours, or the bot's own retirement
            row = session.get(AnnotationRow, annotation_id)
            label = parse_label(annotation)
            if row is not None and (row.status == "deleted" or row.updated_at > stamp):
                return  # a deleted annotation never returns; an older version (a stale export)
            if (row is not None and row.updated_at == stamp
                    and not (row.status == "empty" and label is not None)):
                return  # seen already (an interrupted forward is finished instead)
            if row is not None and row.status == "asserted" and row.label == label:
                row.updated_at = stamp  # saved again with the same answer
                return
            a, b = task.a, task.b
            previous = row.sporal_label_id if row is not None and row.status == "asserted" else None
            if row is None:
                row = AnnotationRow(annotation_id=annotation_id, task_id=task_id, user_id=user,
                                    updated_at=stamp, status="empty")
                session.add(row)
            row.updated_at, row.label, row.user_id = stamp, label, user
            row.sporal_label_id, row.problem = None, None
            row.status = "cancelled" if annotation.get("was_cancelled") else "empty"
            if task.status in ("open", "deleted", "retired"):
                task.status = "answered"
            if user is not None:  # a note shown to this annotator has been seen: it goes
                message = session.get(MessageRow, user)
                if (message is not None and message.published
                        and message.annotation_id != annotation_id):
                    session.delete(message)
        retracted = previous is not None and self._release(previous, annotation_id)
        if label is not None:
            self._assert(annotation_id, a, b, label, user,
                         key=f"labelstudio:annotation:{annotation_id}:{stamp}")
        if retracted:
            self.retry_conflicts(f"retraction-{previous}")

    def deleted(self, annotation_ids: list[int]) -> None:
        """Annotations were deleted: retract their labels, reopen what they answered."""
        with self.lock:
            self._deleted(annotation_ids)

    def _deleted(self, annotation_ids: list[int]) -> None:
        retracted: list[int] = []
        for annotation_id in annotation_ids:
            with self.state.session() as session:
                bot_task = session.scalars(select(TaskRow).where(
                    TaskRow.bot_annotation_id == annotation_id)).first()
                if bot_task is not None:  # an earlier version's retirement went
                    bot_task.bot_annotation_id = None
                    if bot_task.status == "retired":
                        bot_task.status = "open"
                row = session.get(AnnotationRow, annotation_id)
                if row is None or row.status == "deleted":
                    continue
                label_id = row.sporal_label_id if row.status == "asserted" else None
                row.status = "deleted"
                task = session.get(TaskRow, row.task_id)
                live = session.scalars(select(AnnotationRow).where(
                    AnnotationRow.task_id == row.task_id, AnnotationRow.status != "deleted",
                    AnnotationRow.annotation_id != annotation_id)).first()
                if task is not None and task.status == "answered" and live is None:
                    task.status = "open"
            if label_id is not None and self._release(label_id, annotation_id):
                retracted.append(label_id)
        if retracted:
            self.retry_conflicts("retraction-" + "-".join(map(str, retracted)))

    def _assert(self, annotation_id: int, a: str, b: str, label: str, user: int | None,
                key: str, tell: bool = True) -> bool:
        """Post the answer; a refusal is stored, noted in its task and (``tell``) shown to its
        annotator on the open tasks."""
        annotator = self.name_of(user)
        # A service that records every answer (it has a policy) takes their source too.
        source = "labelstudio" if "policy" in self.info else None
        try:
            created = self.sporal.post_label(self.project, a, b, label,  # type: ignore[arg-type]
                                             annotator=annotator, idempotency_key=key,
                                             source=source)
        except Contradiction as error:
            note = self._conflict_note(annotation_id, a, b, label, error)
            with self.state.session() as session:
                row = session.get(AnnotationRow, annotation_id)
                if row is not None:
                    row.status, row.problem = "conflict", json.dumps(error.problem)
                task_id = row.task_id if row is not None else None
            if tell:  # on their open tasks (their window is refilled before Label Studio
                self._tell(user, annotation_id, note)  # serves them the next one)
            if task_id is not None:
                self._write_note(task_id, note)
            logger.info("annotation %s refused: %s", annotation_id, note)
            return False
        with self.state.session() as session:
            row = session.get(AnnotationRow, annotation_id)
            if row is not None:
                row.status, row.sporal_label_id, row.problem = "asserted", created.id, None
            message = session.get(MessageRow, user) if user is not None else None
            if message is not None and message.annotation_id == annotation_id:
                session.delete(message)  # the refusal it told of is over: accepted now
        if created.check_failed:
            self._tell(user, annotation_id, f"Your answer on {a!r} → {b!r} ({label}) suggests "
                       f"another reading of the question. {DEFINITION}")
        if created.contested and tell:  # (both notes, when a failed check is contested)
            self._tell(user, annotation_id, CONTESTED.format(a=a, b=b, label=label))
        return True

    def _tell(self, user: int | None, annotation_id: int, text: str) -> None:
        """Show ``text`` to ``user`` on the open tasks of their own project until they answer
        again (written by :meth:`_publish_notes`; nobody else's project holds it)."""
        if user is None or user == self.bot_user:
            return
        with self.state.session() as session:
            earlier = session.get(MessageRow, user)
            if earlier is not None and not earlier.published:
                text = f"{earlier.text}\n\n{text}"  # not shown yet: both are
            session.merge(MessageRow(user_id=user, annotation_id=annotation_id, text=text,
                                     published=False))

    def _release(self, label_id: int, annotation_id: int) -> bool:
        """Retract ``label_id`` unless another live annotation asserts it too."""
        with self.state.session() as session:
            other = session.scalars(select(AnnotationRow).where(
                AnnotationRow.sporal_label_id == label_id, AnnotationRow.status == "asserted",
                AnnotationRow.annotation_id != annotation_id)).first()
        if other is not None:
            return False
        self.sporal.retract_label(self.project, label_id)
        return True

    def retry_conflicts(self, reason: str) -> None:
        """After a retraction, assert again every answer that sporal refused."""
        for row in self.state.annotations("conflict"):
            with self.state.session() as session:
                task = session.get(TaskRow, row.task_id)
            if task is None or row.label is None:
                continue
            key = f"labelstudio:annotation:{row.annotation_id}:{row.updated_at}:{reason}"
            if self._assert(row.annotation_id, task.a, task.b, row.label, row.user_id, key,
                            tell=False):  # refused again: its annotator knows already
                self._write_note(task.task_id, "sporal accepted this answer after a retraction.")

    # ------------------------------------------------------------------ notes
    def _who(self, ref: LabelRef) -> str:
        with self.state.session() as session:
            rows = list(session.scalars(select(AnnotationRow).where(
                AnnotationRow.sporal_label_id == ref.id, AnnotationRow.status == "asserted")))
        names = ", ".join(f"annotation #{r.annotation_id} (task #{r.task_id}, "
                          f"{self.name_of(r.user_id) or 'no user'})" for r in rows)
        return names or "a label posted outside Label Studio"

    def _proof_lines(self, proof: list[LabelRef], chains: list[list[str]]) -> list[str]:
        lines = [f"- {ref.a!r} → {ref.b!r}: {ref.label} (sporal label {ref.id}), "
                 f"by {self._who(ref)}" for ref in proof]
        lines += [f"- chain: {' → '.join(repr(c) for c in chain)}" for chain in chains]
        return lines

    def _conflict_note(self, annotation_id: int, a: str, b: str, label: str,
                       error: Contradiction) -> str:
        head = (f"sporal refused annotation #{annotation_id} ({a!r} → {b!r}: {label}): it "
                "contradicts these asserted labels. Delete or change one of them, or this "
                "answer; sporal retries it after any retraction.")
        return "\n".join([head, *self._proof_lines(error.proof, error.chains)])

    def _write_note(self, task_id: int, note: str) -> None:
        with self.state.session() as session:
            task = session.get(TaskRow, task_id)
            if task is None or task.note == note:
                return
            task.note = note
            data = self._task_data(task.a, task.b, note)
        self.ls.update_task_data(task_id, data)

    def _task_data(self, a: str, b: str, note: str = "") -> dict[str, Any]:
        if self._descriptions is None:
            self._descriptions = self.sporal.concepts(self.project)
        describe = self._descriptions
        template = str(self.info.get("question") or DEFAULT_QUESTION)
        question = template.replace("{a}", f"“{a}”").replace("{b}", f"“{b}”")
        return {"question": question,  # descriptions only where there are some
                "a_description": f"{a}: {describe[a]}" if describe.get(a) else "",
                "b_description": f"{b}: {describe[b]}" if describe.get(b) else "",
                "sporal_note": note, "sporal_pair": {"project": self.project, "a": a, "b": b}}

    @staticmethod
    def _open_note(person: PersonRow, messages: list[MessageRow]) -> str:
        """An open task's note in ``person``'s project: the notes waiting for them (why a pair
        is asked is never said: a second opinion looks like any other question)."""
        return "\n\n".join(m.text for m in messages if m.user_id == person.user_id)

    def _publish_notes(self, person: PersonRow) -> int:
        """Write the notes waiting for ``person`` into their open tasks; how many changed."""
        messages = self.state.messages()
        written = 0
        # Lowest score first: the tasks Label Studio serves next get the notes first.
        for task in sorted(self.state.tasks("open", person.ls_project),
                           key=lambda t: (t.score is None, t.score or 0.0, t.task_id)):
            note = self._open_note(person, messages)
            if note != task.note:
                self._write_note(task.task_id, note)
                written += 1
        fresh = [m for m in messages if m.user_id == person.user_id and not m.published]
        if fresh:
            with self.state.session() as session:
                row = session.get(MessageRow, person.user_id)
                if row is not None:
                    row.published = True
        return written

    # ------------------------------------------------------------------ the windows
    def _person(self, user: int) -> PersonRow | None:
        with self.state.session() as session:
            return session.get(PersonRow, user)

    def serve_next(self, users: set[int]) -> Refreshed:
        """After an event: refill the windows of the people who answered (before the
        webhook is answered, so that Label Studio serves them sporal's next question; this
        renews their lease). New tasks go after the open ones, in sporal's order, so that no
        open task is scored again (two more calls): the window worker's :meth:`prune` then
        takes the tasks sporal decided out of everyone else's window."""
        with self.lock:
            done = NOTHING
            for person in self.people():
                if person.user_id in users:
                    done += self._refresh_person(person, rerank=False)
                    self._asked[person.user_id] = time.monotonic()
            return done

    def refresh(self, idle: float | None = None) -> Refreshed:
        """Ask sporal again for every person's window (renewing their leases), retire what
        it no longer lists, refill, keep Label Studio's order sporal's, and describe.

        With ``idle``, only the windows of people who have not answered for ``idle`` seconds
        (the others' leases were renewed by their answers): the task someone is answering
        leaves only when sporal decided it, or after they left it that long.
        """
        started = time.monotonic()
        with self.lock:
            done = NOTHING
            for person in self.people():
                if idle is None or started - self._asked.get(person.user_id, 0.0) >= idle:
                    done += self._refresh_person(person)
                    self._asked[person.user_id] = time.monotonic()
            self._retire_legacy()
        self.describe()
        done = replace(done, seconds=time.monotonic() - started)
        self._log("refresh", done)
        return done

    def prune(self) -> Refreshed:
        """Take the tasks sporal has decided out of every window (a person whose window
        empties gets a new one), and describe."""
        started = time.monotonic()
        with self.lock:
            done = NOTHING
            for person in self.people():
                done += self._prune_person(person)
        self.describe()  # (a slow call of Label Studio: answers need not wait for it)
        return replace(done, seconds=time.monotonic() - started)

    @staticmethod
    def _log(what: str, done: Refreshed) -> None:
        if done.touched or done.rescored or done.notes:
            logger.info("%s: %d retired, %d created, %d rescored, %d notes in %.0f ms", what,
                        done.retired, done.created, done.rescored, done.notes,
                        done.seconds * 1000)

    def _refresh_person(self, person: PersonRow, rerank: bool = True) -> Refreshed:
        """One person's window from ``next?annotator=<name>&k=2W``: the window is the lease,
        so a new question no longer listed (decided, or ranked out) leaves it; second
        opinions, disagreements and check questions (a decided pair: "check" here) stay until
        answered."""
        started = time.monotonic()
        rows = self.state.tasks("open", person.ls_project)
        kept = sum(1 for t in rows if t.reason != "new")  # leased or not, they stay
        # Twice the window: the open tasks stay listed (and leased) while sporal's ranking
        # moves after each answer, so that few leave; the rest are leased to this person
        # until their window is asked again.
        questions = self.sporal.next(self.project, k=max(1, 2 * self.window - kept),
                                     annotator=person.name, strategy=self.strategy)
        if questions.reserved_until is not None:
            now = datetime.now(questions.reserved_until.tzinfo)
            self.lease_seconds = (questions.reserved_until - now).total_seconds()
        self._undecided = questions.undecided
        asked = [Asked((q.a, q.b), q.reason) for q in questions.queries]
        if asked and asked[0].reason == "new" and self.sporal.pair_status(
                self.project, *asked[0].pair).decided:  # a check question (sporal lists the
            asked[0] = Asked(asked[0].pair, "check")  # team's first; it says "new" for it)
        listed = {q.pair for q in asked}
        held = [Held(t.task_id, (t.a, t.b), t.score, t.reason) for t in rows]
        gone = {(t.a, t.b) for t in rows if (t.a, t.b) not in listed}
        plan = plan_window(held, asked, gone, self.window, rerank=rerank)
        self._retire(person.ls_project, plan.retire)
        self._rescore(person.ls_project, plan.rescore)
        self._create(person, plan.create)
        notes = self._publish_notes(person)
        done = Refreshed(retired=len(plan.retire), created=len(plan.create),
                         rescored=len(plan.rescore), notes=notes,
                         seconds=time.monotonic() - started)
        self._log(f"window of {person.name}", done)
        self.recent.append(done)
        return done

    def _prune_person(self, person: PersonRow) -> Refreshed:
        """Retire the new questions of ``person``'s window that sporal has decided (a window
        left empty is asked again)."""
        rows = self.state.tasks("open", person.ls_project)
        decided = [t.task_id for t in rows if t.reason == "new"
                   and self.sporal.pair_status(self.project, t.a, t.b).decided]
        if len(decided) == len(rows):
            return self._refresh_person(person)
        self._retire(person.ls_project, decided)
        return replace(NOTHING, retired=len(decided), notes=self._publish_notes(person))

    def _retire(self, ls_project: int, task_ids: list[int]) -> None:
        """Take tasks out of Label Studio in one call: only those nobody has annotated (an
        annotation that raced the call keeps its task, which the event that brings it marks
        answered)."""
        if not task_ids:
            return
        self.ls.delete_unanswered_tasks(ls_project, task_ids)
        with self.state.session() as session:
            for task_id in task_ids:
                row = session.get(TaskRow, task_id)
                if row is not None and row.status == "open":
                    row.status = "deleted"

    def _retire_legacy(self) -> None:
        """The open tasks of the team's project of earlier versions leave it (each person
        answers in their own project now)."""
        legacy = self.legacy_project
        if legacy is not None:
            self._retire(legacy, [t.task_id for t in self.state.tasks("open")
                                  if t.ls_project in (None, legacy)])

    def _rescore(self, ls_project: int, scores: dict[int, float]) -> None:
        if not scores:
            return
        self.ls.set_scores(ls_project, scores, MODEL_VERSION)
        with self.state.session() as session:
            for task_id, score in scores.items():
                row = session.get(TaskRow, task_id)
                if row is not None:
                    row.score = score

    def _create(self, person: PersonRow, create: list[tuple[Asked, float]]) -> None:
        """The new tasks with their scores, in one import."""
        if not create:
            return
        note = self._open_note(person, self.state.messages())
        tasks = [{"data": self._task_data(q.pair[0], q.pair[1], note),
                  "predictions": [{"result": [], "score": score,
                                   "model_version": MODEL_VERSION}]} for q, score in create]
        ids = self.ls.import_tasks(person.ls_project, tasks)
        if len(ids) != len(create):  # the reconcile adopts them from the export
            logger.warning("Label Studio created %d tasks of %d", len(ids), len(create))
            return
        with self.state.session() as session:  # (Label Studio on SQLite reuses the id of
            for task_id, (question, score) in zip(ids, create, strict=True):  # a deleted task)
                session.merge(TaskRow(task_id=task_id, a=question.pair[0], b=question.pair[1],
                                    status="open", score=score, reason=question.reason,
                                    note=note, ls_project=person.ls_project))
        pending = f"model_version_pending:{person.ls_project}"
        if self.state.get(pending):  # now that predictions of it exist
            self.ls.update_project(person.ls_project, model_version=MODEL_VERSION)
            self.state.put(pending, "")

    def _quality(self) -> str | None:
        """The line of the descriptions that says how right the map is (None: sporal did not
        say, an older sporal without ``GET quality``, or nothing to say yet)."""
        try:
            return quality_line(self.sporal.quality(self.project))
        except SporalError as exc:
            logger.info("no quality line: %s", exc)
            return None

    def describe(self, stopped: bool = False) -> None:
        """Each person's project description: its identity, sporal's decided share, their
        answers that hold, how many pairs are likely wrong (:func:`quality_line`, asked of
        sporal only when a description is written) and the adapter's health (written when
        it changes, at most every few seconds, and at least every minute while it runs)."""
        if self._undecided is None or stopped:
            self._undecided = int(self.sporal.project(self.project).get("counts", {}).get(
                "undecided_pool_pairs") or 0)
        pool = int(self.info.get("counts", {}).get("pool_pairs") or 0)
        decided = pool - self._undecided
        share = f" ({decided / pool:.0%})" if pool else ""
        answers: dict[int | None, int] = {}
        for row in self.state.annotations("asserted"):
            answers[row.user_id] = answers.get(row.user_id, 0) + 1
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        health = (f"Adapter stopped at {now}: answers wait in Label Studio until it runs "
                  "again." if stopped else f"Adapter running: last sync {now}.")
        quality: list[str] | None = None  # asked once, for the first description written
        for person in self.people():
            progress = (f"sporal has decided {decided} of {pool} pool pairs{share}, "
                        f"{self._undecided} to go; {answers.get(person.user_id, 0)} of your "
                        "answers hold in sporal.")
            last = self._described.get(person.ls_project, ("", 0.0))
            since = time.monotonic() - last[1]
            if not stopped and since < (DESCRIBE_EVERY if progress == last[0]
                                        else DESCRIBE_AFTER):
                continue  # a later refresh writes it (the timer runs well within a minute)
            if quality is None:
                line = self._quality()
                quality = [line] if line else []
            lines = [self.identity(person.name), progress, *quality, health]
            if self.config_kept:
                lines.append(self.config_kept)
            self.ls.update_project(person.ls_project, description="\n".join(lines))
            self._described[person.ls_project] = (progress, time.monotonic())

    def stopped(self) -> None:
        """Say in each project's description that the adapter stopped (a clean stop)."""
        self.describe(stopped=True)

    # ------------------------------------------------------------------ reconcile
    def _adopt(self, task: dict[str, Any], ls_project: int) -> TaskRow | None:
        """A task of the project that the state does not know: one created just before a
        crash (or a lost state file). Its data names its pair."""
        pair = (task.get("data") or {}).get("sporal_pair") or {}
        if pair.get("project") != self.project or "a" not in pair or "b" not in pair:
            return None
        annotations = task.get("annotations") or []
        bot = [a for a in annotations if _user_id(a.get("completed_by")) == self.bot_user]
        status = "retired" if bot else ("answered" if annotations else "open")
        predictions = [p if isinstance(p, int) else p.get("id") for p in
                       task.get("predictions") or []]
        row = TaskRow(task_id=int(task["id"]), a=pair["a"], b=pair["b"], status=status,
                      bot_annotation_id=int(bot[0]["id"]) if bot else None,
                      prediction_id=predictions[0] if predictions else None,
                      note=(task.get("data") or {}).get("sporal_note") or "",
                      ls_project=ls_project)
        with self.state.session() as session:
            session.merge(row)
        logger.info("adopted task %s (%s, %s)", row.task_id, row.a, row.b)
        return row

    def reconcile(self) -> None:
        """Compare each Label Studio project's export with the state; apply what the webhooks
        missed.

        Answers keep arriving while the exports are read, so only what the state knew before
        them can count as deleted, and an older version of an annotation changes nothing.
        """
        self._info = None  # the question wording, the policy and the pool may have changed
        self._undecided = None
        recorded = {r.annotation_id for r in self.state.annotations() if r.status != "deleted"}
        present: set[int] = set()
        projects = [p for p in [self.legacy_project, *(x.ls_project for x in self.people())]
                    if p is not None]
        for ls_project in projects:
            present |= self._reconcile_project(ls_project)
        gone = sorted(recorded - present)
        if gone:
            self.deleted(gone)
        self._repair_labels()
        self._retire_legacy()
        self.prune()  # (an empty window is asked again; the others when their person answers)

    def _reconcile_project(self, ls_project: int) -> set[int]:
        """Forward what one project's export holds; the annotation ids it holds. The windows
        wait meanwhile (a task created after the export was read is not in it, and must not be
        taken for deleted)."""
        with self.lock:
            return self._reconcile_export(ls_project)

    def _reconcile_export(self, ls_project: int) -> set[int]:
        known = {t.task_id: t for t in self.state.tasks()}
        exported = self.ls.export(ls_project)
        present: set[int] = set()
        for task in exported:
            task_id = int(task["id"])
            if task_id not in known:
                adopted = self._adopt(task, ls_project)
                if adopted is None:
                    continue
                known[task_id] = adopted
            ids = set()
            for annotation in task.get("annotations") or []:
                ids.add(int(annotation["id"]))
                if _user_id(annotation.get("completed_by")) == self.bot_user:
                    continue
                present.add(int(annotation["id"]))
                self.forward(annotation, task_id)
            bot = known[task_id].bot_annotation_id
            if bot is not None and bot not in ids:
                self.deleted([bot])
        self._track_tasks(ls_project, exported)
        self.withdraw_bot_tasks(ls_project, exported)
        return present

    def _track_tasks(self, ls_project: int, exported: list[dict[str, Any]]) -> None:
        """Open tasks deleted in Label Studio leave the window; a task taken for deleted that
        is still there (annotated while it was being retired) is answered."""
        there = {int(t["id"]): bool(t.get("annotations")) for t in exported}
        legacy = ls_project == self.legacy_project
        with self.state.session() as session:
            for row in session.scalars(select(TaskRow).where(
                    TaskRow.status.in_(("open", "deleted")))):
                if row.ls_project != ls_project and not (legacy and row.ls_project is None):
                    continue
                if row.task_id not in there:
                    row.status = "deleted"
                elif row.status == "deleted":
                    row.status = "answered" if there[row.task_id] else "open"

    def withdraw_bot_tasks(self, ls_project: int, exported: list[dict[str, Any]]) -> None:
        """Withdraw the annotations of the bot (an earlier version retired tasks with them, so
        that Label Studio counted them as done and their answers went stale): a task that
        only the bot annotated is deleted, from any other the bot's annotation goes."""
        bot = self.bot_user
        only_bot: list[int] = []
        answered: set[int] = set()
        for task in exported:
            annotations = task.get("annotations") or []
            mine = [int(a["id"]) for a in annotations
                    if _user_id(a.get("completed_by")) == bot]
            if not mine:
                continue
            if len(mine) == len(annotations):
                only_bot.append(int(task["id"]))
            else:
                answered.add(int(task["id"]))
                for annotation_id in mine:
                    self.ls.delete_annotation(annotation_id)
        if only_bot:
            self.ls.delete_tasks(ls_project, only_bot)
        with self.state.session() as session:
            for row in session.scalars(select(TaskRow).where(
                    TaskRow.bot_annotation_id.is_not(None))):
                row.bot_annotation_id = None
                if row.task_id in only_bot:
                    row.status = "deleted"
                elif row.task_id in answered:
                    row.status = "answered"
                elif row.status == "retired":
                    row.status = "open"
        if only_bot:
            logger.info("withdrew %d tasks the bot had retired", len(only_bot))

    def _repair_labels(self) -> None:
        """Assert again the answers whose sporal label is gone (retracted outside the adapter)."""
        with self.lock:
            live = {int(x["id"]) for x in self.sporal.labels(self.project) if x.get("id")}
            for row in self.state.annotations("asserted"):
                if row.sporal_label_id in live or row.label is None:
                    continue
                with self.state.session() as session:
                    task = session.get(TaskRow, row.task_id)
                if task is None:
                    continue
                logger.info("label %s of annotation %s is gone from sporal: asserting it again",
                            row.sporal_label_id, row.annotation_id)
                self._assert(row.annotation_id, task.a, task.b, row.label, row.user_id,
                             key=f"labelstudio:annotation:{row.annotation_id}:"
                                 f"{row.updated_at}:repair-{row.sporal_label_id}")
