"""The whole loop against a real Label Studio: two people, each in their own project.

Needs a running Label Studio (``.ci/run`` starts one on loopback): its URL in
``SPORAL_TEST_LABEL_STUDIO_URL`` and an admin's legacy token in
``SPORAL_TEST_LABEL_STUDIO_TOKEN``. sporal and the adapter (``sporal labelstudio run --person
… --person …``) run as real processes; the two people sign up on Label Studio's web form and
answer through its REST API, each asking Label Studio for the next task of their own project as
its editor does. After every answer: nobody was served a pair they answered before, no new
question is open in both projects at once, and every label in sporal bears a person's name.

The first test (``strict``) goes on: the adapter is SIGKILLed and restarted (the webhooks sent
meanwhile are lost and the reconcile recovers them); a webhook is lost on purpose while it runs;
a contradiction shows its proof in the task and, on their next task, to the person who gave it
and to nobody else; deleting an annotation retracts its label. At the end sporal's closure is
the closure of the annotations that survive. The delay from an annotation's POST returning to
the label being in sporal is written to ``SPORAL_LABELSTUDIO_REPORT`` (default: the test's
folder). The second (``consensus``, one person wrong on a third of the pairs) answers until a
second opinion on one person's answer reached the other, a check question reached one of them
and a contested answer's note reached its owner only; no task says why it is asked. A third
has ``setup`` adopt the team's project of an earlier version (bot annotations, an editable note
box) and take its open tasks out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from benchmarks.labelstudio_team import signup
from benchmarks.serving import Server, free_port, serve_command
from reasoning.closure import Closure
from sporal_labelstudio.adapter import BOT_EMAIL, LABEL_CONFIG, WEBHOOK_ACTIONS, Adapter
from sporal_labelstudio.ls_client import LabelStudioClient
from sporal_labelstudio.sporal_client import SporalClient
from sporal_labelstudio.state import State
from tests.labelstudio.harness import choice, order_project, truth

pytestmark = pytest.mark.labelstudio

LS_URL = os.environ.get("SPORAL_TEST_LABEL_STUDIO_URL")
LS_TOKEN = os.environ.get("SPORAL_TEST_LABEL_STUDIO_TOKEN", "")
WINDOW = 3


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


class Person:
    """A Label Studio user answering in their own project, as its editor does."""

    def __init__(self, email: str, token: str) -> None:
        self.email = email
        self.ls = httpx.Client(base_url=str(LS_URL), timeout=60,
                               headers={"Authorization": f"Token {token}"})
        self.ls_project = 0
        self.served: list[tuple[str, str]] = []  # every pair Label Studio served them
        self.answered: set[tuple[str, str]] = set()

    def next(self) -> dict[str, Any] | None:
        task = self.ls.get(f"/api/projects/{self.ls_project}/next")
        if task.status_code != 200 or "data" not in task.json():
            return None
        body = dict(task.json())
        pair = (body["data"]["sporal_pair"]["a"], body["data"]["sporal_pair"]["b"])
        assert pair not in self.answered, f"{pair} served again to {self.email}, who answered it"
        self.served.append(pair)
        return body

    def answer(self, task: dict[str, Any], label: str) -> dict[str, Any] | None:
        posted = self.ls.post(f"/api/tasks/{task['id']}/annotations",
                              json={"result": choice(label)})
        if posted.status_code in (404, 500) and self.ls.get(
                f"/api/tasks/{task['id']}").status_code == 404:
            return None  # decided meanwhile: the adapter took it out of the window
        posted.raise_for_status()
        pair = task["data"]["sporal_pair"]
        self.answered.add((pair["a"], pair["b"]))
        return {"id": posted.json()["id"], "task": task["id"], "a": pair["a"], "b": pair["b"],
                "label": label}


@pytest.fixture
def team(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    if not LS_URL:
        pytest.skip("set SPORAL_TEST_LABEL_STUDIO_URL and _TOKEN (a running Label Studio)")
    policy = getattr(request, "param", "strict")
    # Fixed names: sporal's draw of a check question depends on the name (and the project and
    # its label count), so a run asks checks where the last one did.
    people = [Person(email, signup(str(LS_URL), email, f"pw-{i}-sporal-team"))
              for i, email in enumerate(["ann@example.com", "bo@example.com"])]
    # one question in four a check question: a check reaches a person within a few answers
    with Server(f"sqlite:///{tmp_path}/sporal.db", tmp_path,
                env={"SPORAL_CHECK_RATE": "0.25"}) as server:
        with httpx.Client(base_url=server.base_url, timeout=60) as sporal:
            pid, order = (order_project(sporal, n=25, pool=60, seed=7) if policy == "strict"
                          else order_project(sporal, n=20, pool=150, seed=7))
            sporal.patch(f"/projects/{pid}", json={"policy": policy}).raise_for_status()
            listen = f"127.0.0.1:{free_port()}"
            state = tmp_path / "adapter.db"
            args = ["--project", str(pid), "--sporal-url", server.base_url, "--ls-url",
                    str(LS_URL), "--ls-token", LS_TOKEN, "--window", str(WINDOW), "--listen",
                    listen, "--state", str(state), "--reconcile-every", "5",
                    *(x for p in people for x in ("--person", p.email))]
            adapter = AdapterProcess(args, listen, tmp_path / "adapter.log")
            adapter.start()
            projects = {p.user_id: p.ls_project for p in State(state).people()}
            names = {p.name: p.ls_project for p in State(state).people()}
            for person in people:
                person.ls_project = names[person.email]
            assert len(projects) == 2
            try:
                yield {"sporal": sporal, "pid": pid, "order": order, "adapter": adapter,
                       "state": State(state), "tmp": tmp_path, "people": people}
            finally:
                adapter.kill()
                report = os.environ.get("SPORAL_LABELSTUDIO_REPORT")
                if report:  # CI prints the adapter's log when the step fails
                    shutil.copy(adapter.log, Path(report).with_name("adapter.log"))


def open_pairs(admin: LabelStudioClient, person: Person) -> dict[int, tuple[str, str]]:
    return {int(t["id"]): (t["data"]["sporal_pair"]["a"], t["data"]["sporal_pair"]["b"])
            for t in admin.export(person.ls_project) if not t.get("annotations")}


def check_the_team(admin: LabelStudioClient, team: dict[str, Any]) -> None:
    """No new question open for both at once; every label in sporal by a person's name."""
    people, state = team["people"], team["state"]
    reasons = {t.task_id: t.reason for t in state.tasks()}
    first, second = ({pair for task_id, pair in open_pairs(admin, p).items()
                      if reasons.get(task_id, "new") == "new"} for p in people)
    assert not first & second, f"new questions open for both at once: {first & second}"
    names = {x["annotator"] for x in team["sporal"].get(
        f"/projects/{team['pid']}/labels", params={"limit": 10000}).json()["items"]
        if x["source"] == "asserted"}
    assert names <= {p.email for p in people}, names


