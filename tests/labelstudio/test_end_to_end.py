"""The whole loop against a real Label Studio: two annotators decide a generated order's pool.

Needs a running Label Studio (``.ci/run`` starts one on loopback): its URL in
``SPORAL_TEST_LABEL_STUDIO_URL`` and an admin's legacy token in
``SPORAL_TEST_LABEL_STUDIO_TOKEN``. sporal and the adapter (``sporal labelstudio run``) run as
real processes; the annotators sign up on Label Studio's web form and answer through its REST
API. On the way: after each of the first answers the window changes only by the tasks sporal
decided and those that refill it; the adapter is SIGKILLed and restarted (the webhooks sent
meanwhile are lost and the reconcile recovers them); a webhook is lost on purpose while it runs;
a contradiction shows its proof in the task and, on the next task Label Studio serves, to the
annotator who gave it; deleting an annotation retracts its label, after which no bot annotation
and no accepted answer in Label Studio's export contradicts sporal. At the end sporal's closure
is the closure of the annotations that survive. The delay from an annotation's POST returning to
the label being in sporal, and the tasks touched per answer, are written to
``SPORAL_LABELSTUDIO_REPORT`` (default: the test's folder). A second test has ``setup`` adopt a
project made by an earlier version of the adapter (bot annotations, an editable note box).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from benchmarks.serving import Server, free_port, serve_command
from reasoning.closure import Closure
from sporal_labelstudio.adapter import BOT_EMAIL, LABEL_CONFIG, WEBHOOK_ACTIONS, Adapter
from sporal_labelstudio.ls_client import LabelStudioClient
from sporal_labelstudio.sporal_client import SporalClient
from sporal_labelstudio.state import State
from tests.labelstudio.harness import choice, order_project, signup, truth

pytestmark = pytest.mark.labelstudio

LS_URL = os.environ.get("SPORAL_TEST_LABEL_STUDIO_URL")
LS_TOKEN = os.environ.get("SPORAL_TEST_LABEL_STUDIO_TOKEN", "")
WINDOW = 5


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30.0,
             every: float = 0.005) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


class AdapterProcess:
    """``sporal labelstudio run`` as its own process group, killable like a crash."""

    def __init__(self, args: list[str], listen: str, log: Path) -> None:
        self.args, self.listen, self.log = args, listen, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [*serve_command(), "labelstudio", "run", *self.args], stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self._ready, "the adapter's webhook endpoint", timeout=60, every=0.1)

    def _ready(self) -> bool:
        assert self.process is not None and self.process.poll() is None, self.tail()
        try:
            return httpx.get(f"http://{self.listen}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    if not LS_URL:
        pytest.skip("set SPORAL_TEST_LABEL_STUDIO_URL and _TOKEN (a running Label Studio)")
    with Server(f"sqlite:///{tmp_path}/sporal.db", tmp_path) as server:
        with httpx.Client(base_url=server.base_url, timeout=60) as sporal:
            pid, order = order_project(sporal, n=25, pool=60, seed=7)
            listen = f"127.0.0.1:{free_port()}"
            state = tmp_path / "adapter.db"
            args = ["--project", str(pid), "--sporal-url", server.base_url, "--ls-url",
                    str(LS_URL), "--ls-token", LS_TOKEN, "--window", str(WINDOW), "--listen",
                    listen, "--state", str(state), "--reconcile-every", "5"]
            adapter = AdapterProcess(args, listen, tmp_path / "adapter.log")
            adapter.start()
            try:
                yield {"sporal": sporal, "pid": pid, "order": order, "adapter": adapter,
                       "state": State(state), "tmp": tmp_path}
            finally:
                adapter.kill()
                report = os.environ.get("SPORAL_LABELSTUDIO_REPORT")
                if report:  # CI prints the adapter's log when the step fails
                    shutil.copy(adapter.log, Path(report).with_name("adapter.log"))


def test_two_annotators_decide_the_pool_through_label_studio(world: dict[str, Any]) -> None:
    sporal: httpx.Client = world["sporal"]
    pid, order, adapter, state = world["pid"], world["order"], world["adapter"], world["state"]
    admin = LabelStudioClient(str(LS_URL), LS_TOKEN)
    lsp = int(state.get("ls_project") or 0)
    bot = int(state.get("bot_user") or 0)
    run = uuid.uuid4().hex[:8]
    annotators = [httpx.Client(base_url=str(LS_URL), timeout=60, headers={
        "Authorization": "Token " + signup(str(LS_URL), f"ann{i}-{run}@example.com",
                                            f"pw-{run}-{i}-long")}) for i in (1, 2)]
    delays: list[float] = []

    def status(a: str, b: str) -> dict[str, Any]:
        return sporal.get(f"/projects/{pid}/pairs/status", params={"a": a, "b": b}).json()

    def in_sporal(a: str, b: str, label: str) -> bool:
        found = status(a, b)
        return found["status"] == label and found["source"] == "asserted"

    def undecided() -> int:
        return int(sporal.get(f"/projects/{pid}").json()["counts"]["undecided_pool_pairs"])

    def answer(who: httpx.Client, measure: bool = True) -> dict[str, Any] | None:
        task = who.get(f"/api/projects/{lsp}/next")
        if task.status_code != 200 or "id" not in task.json():
            return None
        body = task.json()
        a, b = body["data"]["sporal_pair"]["a"], body["data"]["sporal_pair"]["b"]
        label = truth(order, a, b)
        posted = who.post(f"/api/tasks/{body['id']}/annotations", json={"result": choice(label)})
        if posted.status_code == 404:
            return None  # decided meanwhile: the adapter took it out of the window
        posted.raise_for_status()
        returned = time.monotonic()
        if measure:
            wait_for(lambda: in_sporal(a, b, label), f"({a}, {b}) in sporal")
            delays.append(time.monotonic() - returned)
        return {"id": posted.json()["id"], "task": body["id"], "a": a, "b": b, "label": label}

    def answer_some(count: int, measure: bool = True) -> list[dict[str, Any]]:
        done: list[dict[str, Any]] = []
        deadline = time.monotonic() + 120
        asked = 0
        while len(done) < count and undecided() and time.monotonic() < deadline:
            # Both annotators take turns, also when one got nothing: Label Studio locks a task
            # to the annotator it served it to, so the other may have no task to get.
            got = answer(annotators[asked % 2], measure)
            asked += 1
            if got is None:
                time.sleep(0.2)  # the window refills after each event
            else:
                done.append(got)
        return done

    def open_in_ls() -> dict[int, tuple[str, str]]:
        return {int(t["id"]): (t["data"]["sporal_pair"]["a"], t["data"]["sporal_pair"]["b"])
                for t in admin.export(lsp) if not t.get("annotations")}

    def settled() -> bool:
        """The adapter has refilled its window (there are far more undecided pairs than W)."""
        return len(state.tasks("open")) == WINDOW

    def refilled(answered: int) -> Callable[[], bool]:
        return lambda: settled() and answered not in {t.task_id for t in state.tasks("open")}

    # 1. both annotators answer; after each answer the window changes only by the tasks sporal
    #    decided (taken out) and those that refill it: no undecided open task is set aside
    touched: list[int] = []
    wait_for(settled, "the first window", 60, 0.05)
    while len(touched) < 6:
        before = open_in_ls()
        got = answer(annotators[len(touched) % 2])
        if got is None:
            time.sleep(0.2)
            continue
        wait_for(refilled(got["task"]), "the refilled window", 30, 0.05)
        after = open_in_ls()
        removed = set(before) - set(after) - {got["task"]}
        created = set(after) - set(before)
        for task_id in removed:
            assert status(*before[task_id])["status"] != "undecided", (task_id, before)
        for task_id, pair in before.items():
            if task_id != got["task"] and status(*pair)["status"] == "undecided":
                assert task_id in after, (task_id, pair)  # still open, the same task
        assert len(created) == len(removed) + 1 and len(after) == WINDOW
        touched.append(len(removed) + len(created))

    # 2. the adapter dies; answers given meanwhile lose their webhooks; a restart reconciles.
    # It dies once its window holds two open tasks (else nobody could answer while it is down).
    def open_tasks() -> int:
        return sum(1 for task in admin.export(lsp) if not task.get("annotations"))

    wait_for(lambda: open_tasks() >= 2, "two open tasks in the window", every=0.2)
    adapter.kill()
    offline = answer_some(2, measure=False)
    assert offline and not any(in_sporal(x["a"], x["b"], x["label"]) for x in offline)
    adapter.start()
    for x in offline:
        wait_for(lambda x=x: in_sporal(x["a"], x["b"], x["label"]),  # type: ignore[misc]
                 "the reconcile", 60)

    # 3. a webhook lost on purpose while the adapter runs: the periodic reconcile recovers it
    hook = next(h for h in admin.webhooks(lsp) if h["url"].endswith(f"{adapter.listen}/webhook"))
    # (a PATCH without "actions" empties them in Label Studio 1.23: always send them)
    admin.update_webhook(hook["id"], is_active=False, actions=WEBHOOK_ACTIONS)
    lost = answer_some(1, measure=False)
    admin.update_webhook(hook["id"], is_active=True, actions=WEBHOOK_ACTIONS)
    assert next(h for h in admin.webhooks(lsp) if h["id"] == hook["id"])["actions"]
    for x in lost:
        wait_for(lambda x=x: in_sporal(x["a"], x["b"], x["label"]),  # type: ignore[misc]
                 "the periodic reconcile", 60)

    # 4. a contradiction: the opposite answer on a task whose pair sporal has decided (by
    #    inference when there is one, so that the proof has several labels)
    def decided_task() -> Any:
        fallback = None
        for task in state.tasks("answered"):
            found = status(task.a, task.b)
            if found["proof"] and found["source"] == "inferred":
                return task, found
            fallback = fallback or (found["proof"] and (task, found))
        if fallback:
            return fallback
        answer_some(1)
        return None

    task, found = wait_for(decided_task, "a decided pair", 120, 0.1)
    wrong = "negative" if found["status"] == "positive" else "positive"
    refused = annotators[1].post(f"/api/tasks/{task.task_id}/annotations",
                                 json={"result": choice(wrong)})
    refused.raise_for_status()
    refused_id = refused.json()["id"]

    def refusal_everywhere() -> bool:
        tasks = [t for t in admin.export(lsp) if not t.get("annotations")]
        return bool(tasks) and all(f"refused annotation #{refused_id}" in t["data"]["sporal_note"]
                                   for t in tasks)

    # the next task Label Studio serves its annotator, asked for as the editor does: at once
    first = annotators[1].get(f"/api/projects/{lsp}/next").json()
    at_once = f"refused annotation #{refused_id}" in first["data"]["sporal_note"]
    note = wait_for(lambda: (n := admin.task(task.task_id)["data"].get("sporal_note", ""))
                    and f"refused annotation #{refused_id}" in n and n, "the proof in the task")
    behind = [int(x) for x in re.findall(r"annotation #(\d+) \(task", note)]
    assert behind, note  # the proof names the Label Studio annotations behind it
    assert status(task.a, task.b)["status"] == found["status"]  # the refused answer is kept out

    # ... shows the refusal with its proof (when the machine was too slow to write it before
    # Label Studio answered the POST, it does once written: Label Studio serves the annotator
    # the same task, which it locked for them, with its data as it is now)
    wait_for(refusal_everywhere, "the refusal on the open tasks", 30, 0.1)
    served = annotators[1].get(f"/api/projects/{lsp}/next").json()
    assert served["id"] == first["id"]
    assert not served["predictions"]  # sporal's rank is not shown to annotators
    shown = served["data"]["sporal_note"]
    assert f"refused annotation #{refused_id}" in shown and "annotation #" in shown.split(
        "contradicts", 1)[1], shown  # the refusal and the annotations of its proof
    pair = served["data"]["sporal_pair"]
    annotators[1].post(f"/api/tasks/{served['id']}/annotations", json={
        "result": choice(truth(order, pair["a"], pair["b"]))}).raise_for_status()

    # 5. deleting an annotation retracts its label (then the wrong answer goes too)
    row = next(r for r in state.annotations() if r.annotation_id == behind[0])
    admin.delete_annotation(behind[0])
    live_ids = lambda: {x["id"] for x in sporal.get(f"/projects/{pid}/labels",  # noqa: E731
                                                    params={"limit": 10000}).json()["items"]
                        if x["source"] == "asserted"}
    wait_for(lambda: row.sporal_label_id not in live_ids(), "the retraction", 30, 0.05)
    admin.delete_annotation(refused_id)
    wait_for(lambda: next(r for r in state.annotations()
                          if r.annotation_id == refused_id).status == "deleted",
             "the wrong answer's deletion", 30, 0.05)

    # after the retractions, Label Studio's export agrees with sporal: no bot annotation says
    # otherwise, and every answer the adapter holds as accepted is sporal's label
    accepted = {r.annotation_id for r in state.annotations("asserted")}
    for exported in admin.export(lsp):
        pair = exported["data"]["sporal_pair"]
        for annotation in exported["annotations"]:
            if _by(annotation) == bot or annotation["id"] in accepted:
                said = annotation["result"][0]["value"]["choices"][0]
                assert status(pair["a"], pair["b"])["status"] == said, (exported, annotation)

    # 6. go on until sporal has decided the whole pool
    deadline = time.monotonic() + 900
    asked = 0
    while undecided() and time.monotonic() < deadline:
        asked += 1
        if answer(annotators[asked % 2]) is None:  # turns, as in answer_some
            time.sleep(0.2)
    assert undecided() == 0, adapter.tail()

    # 7. sporal's closure is the closure of the surviving annotations
    closure = Closure(f"concept {i:02d}" for i in range(order.n))
    for exported in sorted(admin.export(lsp), key=lambda t: t["id"]):
        pair = exported["data"]["sporal_pair"]
        for annotation in sorted(exported["annotations"], key=lambda x: x["id"]):
            completed_by = annotation["completed_by"]
            if isinstance(completed_by, dict):
                completed_by = completed_by["id"]
            if completed_by == bot or annotation["was_cancelled"]:
                continue
            label = annotation["result"][0]["value"]["choices"][0]
            closure.add_label(pair["a"], pair["b"], label == "positive")
    expected = {(a, b, "positive" if positive else "negative")
                for a, b, positive, _ in closure.decided()}
    wait_for(lambda: {(x["a"], x["b"], x["label"]) for x in sporal.get(
        f"/projects/{pid}/labels", params={"source": "all", "limit": 10000}).json()["items"]}
        == expected, "sporal's closure to equal the annotations'", 60, 0.2)

    figures = {"answers_measured": len(delays),
               "delay_p50_ms": round(float(np.percentile(delays, 50)) * 1000, 1),
               "delay_p99_ms": round(float(np.percentile(delays, 99)) * 1000, 1),
               "delay_max_ms": round(max(delays) * 1000, 1),
               "tasks_touched_per_answer": touched,
               "refusal_on_the_next_task_served_at_once": at_once,
               **refresh_figures(adapter.log),
               "bot_annotations": sum(1 for t in admin.export(lsp) for x in t["annotations"]
                                      if _by(x) == bot)}
    report = Path(os.environ.get("SPORAL_LABELSTUDIO_REPORT", world["tmp"] / "figures.json"))
    report.write_text(json.dumps(figures, indent=1))
    print(figures)


# The labeling config of the adapter's earlier version: an editable text area that the bot's
# retirements wrote their note into.
EARLIER_CONFIG = """<View>
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


