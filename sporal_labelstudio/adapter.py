"""The adapter: Label Studio's annotations become sporal's labels, sporal's questions its tasks.

Label Studio is driven through its REST API and webhooks (not its ML-backend protocol, which
caches predictions per model version and cannot create tasks). One worker applies every change,
in order, so that the state file (:mod:`sporal_labelstudio.state`) never sees two writers:

- an annotation created or updated → ``POST labels`` with an ``Idempotency-Key`` made of the
  annotation's identity and ``updated_at`` (an event seen twice changes nothing); its previous
  label, if the answer changed, is retracted first;
- a 409 contradiction → the annotation is kept, the problem stored, the proof written into the
  task, naming the Label Studio annotations behind the asserted labels, and the refusal shown to
  its annotator on the open tasks until they answer again (so the next task Label Studio serves
  them carries it); an answer that fails a check question shows the definition the same way;
- a deleted annotation → ``DELETE labels/{id}`` (unless another annotation asserts the same
  label), then every stored conflict is tried again;
- the window (:mod:`sporal_labelstudio.window`): ``W`` open tasks from
  ``next?annotator=labelstudio:<project>&k=W``, ranked by a prediction score that Label Studio's
  "Uncertainty sampling" reads (lowest first; predictions are hidden from annotators). It is
  stable: an open task leaves only when sporal has decided its pair (deleted, in one call, and
  only while nobody has annotated it: it never counts as anyone's work), new tasks only fill the
  free places (one import), and scores change only when sporal's order of the open tasks does
  (two calls). Questions sporal asks as a second opinion or on a disagreement stay open until
  answered, with a note saying why;
- the project's description says sporal's progress and when the adapter last synced;
- the reconcile: Label Studio sends each webhook once, with a 1 s timeout and no retry, and none
  for imported annotations, so the export is compared with the state at start and periodically.
  Tasks that an earlier version retired with a bot annotation are withdrawn there.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from sporal_labelstudio.ls_client import LabelStudioClient, LabelStudioError
from sporal_labelstudio.sporal_client import (
    Contradiction,
    LabelRef,
    SporalClient,
)
from sporal_labelstudio.state import AnnotationRow, MessageRow, State, TaskRow
from sporal_labelstudio.window import Asked, Held, plan_window

__all__ = ["Adapter", "DEFAULT_QUESTION", "LABEL_CONFIG", "MODEL_VERSION", "Refreshed",
           "WEBHOOK_ACTIONS", "parse_label"]

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
REASON_NOTES = {
    "second-opinion": "sporal asks for a second opinion on this pair: an earlier answer may be "
                      "wrong. Answer as you see it.",
    "disagreement": "Annotators disagree on this pair: your answer helps settle it.",
}
DESCRIBE_EVERY = 60.0  # seconds between health lines when nothing else changed
DESCRIBE_AFTER = 5.0  # seconds at least between two descriptions (a PATCH of the project)

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


class Adapter:
    """Keeps one Label Studio project and one sporal project in step.

    Parameters
    ----------
    sporal : SporalClient
    ls : LabelStudioClient
    state : State
    project : int
        The sporal project.
    window : int, default 10
        How many open tasks Label Studio holds (``next?k=``).
    strategy : str, optional
        sporal's strategy (default: the service's default).
    """

    def __init__(self, sporal: SporalClient, ls: LabelStudioClient, state: State, *,
                 project: int, window: int = 10, strategy: str | None = None) -> None:
        self.sporal = sporal
        self.ls = ls
        self.state = state
        self.project = project
        self.window = window
        self.strategy = strategy
        self.annotator = f"labelstudio:{project}"
        self.lease_seconds: float | None = None
        # Labels are forwarded at once by the event worker while the window worker talks to
        # Label Studio; this lock keeps two forwards of the same annotation apart.
        self.lock = threading.RLock()
        self._descriptions: dict[str, str | None] | None = None
        self._info: dict[str, Any] | None = None
        self._users: dict[int, str] = {}
        self._described: tuple[str, float] = ("", 0.0)
        self.config_kept: str | None = None  # why setup kept an older labeling config

    # ------------------------------------------------------------------ setup
    @property
    def ls_project(self) -> int:
        value = self.state.get("ls_project")
        if value is None:
            raise RuntimeError("no Label Studio project yet: run `sporal labelstudio setup`")
        return int(value)

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

    def identity(self) -> str:
        """The description's first line: which sporal project a Label Studio project serves, so
        that setup adopts it (after a lost state file) and never another server's."""
        return f"Questions chosen by sporal project {self.project} at {self.sporal.url}."

    def setup(self, webhook_url: str, title: str | None = None) -> int:
        """Create or adopt the Label Studio project and its webhook.

        Running it again changes nothing but what drifted (config, sampling, webhook). A
        project made by an earlier version gets the current labeling config; should Label
        Studio refuse it, the old one is kept and :attr:`config_kept` says why. Returns the
        Label Studio project id.
        """
        title = title or f"sporal #{self.project}: {self.info['name']}"[:50]
        fields = {"label_config": LABEL_CONFIG, "sampling": "Uncertainty sampling",
                  "model_version": MODEL_VERSION, "maximum_annotations": 1,
                  "show_skip_button": True, "show_collab_predictions": False}
        known = self.state.get("ls_project")
        found = [p for p in self.ls.projects()
                 if (known and p["id"] == int(known)) or (not known and str(
                     p.get("description") or "").split("\n")[0] == self.identity())]
        if found:
            ls_project = int(found[0]["id"])
            self.state.put("ls_project", str(ls_project))
            self._update_config(ls_project, fields)
        else:
            ls_project = int(self.ls.create_project(
                title=title, description=self.identity(), **fields)["id"])
            self.state.put("ls_project", str(ls_project))
        self._setup_bot()
        self._setup_webhook(ls_project, webhook_url)
        return ls_project

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
                    self.state.put("model_version_pending", "1")
                elif "label_config" in fields and not withdrawn:
                    withdrawn = True
                    self.withdraw_bot_tasks(self.ls.export(ls_project))
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
        self._users = {int(u["id"]): str(u.get("email") or u.get("username") or "")
                       for u in users}  # names for the notes to annotators
        bots = [u for u in users if u.get("email") == BOT_EMAIL]
        self.state.put("bot_user", str(bots[0]["id"]) if bots else "0")

    def _setup_webhook(self, ls_project: int, webhook_url: str) -> None:
        secret = self.secret or secrets.token_hex(24)
        self.state.put("secret", secret)
        hook = {"project": ls_project, "url": webhook_url, "send_payload": True,
                "send_for_all_actions": False, "headers": {SECRET_HEADER: secret},
                "is_active": True, "actions": WEBHOOK_ACTIONS}
        hooks = [h for h in self.ls.webhooks(ls_project)
                 if h.get("project") == ls_project and h.get("url") == webhook_url]
        if hooks:
            self.ls.update_webhook(int(hooks[0]["id"]), **hook)
        else:
            self.ls.create_webhook(**hook)

    # ------------------------------------------------------------------ events
    def handle(self, payload: dict[str, Any]) -> None:
        """Apply one webhook payload (an event seen before changes nothing)."""
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
                         key=f"labelstudio:{self.ls_project}:annotation:{annotation_id}:{stamp}")
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
        annotator = f"labelstudio:{self.ls_project}:user:{user}"
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
            if tell:  # first, before Label Studio serves the annotator a next task
                self._tell(user, annotation_id, note)
                self._publish_notes()
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
            self._publish_notes()
        return True

    def _tell(self, user: int | None, annotation_id: int, text: str) -> None:
        """Show ``text`` to ``user`` on every open task until they answer again (written by
        :meth:`_publish_notes`, so the next task Label Studio serves them carries it)."""
        if user is None or user == self.bot_user:
            return
        text = f"For {self._user_name(user)}: {text}"
        with self.state.session() as session:
            earlier = session.get(MessageRow, user)
            if earlier is not None and not earlier.published:
                text = f"{earlier.text}\n\n{text}"  # not shown yet: both are
            session.merge(MessageRow(user_id=user, annotation_id=annotation_id, text=text,
                                     published=False))

    def _user_name(self, user: int) -> str:
        if user not in self._users:
            try:
                self._users = {int(u["id"]): str(u.get("email") or u.get("username") or "")
                               for u in self.ls.users()}
            except LabelStudioError:
                logger.warning("could not read Label Studio's users", exc_info=True)
        name = self._users.get(user)
        return f"user {user} ({name})" if name else f"user {user}"

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
            key = (f"labelstudio:{self.ls_project}:annotation:{row.annotation_id}:"
                   f"{row.updated_at}:{reason}")
            if self._assert(row.annotation_id, task.a, task.b, row.label, row.user_id, key,
                            tell=False):  # refused again: its annotator knows already
                self._write_note(task.task_id, "sporal accepted this answer after a retraction.")

    # ------------------------------------------------------------------ notes
    def _who(self, ref: LabelRef) -> str:
        with self.state.session() as session:
            rows = list(session.scalars(select(AnnotationRow).where(
                AnnotationRow.sporal_label_id == ref.id, AnnotationRow.status == "asserted")))
        names = ", ".join(f"annotation #{r.annotation_id} (task #{r.task_id}, user {r.user_id})"
                          for r in rows)
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

    def _open_note(self, reason: str, messages: list[MessageRow]) -> str:
        """An open task's note: why it is asked (if not as a new question), then the notes
        waiting for annotators."""
        parts = [REASON_NOTES[reason]] if reason in REASON_NOTES else []
        return "\n\n".join([*parts, *(m.text for m in messages)])

    # ------------------------------------------------------------------ the window
    def refresh(self) -> Refreshed:
        """Retire the open tasks sporal has decided, refill the window with its best questions
        and keep Label Studio's order sporal's (see :mod:`sporal_labelstudio.window`)."""
        started = time.monotonic()
        questions = self.sporal.next(self.project, k=self.window, annotator=self.annotator,
                                     strategy=self.strategy)
        if questions.reserved_until is not None:
            now = datetime.now(questions.reserved_until.tzinfo)
            self.lease_seconds = (questions.reserved_until - now).total_seconds()
        asked = [Asked((q.a, q.b), q.reason) for q in questions.queries]
        listed = {q.pair for q in asked}
        rows = self.state.tasks("open")
        held = [Held(t.task_id, (t.a, t.b), t.score, t.reason) for t in rows]
        decided = {(t.a, t.b) for t in rows if t.reason == "new" and (t.a, t.b) not in listed
                   and self.sporal.pair_status(self.project, t.a, t.b).decided}
        plan = plan_window(held, asked, decided, self.window)
        self._retire(plan.retire)
        self._rescore(plan.rescore)
        self._create(plan.create)
        notes = self._publish_notes()
        self._describe(questions.undecided)
        done = Refreshed(retired=len(plan.retire), created=len(plan.create),
                         rescored=len(plan.rescore), notes=notes,
                         seconds=time.monotonic() - started)
        if done.touched or done.rescored or done.notes:
            logger.info("refresh: %d retired, %d created, %d rescored, %d notes in %.0f ms",
                        done.retired, done.created, done.rescored, done.notes,
                        done.seconds * 1000)
        return done

    def _retire(self, task_ids: list[int]) -> None:
        """Take decided tasks out of Label Studio in one call: only those nobody has
        annotated (an annotation that raced the call keeps its task, which the event that
        brings it marks answered)."""
        if not task_ids:
            return
        self.ls.delete_unanswered_tasks(self.ls_project, task_ids)
        with self.state.session() as session:
            for task_id in task_ids:
                row = session.get(TaskRow, task_id)
                if row is not None and row.status == "open":
                    row.status = "deleted"

    def _rescore(self, scores: dict[int, float]) -> None:
        if not scores:
            return
        self.ls.set_scores(self.ls_project, scores, MODEL_VERSION)
        with self.state.session() as session:
            for task_id, score in scores.items():
                row = session.get(TaskRow, task_id)
                if row is not None:
                    row.score = score

    def _create(self, create: list[tuple[Asked, float]]) -> None:
        """The new tasks with their scores, in one import."""
        if not create:
            return
        messages = self.state.messages()
        notes = [self._open_note(q.reason, messages) for q, _ in create]
        tasks = [{"data": self._task_data(q.pair[0], q.pair[1], note),
                  "predictions": [{"result": [], "score": score,
                                   "model_version": MODEL_VERSION}]}
                 for (q, score), note in zip(create, notes, strict=True)]
        ids = self.ls.import_tasks(self.ls_project, tasks)
        if len(ids) != len(create):  # the reconcile adopts them from the export
            logger.warning("Label Studio created %d tasks of %d", len(ids), len(create))
            return
        with self.state.session() as session:
            for task_id, (question, score), note in zip(ids, create, notes, strict=True):
                session.add(TaskRow(task_id=task_id, a=question.pair[0], b=question.pair[1],
                                    status="open", score=score, reason=question.reason,
                                    note=note))
        if self.state.get("model_version_pending"):  # now that predictions of it exist
            self.ls.update_project(self.ls_project, model_version=MODEL_VERSION)
            self.state.put("model_version_pending", "")

    def _publish_notes(self) -> int:
        """Write the notes waiting for annotators into every open task; how many changed."""
        messages = self.state.messages()
        written = 0
        # Lowest score first: the tasks Label Studio serves next get the notes first.
        for task in sorted(self.state.tasks("open"),
                           key=lambda t: (t.score is None, t.score or 0.0, t.task_id)):
            note = self._open_note(task.reason, messages)
            if note != task.note:
                self._write_note(task.task_id, note)
                written += 1
        fresh = [m.user_id for m in messages if not m.published]
        if fresh:
            with self.state.session() as session:
                for user in fresh:
                    row = session.get(MessageRow, user)
                    if row is not None:
                        row.published = True
        return written

    def _describe(self, undecided: int, stopped: bool = False) -> None:
        """The project's description: its identity, sporal's progress, the adapter's health
        (written when the progress changes, at most every few seconds, and at least every
        minute while it runs)."""
        pool = int(self.info.get("counts", {}).get("pool_pairs") or 0)
        answers = len(self.state.annotations("asserted"))
        progress = (f"sporal's progress: {pool - undecided} of {pool} pool pairs decided, "
                    f"{undecided} to go; {answers} answers from this project hold in sporal.")
        since = time.monotonic() - self._described[1]
        if not stopped and since < (DESCRIBE_EVERY if progress == self._described[0]
                                    else DESCRIBE_AFTER):
            return  # the next refresh writes it (the timer refreshes well within a minute)
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        health = (f"Adapter stopped at {now}: answers wait in Label Studio until it runs "
                  "again." if stopped else f"Adapter: last sync {now}.")
        lines = [self.identity(), progress, health]
        if self.config_kept:
            lines.append(self.config_kept)
        self.ls.update_project(self.ls_project, description="\n".join(lines))
        self._described = (progress, time.monotonic())

    def stopped(self) -> None:
        """Say in the project's description that the adapter stopped (a clean stop)."""
        counts = self.sporal.project(self.project).get("counts", {})
        self._describe(int(counts.get("undecided_pool_pairs") or 0), stopped=True)

    # ------------------------------------------------------------------ reconcile
    def _adopt(self, task: dict[str, Any]) -> TaskRow | None:
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
                      note=(task.get("data") or {}).get("sporal_note") or "")
        with self.state.session() as session:
            session.add(row)
        logger.info("adopted task %s (%s, %s)", row.task_id, row.a, row.b)
        return row

    def reconcile(self) -> None:
        """Compare Label Studio's export with the state; apply what the webhooks missed.

        Answers keep arriving while the export is read, so only what the state knew before
        the export can count as deleted, and an older version of an annotation changes nothing.
        """
        self._info = None  # the question wording, the policy and the pool may have changed
        known = {t.task_id: t for t in self.state.tasks()}
        recorded = {r.annotation_id for r in self.state.annotations() if r.status != "deleted"}
        exported = self.ls.export(self.ls_project)
        present: set[int] = set()
        for task in exported:
            task_id = int(task["id"])
            if task_id not in known:
                adopted = self._adopt(task)
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
        gone = sorted(recorded - present)
        if gone:
            self.deleted(gone)
        self._track_tasks(exported)
        self.withdraw_bot_tasks(exported)
        self._repair_labels()
        self.refresh()

    def _track_tasks(self, exported: list[dict[str, Any]]) -> None:
        """Open tasks deleted in Label Studio leave the window; a task taken for deleted that
        is still there (annotated while it was being retired) is answered."""
        there = {int(t["id"]): bool(t.get("annotations")) for t in exported}
        with self.state.session() as session:
            for row in session.scalars(select(TaskRow).where(
                    TaskRow.status.in_(("open", "deleted")))):
                if row.task_id not in there:
                    row.status = "deleted"
                elif row.status == "deleted":
                    row.status = "answered" if there[row.task_id] else "open"

    def withdraw_bot_tasks(self, exported: list[dict[str, Any]]) -> None:
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
            self.ls.delete_tasks(self.ls_project, only_bot)
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
                             key=f"labelstudio:{self.ls_project}:annotation:"
                                 f"{row.annotation_id}:{row.updated_at}:repair-"
                                 f"{row.sporal_label_id}")
