"""The adapter: Label Studio's annotations become sporal's labels, sporal's questions its tasks.

Label Studio is driven through its REST API and webhooks (not its ML-backend protocol, which
caches predictions per model version and cannot create tasks). One worker applies every change,
in order, so that the state file (:mod:`sporal_labelstudio.state`) never sees two writers:

- an annotation created or updated → ``POST labels`` with an ``Idempotency-Key`` made of the
  annotation's identity and ``updated_at`` (an event seen twice changes nothing); its previous
  label, if the answer changed, is retracted first;
- a 409 contradiction → the annotation is kept, the problem stored, and the proof written into
  the task, naming the Label Studio annotations behind the asserted labels;
- a deleted annotation → ``DELETE labels/{id}`` (unless another annotation asserts the same
  label), then every stored conflict is tried again;
- the window: the ``W`` best questions of ``next?annotator=labelstudio:<project>&k=W`` are open
  tasks, ranked by a prediction score (Label Studio's "Uncertainty sampling" serves the lowest
  first); open tasks that sporal has decided are retired with an annotation of a bot user whose
  note shows the proof (tasks are never deleted: an annotator holding one would lose the work),
  and tasks that left the window are set aside the same way; a retired task whose pair is asked
  again is reopened by deleting the bot's annotation;
- the reconcile: Label Studio sends each webhook once, with a 1 s timeout and no retry, and none
  for imported annotations, so the export is compared with the state at start and periodically.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from datetime import datetime
from typing import Any

from sqlalchemy import select

from sporal_labelstudio.ls_client import LabelStudioClient
from sporal_labelstudio.sporal_client import (
    Contradiction,
    LabelRef,
    PairStatus,
    SporalClient,
)
from sporal_labelstudio.state import AnnotationRow, State, TaskRow

__all__ = ["Adapter", "LABEL_CONFIG", "MODEL_VERSION", "WEBHOOK_ACTIONS", "parse_label"]

logger = logging.getLogger("sporal.labelstudio")

MODEL_VERSION = "sporal"
BOT_EMAIL = "sporal-bot@example.com"
SECRET_HEADER = "X-Sporal-Secret"
WEBHOOK_ACTIONS = ["ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED",
                   "ANNOTATIONS_DELETED"]
FROM_NAME = "prerequisite"
NOTE_NAME = "sporal_note"

# The alias makes Label Studio write sporal's own label words into value.choices.
LABEL_CONFIG = """<View>
  <Header value="Is A a prerequisite of B?"/>
  <Text name="question" value="$question"/>
  <Text name="a_description" value="$a_description"/>
  <Text name="b_description" value="$b_description"/>
  <Choices name="prerequisite" toName="question" choice="single" required="true" showInline="true">
    <Choice value="Yes: A is a prerequisite of B" alias="positive" hotkey="y"/>
    <Choice value="No" alias="negative" hotkey="n"/>
  </Choices>
  <Header value="sporal" size="6"/>
  <Text name="note" value="$sporal_note"/>
  <TextArea name="sporal_note" toName="question" editable="false" perRegion="false"/>
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

    def setup(self, webhook_url: str, title: str | None = None) -> int:
        """Create or adopt the Label Studio project, the bot user and the webhook.

        Running it again changes nothing but what drifted (config, sampling, webhook).
        Returns the Label Studio project id.
        """
        info = self.sporal.project(self.project)
        title = title or f"sporal #{self.project}: {info['name']}"[:50]
        # The description says which sporal project a Label Studio project belongs to, so
        # that setup adopts it (after a lost state file) and never another server's.
        description = f"Questions chosen by sporal project {self.project} at {self.sporal.url}."
        fields = {"label_config": LABEL_CONFIG, "sampling": "Uncertainty sampling",
                  "model_version": MODEL_VERSION, "maximum_annotations": 1,
                  "show_skip_button": True, "description": description}
        known = self.state.get("ls_project")
        found = [p for p in self.ls.projects()
                 if (known and p["id"] == int(known))
                 or (not known and p.get("description") == description)]
        if found:
            ls_project = int(found[0]["id"])
            self.ls.update_project(ls_project, **fields)
        else:
            ls_project = int(self.ls.create_project(title=title, **fields)["id"])
            # "sampling" and "model_version" are honoured only by an update in some versions
            self.ls.update_project(ls_project, sampling=fields["sampling"],
                                   model_version=MODEL_VERSION)
        self.state.put("ls_project", str(ls_project))

        bots = [u for u in self.ls.users() if u.get("email") == BOT_EMAIL]
        bot = bots[0] if bots else self.ls.create_user(
            email=BOT_EMAIL, username="sporal-bot", first_name="sporal", last_name="bot")
        self.state.put("bot_user", str(bot["id"]))

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
        return ls_project

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
            if task.status == "open":
                task.status = "answered"
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
                if bot_task is not None:  # someone deleted the bot's retirement
                    bot_task.bot_annotation_id, bot_task.status = None, "open"
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
                key: str) -> bool:
        annotator = f"labelstudio:{self.ls_project}:user:{user}"
        try:
            created = self.sporal.post_label(self.project, a, b, label,  # type: ignore[arg-type]
                                             annotator=annotator, idempotency_key=key)
        except Contradiction as error:
            note = self._conflict_note(annotation_id, a, b, label, error)
            with self.state.session() as session:
                row = session.get(AnnotationRow, annotation_id)
                if row is not None:
                    row.status, row.problem = "conflict", json.dumps(error.problem)
                task_id = row.task_id if row is not None else None
            if task_id is not None:
                self._write_note(task_id, note)
            logger.info("annotation %s refused: %s", annotation_id, note)
            return False
        with self.state.session() as session:
            row = session.get(AnnotationRow, annotation_id)
            if row is not None:
                row.status, row.sporal_label_id, row.problem = "asserted", created.id, None
        return True

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
            if self._assert(row.annotation_id, task.a, task.b, row.label, row.user_id, key):
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

    def _decided_note(self, status: PairStatus) -> str:
        head = (f"sporal decided this pair: {status.status} ({status.source}), so it is no "
                "longer asked. Proof:")
        return "\n".join([head, *self._proof_lines(status.proof, status.chains)])

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
        return {"question": f"Is “{a}” a prerequisite of “{b}”?",
                "a_description": f"A = {a}: {describe.get(a) or '(no description)'}",
                "b_description": f"B = {b}: {describe.get(b) or '(no description)'}",
                "sporal_note": note, "sporal_pair": {"project": self.project, "a": a, "b": b}}

    # ------------------------------------------------------------------ the window
    def refresh(self) -> None:
        """Retire decided tasks, then make the ``W`` best questions the open tasks."""
        questions = self.sporal.next(self.project, k=self.window, annotator=self.annotator,
                                     strategy=self.strategy)
        if questions.reserved_until is not None:
            now = datetime.now(questions.reserved_until.tzinfo)
            self.lease_seconds = (questions.reserved_until - now).total_seconds()
        wanted = {(q.a, q.b): rank / max(self.window, 1)
                  for rank, q in enumerate(questions.queries)}
        for task in self.state.tasks("open"):
            status = self.sporal.pair_status(self.project, task.a, task.b)
            if status.decided:
                self._retire(task, self._decided_note(status), status.status)
            elif (task.a, task.b) not in wanted:
                self._retire(task, "Set aside: sporal now asks other questions first; it "
                             "reopens this task when the pair is asked again.", None)
        by_pair = {(t.a, t.b): t for t in self.state.tasks()}
        for (a, b), score in wanted.items():
            known = by_pair.get((a, b))
            if known is None:
                self._open(a, b, score)
                continue
            task = known
            if task.status == "answered" and not self._has_label(task.task_id):
                self._open(a, b, score)  # skipped or refused there: ask it in a new task
                continue
            if task.status == "retired":
                self._reopen(task)
            if task.status != "answered" and task.score != score and task.prediction_id:
                self.ls.update_prediction(task.prediction_id, score)
                with self.state.session() as session:
                    row = session.get(TaskRow, task.task_id)
                    if row is not None:
                        row.score = score

    def _has_label(self, task_id: int) -> bool:
        with self.state.session() as session:
            return session.scalars(select(AnnotationRow).where(
                AnnotationRow.task_id == task_id,
                AnnotationRow.status == "asserted")).first() is not None

    def _open(self, a: str, b: str, score: float) -> None:
        created = self.ls.create_task(self.ls_project, self._task_data(a, b))
        task_id = int(created["id"])
        with self.state.session() as session:
            session.add(TaskRow(task_id=task_id, a=a, b=b, status="open", note=""))
        prediction = self.ls.create_prediction(task_id, score, MODEL_VERSION)
        with self.state.session() as session:
            row = session.get(TaskRow, task_id)
            if row is not None:
                row.prediction_id, row.score = int(prediction["id"]), score

    def _retire(self, task: TaskRow, note: str, label: str | None) -> None:
        with self.state.session() as session:
            current = session.get(TaskRow, task.task_id)
            if current is None or current.status != "open":
                return  # answered meanwhile: the event worker has it
        result: list[dict[str, Any]] = [{
            "from_name": NOTE_NAME, "to_name": "question", "type": "textarea",
            "value": {"text": [note]}}]
        if label is not None:
            result.insert(0, {"from_name": FROM_NAME, "to_name": "question", "type": "choices",
                              "value": {"choices": [label]}})
        annotation = self.ls.create_annotation(task.task_id, result, completed_by=self.bot_user)
        with self.state.session() as session:
            row = session.get(TaskRow, task.task_id)
            if row is not None:
                row.status, row.bot_annotation_id = "retired", int(annotation["id"])
        self._write_note(task.task_id, note)

    def _reopen(self, task: TaskRow) -> None:
        if task.bot_annotation_id is not None:
            self.ls.delete_annotation(task.bot_annotation_id)
        with self.state.session() as session:
            row = session.get(TaskRow, task.task_id)
            if row is not None:
                row.status, row.bot_annotation_id = "open", None
        self._write_note(task.task_id, "")
        task.status = "open"

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
        self._repair_labels()
        self.refresh()

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