def test_setup_adopts_a_project_of_the_earlier_version_and_withdraws_its_bot(
        tmp_path: Path) -> None:
    if not LS_URL:
        pytest.skip("set SPORAL_TEST_LABEL_STUDIO_URL and _TOKEN (a running Label Studio)")
    admin = LabelStudioClient(str(LS_URL), LS_TOKEN)
    with Server(f"sqlite:///{tmp_path}/sporal.db", tmp_path) as server, \
            SporalClient(server.base_url) as sporal:
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            pid, order = order_project(client, n=12, pool=20, seed=5)
        identity = f"Questions chosen by sporal project {pid} at {sporal.url}."
        lsp = int(admin.create_project(title=f"earlier {pid}", label_config=EARLIER_CONFIG,
                                       description=identity, maximum_annotations=1)["id"])
        bots = [u for u in admin.users() if u.get("email") == BOT_EMAIL]
        bot = bots[0] if bots else admin.create_user(email=BOT_EMAIL, username="sporal-bot")
        pairs = [(f"concept {a:02d}", f"concept {b:02d}") for a, b in order.pool[:3].tolist()]
        ids = admin.import_tasks(lsp, [{"data": {
            "question": "?", "a_description": "", "b_description": "", "sporal_note": "",
            "sporal_pair": {"project": pid, "a": a, "b": b}}} for a, b in pairs])
        # the earlier bot retired the first task; a person answered the second
        admin.create_annotation(ids[0], [*choice("positive"), {
            "from_name": "sporal_note", "to_name": "question", "type": "textarea",
            "value": {"text": ["sporal decided this pair"]}}], completed_by=int(bot["id"]))
        human = admin.create_annotation(ids[1], choice(truth(order, *pairs[1])))

        adapter = Adapter(sporal, admin, State(tmp_path / "adapter.db"), project=pid, window=3)
        assert adapter.setup(f"http://127.0.0.1:{free_port()}/webhook") == lsp  # adopted
        assert adapter.config_kept is None
        config = admin.project(lsp)["label_config"]
        assert "TextArea" not in config and config == LABEL_CONFIG
        adapter.reconcile()
        exported = {int(t["id"]): t for t in admin.export(lsp)}
        assert ids[0] not in exported  # only the bot had annotated it
        assert [a["id"] for a in exported[ids[1]]["annotations"]] == [human["id"]]
        assert all(_by(a) != int(bot["id"]) for t in exported.values()
                   for a in t["annotations"])
        found = sporal.pair_status(pid, *pairs[1])
        assert found.status == truth(order, *pairs[1]) and found.source == "asserted"
        open_tasks = [t for t in exported.values() if not t["annotations"]]
        assert len(open_tasks) == 3  # the window, refilled
        description = admin.project(lsp)["description"]
        assert description.startswith(identity) and "last sync" in description


def refresh_figures(log: Path) -> dict[str, Any]:
    """What the adapter's refreshes did over the run, from its log."""
    found = [tuple(map(int, m)) for m in re.findall(
        r"refresh: (\d+) retired, (\d+) created, (\d+) rescored, \d+ notes in (\d+) ms",
        log.read_text(errors="replace"))]
    if not found:
        return {}
    retired, created, rescored, ms = (list(column) for column in zip(*found, strict=True))
    return {"refreshes_that_changed_something": len(found), "retired": sum(retired),
            "created": sum(created), "rescored": sum(rescored),
            "refresh_ms_p50": float(np.percentile(ms, 50)), "refresh_ms_max": max(ms)}


def _by(annotation: dict[str, Any]) -> int:
    by = annotation["completed_by"]
    return int(by["id"] if isinstance(by, dict) else by)