def test_two_people_decide_the_pool_each_in_their_own_project(team: dict[str, Any]) -> None:
    sporal: httpx.Client = team["sporal"]
    pid, order, adapter, state = team["pid"], team["order"], team["adapter"], team["state"]
    people: list[Person] = team["people"]
    admin = LabelStudioClient(str(LS_URL), LS_TOKEN)
    bot = int(state.get("bot_user") or 0)
    delays: list[float] = []

    def status(a: str, b: str) -> dict[str, Any]:
        return sporal.get(f"/projects/{pid}/pairs/status", params={"a": a, "b": b}).json()

    def in_sporal(a: str, b: str, label: str) -> bool:
        found = status(a, b)
        return found["status"] == label and found["source"] == "asserted"

    def undecided() -> int:
        return int(sporal.get(f"/projects/{pid}").json()["counts"]["undecided_pool_pairs"])

    def answer(who: Person, measure: bool = True) -> dict[str, Any] | None:
        task = who.next()
        if task is None:
            return None
        pair = task["data"]["sporal_pair"]
        got = who.answer(task, truth(order, pair["a"], pair["b"]))
        if got is None:
            return None
        returned = time.monotonic()
        if measure:
            wait_for(lambda: in_sporal(got["a"], got["b"], got["label"]),
                     f"({got['a']}, {got['b']}) in sporal")
            delays.append(time.monotonic() - returned)
            check_the_team(admin, team)
        return got

    def answer_some(count: int, measure: bool = True) -> list[dict[str, Any]]:
        done: list[dict[str, Any]] = []
        deadline = time.monotonic() + 120
        asked = 0
        while len(done) < count and undecided() and time.monotonic() < deadline:
            got = answer(people[asked % 2], measure)
            asked += 1
            if got is None:
                time.sleep(0.2)  # the window refills after each event
            else:
                done.append(got)
        return done

    # 1. both answer in turns, each in their own project (checked after each answer)
    wait_for(lambda: all(open_pairs(admin, p) for p in people), "the first windows", 60, 0.2)
    answer_some(6)
    assert all(len(p.served) >= 3 for p in people)

    # 2. the adapter dies; answers given meanwhile lose their webhooks; a restart reconciles
    adapter.kill()
    offline = answer_some(2, measure=False)
    assert offline and not any(in_sporal(x["a"], x["b"], x["label"]) for x in offline)
    adapter.start()
    for x in offline:
        wait_for(lambda x=x: in_sporal(x["a"], x["b"], x["label"]),  # type: ignore[misc]
                 "the reconcile", 60)

    # 3. a webhook lost on purpose while the adapter runs: the periodic reconcile recovers it
    hook = next(h for h in admin.webhooks(people[0].ls_project)
                if h["url"].endswith(f"{adapter.listen}/webhook"))
    # (a PATCH without "actions" empties them in Label Studio 1.23: always send them)
    admin.update_webhook(hook["id"], is_active=False, actions=WEBHOOK_ACTIONS)
    lost: list[dict[str, Any]] = []
    while not lost:
        lost = [x for x in [answer(people[0], measure=False)] if x]
    admin.update_webhook(hook["id"], is_active=True, actions=WEBHOOK_ACTIONS)
    for x in lost:
        wait_for(lambda x=x: in_sporal(x["a"], x["b"], x["label"]),  # type: ignore[misc]
                 "the periodic reconcile", 60)

    # 4. a contradiction: bo answers again, the other way, a pair he answered
    mine = [t for t in state.tasks("answered") if t.ls_project == people[1].ls_project
            and status(t.a, t.b)["proof"]]
    task = mine[0]
    found = status(task.a, task.b)
    wrong = "negative" if found["status"] == "positive" else "positive"
    refused = people[1].ls.post(f"/api/tasks/{task.task_id}/annotations",
                                json={"result": choice(wrong)})
    refused.raise_for_status()
    refused_id = refused.json()["id"]
    said = f"refused annotation #{refused_id}"
    note = wait_for(lambda: (n := admin.task(task.task_id)["data"].get("sporal_note", ""))
                    and said in n and n, "the proof in the task")
    behind = [int(x) for x in re.findall(r"annotation #(\d+) \(task", note)]
    assert behind, note  # the proof names the Label Studio annotations behind it
    assert status(task.a, task.b)["status"] == found["status"]  # the refused answer is out

    def shown(person: Person) -> bool:
        notes = [admin.task(t)["data"]["sporal_note"] for t in open_pairs(admin, person)]
        return bool(notes) and all(said in n for n in notes)

    # ... on bo's next task (written before Label Studio answered his POST, or just after)
    wait_for(lambda: shown(people[1]), "the refusal on bo's open tasks", 30, 0.1)
    served = people[1].next()
    assert served is not None and said in served["data"]["sporal_note"]
    assert not served["predictions"]  # sporal's rank is not shown to annotators
    assert not any(said in admin.task(t)["data"]["sporal_note"]  # and nobody else's
                   for t in open_pairs(admin, people[0]))
    pair = served["data"]["sporal_pair"]
    people[1].answer(served, truth(order, pair["a"], pair["b"]))

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
    gone = {t.pair for t in state.tasks() if t.task_id in {row.task_id, task.task_id}}
    for person in people:  # an answer deleted is no longer theirs: it may be asked again
        person.answered -= gone

    # 6. go on until sporal has decided the whole pool
    deadline = time.monotonic() + 900
    asked = 0
    while undecided() and time.monotonic() < deadline:
        asked += 1
        if answer(people[asked % 2]) is None:
            time.sleep(0.2)
    assert undecided() == 0, adapter.tail()

    # 7. sporal's closure is the closure of the surviving annotations
    closure = Closure(f"concept {i:02d}" for i in range(order.n))
    exported = [t for p in people for t in admin.export(p.ls_project)]
    for task_body in sorted(exported, key=lambda t: t["id"]):
        pair = task_body["data"]["sporal_pair"]
        for annotation in sorted(task_body["annotations"], key=lambda x: x["id"]):
            if _by(annotation) == bot or annotation["was_cancelled"]:
                continue
            label = annotation["result"][0]["value"]["choices"][0]
            closure.add_label(pair["a"], pair["b"], label == "positive")
    expected = {(a, b, "positive" if positive else "negative")
                for a, b, positive, _ in closure.decided()}
    wait_for(lambda: {(x["a"], x["b"], x["label"]) for x in sporal.get(
        f"/projects/{pid}/labels", params={"source": "all", "limit": 10000}).json()["items"]}
        == expected, "sporal's closure to equal the annotations'", 60, 0.2)
    for person in people:  # each project's description: sporal's decided share, the health
        description = admin.project(person.ls_project)["description"]
        assert person.email in description.split("\n")[0] and "Adapter running" in description
        # and how many pairs are likely wrong (GET quality), once a description written
        # since pairs were decided (at least every minute) says it
        wait_for(lambda p=person: "\nLikely wrong: ≈ " in admin.project(p.ls_project)[
            "description"], "the quality line in the description", 90, 1.0)

    figures = {"answers_measured": len(delays),
               "delay_p50_ms": round(float(np.percentile(delays, 50)) * 1000, 1),
               "delay_p99_ms": round(float(np.percentile(delays, 99)) * 1000, 1),
               "delay_max_ms": round(max(delays) * 1000, 1),
               "served": {p.email: len(p.served) for p in people},
               **refresh_figures(adapter.log), "load": list(os.getloadavg())}
    report = Path(os.environ.get("SPORAL_LABELSTUDIO_REPORT", team["tmp"] / "figures.json"))
    report.write_text(json.dumps(figures, indent=1))
    print(figures)


