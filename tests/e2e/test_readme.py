"""The README's five-minute curl walk-through, pasted as it stands against a real server.

Each command must work and answer what the README's comments say; pasting it a second time
on the same database must work too (a new user retries).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from benchmarks.serving import Server

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None,
                                reason="the walk-through needs curl and bash")

# Every answer on a line of its own (curl -s prints none after a body); the commands
# themselves run exactly as written.
NEWLINE_AFTER_EACH_ANSWER = "curl() { command curl -w '\\n' \"$@\"; }\n"


def walk_through() -> str:
    """The bash block of the README's "Five minutes with curl" section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Five minutes with curl", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, "the walk-through is one bash block"
    return blocks[0]


def _paste(script: str, url: str, cwd: Path) -> list[Any]:
    assert "API=http://127.0.0.1:8000\n" in script
    script = script.replace("API=http://127.0.0.1:8000\n", f"API={url}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPORAL_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(["bash", "-c", NEWLINE_AFTER_EACH_ANSWER + script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    answers: list[Any] = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            answers.append(json.loads(line))
        elif answers and isinstance(answers[-1], str):
            answers[-1] += line + "\n"
        elif line:
            answers.append(line + "\n")  # the CSV export, line by line
    return answers


def _check(answers: list[Any], cwd: Path) -> None:
    (concepts, pairs, first_next, ab, bc, contradiction, status, inferred, project,
     leased, concept_map, csv, undo) = answers
    assert concepts["created"] == 4 and pairs["created"] == 6
    # 3. "model": null while nothing is labeled.
    assert len(first_next["queries"]) == 1 and first_next["model"] is None
    assert ab["id"] < bc["id"]
    # 4. -> "decided": (limit, integral) positive, (integral, limit) and (integral, derivative)
    #    negative
    assert {(d["a"], d["b"], d["label"]) for d in bc["decided"]} == {
        ("limit", "integral", "positive"), ("integral", "limit", "negative"),
        ("integral", "derivative", "negative")}
    # 5. 409 with its proof: the asserted labels that force the opposite.
    assert contradiction["type"] == "/problems/contradiction"
    assert {p["id"] for p in contradiction["proof"]} == {ab["id"], bc["id"]}
    # 6.
    assert status["status"] == "positive" and status["source"] == "inferred"
    assert inferred["total"] == 4
    assert project["counts"]["asserted_labels"] == 2
    # 7. -> one question, not two: (limit, series) and (series, limit) decide each other.
    assert [{q["a"], q["b"]} for q in leased["queries"]] == [{"limit", "series"}]
    assert leased["annotator"] == "bo" and leased["reserved_until"] is not None
    # 8. The concept map: the undecided pool pairs carry the forest's probability.
    assert concept_map["model"]["name"] == "random_forest"
    predicted = [i for i in concept_map["items"] if i["source"] == "predicted"]
    assert len(predicted) == 2 and all(0 <= i["probability"] <= 1 for i in predicted)
    rows = [line for line in csv.splitlines() if line]
    assert rows[0] == "a,b,label,source,id,caused_by,annotator" and len(rows) == 1 + 6
    graph = nx.read_graphml(cwd / "calculus.graphml")
    assert set(graph.edges) == {("limit", "derivative"), ("derivative", "integral"),
                                ("limit", "integral")}
    # 9. Undo the newest label -> "undecided": 4.
    assert undo["id"] == bc["id"] and undo["undecided"] == 4


def test_the_readme_walk_through_works_as_pasted(tmp_path: Path) -> None:
    with Server(f"sqlite:///{tmp_path / 'sporal.db'}", tmp_path) as service:
        script = walk_through()
        for attempt in range(2):  # pasted again on the same database
            cwd = tmp_path / f"paste{attempt}"
            cwd.mkdir()
            _check(_paste(script, service.base_url, cwd), cwd)