@pytest.mark.parametrize("team", ["consensus"], indirect=True)
def test_second_opinions_checks_and_contested_notes_reach_the_right_person(
        team: dict[str, Any]) -> None:
    sporal: httpx.Client = team["sporal"]
    pid, order = team["pid"], team["order"]
    people: list[Person] = team["people"]
    admin = LabelStudioClient(str(LS_URL), LS_TOKEN)
    answered: list[set[tuple[str, str]]] = [set(), set()]
    seen = {"second opinion": False, "check": False, "contested": False}
    # ann's earlier answers (given in /ui/, say): short chains whose ends are pool pairs, which
    # decide much (a second opinion for bo) and make check questions (pool pairs decided
    # positive through two steps)
    for a, b in _chains(order):
        sporal.post(f"/projects/{pid}/labels", json={"a": a, "b": b, "label": "positive",
                                                     "annotator": people[0].email})
        answered[0].add((a, b))
    wait_for(lambda: all(open_pairs(admin, p) for p in people), "the first windows", 60, 0.2)
    deadline = time.monotonic() + 600
    turn = 0
    while not all(seen.values()) and time.monotonic() < deadline:
        turn += 1
        k = turn % 2
        task = people[k].next()
        if task is None:
            if not sporal.get(f"/projects/{pid}").json()["counts"]["undecided_pool_pairs"]:
                break  # sporal decided the whole pool
            time.sleep(0.2)
            continue
        pair = (task["data"]["sporal_pair"]["a"], task["data"]["sporal_pair"]["b"])
        assert "disagree" not in task["data"]["sporal_note"]  # never why a pair is asked
        seen["second opinion"] |= pair in answered[1 - k]  # the other one answered it
        label = truth(order, *pair)
        if k == 1 and (turn % 4 == 1 or pair in answered[0]):  # bo says the opposite on half
            # of his new questions and on every second opinion (which contests ann's answer)
            label = "negative" if label == "positive" else "positive"
        if k == 1 and turn % 4 == 3:  # and "yes" on the other half: a "yes" decides most
            label = "positive"
        if people[k].answer(task, label) is None:
            continue
        answered[k].add(pair)
        check_the_team(admin, team)
        checks = {a["annotator"]: a["checks"]["asked"] for a in sporal.get(
            f"/projects/{pid}/agreement").json()["annotators"]}
        seen["check"] |= any(checks.get(p.email) for p in people)
        seen["contested"] |= _contested_note_only_for_its_owner(admin, people, answered)
    assert all(seen.values()), (seen, team["adapter"].tail())


def _chains(order: Any) -> list[tuple[str, str]]:
    """The links (a, b), (b, c) of the true chains a < b < c whose ends are a pool pair."""
    name = lambda i: f"concept {i:02d}"  # noqa: E731
    links: list[tuple[str, str]] = []
    for a, c in order.pool.tolist():
        middle = [b for b in range(order.n) if b not in (a, c) and order.is_positive(a, b)
                  and order.is_positive(b, c)]
        for link in ((a, middle[0]), (middle[0], c)) if middle else ():
            if (name(link[0]), name(link[1])) not in links:
                links.append((name(link[0]), name(link[1])))
    return links


def _contested_note_only_for_its_owner(admin: LabelStudioClient, people: list[Person],
                                       answered: list[set[tuple[str, str]]]) -> bool:
    """Whether a contested answer's note is on its owner's open tasks, and every such note on
    a person's tasks is about an answer of theirs (both may have contested answers)."""
    notes = [[t["data"]["sporal_note"] for t in admin.export(p.ls_project)
              if not t.get("annotations")] for p in people]
    found = False
    for i, mine in enumerate(notes):
        for note in mine:
            about = re.search(r"Your answer on '([^']*)' → '([^']*)' \(\w+\) differs from what",
                              note)
            if about is not None:
                found = True
                assert (about.group(1), about.group(2)) in answered[i], (i, note, answered)
    return found


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


def test_setup_adopts_the_team_project_of_the_earlier_version_and_withdraws_its_bot(
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
        assert adapter.setup(f"http://127.0.0.1:{free_port()}/webhook") == [lsp]  # adopted
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
        assert sporal.labels(pid)[0]["annotator"] == admin.whoami()["email"]  # by name
        # each person answers in their own project now: the team's has no open task left
        assert [t["id"] for t in exported.values() if not t["annotations"]] == []


def refresh_figures(log: Path) -> dict[str, Any]:
    """What the adapter's refreshes did over the run, from its log."""
    found = [tuple(map(int, m)) for m in re.findall(
        r"window of [^:]+: (\d+) retired, (\d+) created, (\d+) rescored, \d+ notes in (\d+) ms",
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
