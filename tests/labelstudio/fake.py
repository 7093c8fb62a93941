"""An in-memory Label Studio with the methods of LabelStudioClient, for the replay tests: users,
projects (each person's own), their tasks, scores and descriptions."""

from __future__ import annotations

import itertools
from typing import Any

from sporal_labelstudio.adapter import BOT_EMAIL

BOT_USER = 2  # the bot's id in the captured payloads
PEOPLE = {3: "ann@example.com", 4: "bo@example.com", 7: "cy@example.com"}  # user id: email


class FakeLabelStudio:
    def __init__(self) -> None:
        self.tasks: dict[int, dict[str, Any]] = {}
        self.annotations: dict[int, dict[str, Any]] = {}
        self.predictions: dict[int, dict[str, Any]] = {}
        self.exported: list[dict[str, Any]] = []  # what export() answers
        self.during_export: Any = None  # called while the export is read (a racing event)
        self.scores: dict[int, float] = {}  # task -> its prediction's score
        self.deleted: list[int] = []  # tasks deleted, in order
        self.calls: list[str] = []  # the write calls made, by name
        self.description = ""  # the last one written
        self.descriptions: dict[int, str] = {}  # project -> its description
        self.project_of: dict[int, int] = {}  # task -> its project
        self.projects_made: list[dict[str, Any]] = []
        self.export_project: int | None = None  # whose export answers ``exported``
        self.hooks: list[dict[str, Any]] = []
        self._ids = itertools.count(1000)

    def projects(self) -> list[dict[str, Any]]:
        return [{**p, "description": self.descriptions.get(p["id"], "")}
                for p in self.projects_made]

    def create_project(self, **fields: Any) -> dict[str, Any]:
        project = {"id": next(self._ids), "title": fields.get("title", "")}
        self.projects_made.append(project)
        self.descriptions[project["id"]] = fields.get("description", "")
        return project

    def webhooks(self, project_id: int) -> list[dict[str, Any]]:
        return [h for h in self.hooks if h["project"] == project_id]

    def create_webhook(self, **fields: Any) -> dict[str, Any]:
        self.hooks.append({"id": next(self._ids), **fields})
        return self.hooks[-1]

    def update_webhook(self, webhook_id: int, **fields: Any) -> dict[str, Any]:
        hook = next(h for h in self.hooks if h["id"] == webhook_id)
        hook.update(fields)
        return hook

    def update_project(self, project_id: int, **fields: Any) -> dict[str, Any]:
        self.calls.append("update_project")
        if "description" in fields:
            self.description = self.descriptions[project_id] = fields["description"]
        return {"id": project_id, **fields}

    def open_tasks(self, project_id: int) -> list[int]:
        """The project's tasks nobody has annotated."""
        answered = {a["task"] for a in self.annotations.values()}
        return [t for t, p in self.project_of.items()
                if p == project_id and t in self.tasks and t not in answered]

    def import_tasks(self, project_id: int, tasks: list[dict[str, Any]]) -> list[int]:
        self.calls.append("import_tasks")
        ids = []
        for task in tasks:
            task_id = next(self._ids)
            self.tasks[task_id] = dict(task["data"])
            self.project_of[task_id] = project_id
            self.scores[task_id] = task["predictions"][0]["score"]
            ids.append(task_id)
        return ids

    def delete_unanswered_tasks(self, project_id: int, task_ids: list[int]) -> int:
        self.calls.append("delete_unanswered_tasks")
        answered = {a["task"] for a in self.annotations.values()}
        gone = [t for t in task_ids if t in self.tasks and t not in answered]
        for task_id in gone:
            del self.tasks[task_id]
            self.scores.pop(task_id, None)
        self.deleted += gone
        return len(gone)

    def delete_tasks(self, project_id: int, task_ids: list[int]) -> int:
        self.calls.append("delete_tasks")
        for task_id in task_ids:
            self.tasks.pop(task_id, None)
        self.deleted += task_ids
        return len(task_ids)

    def set_scores(self, project_id: int, scores: dict[int, float], model_version: str) -> None:
        self.calls.append("set_scores")
        self.scores.update(scores)

    def users(self) -> list[dict[str, Any]]:
        return [{"id": BOT_USER, "email": BOT_EMAIL, "username": "bot"}, *(
            {"id": i, "email": email, "username": email.split("@")[0]}
            for i, email in PEOPLE.items())]

    def create_task(self, project_id: int, data: dict[str, Any]) -> dict[str, Any]:
        task_id = next(self._ids)
        self.tasks[task_id] = dict(data)
        return {"id": task_id, "data": data}

    def update_task_data(self, task_id: int, data: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("update_task_data")
        self.tasks[task_id] = dict(data)
        return {"id": task_id, "data": data}

    def create_prediction(self, task_id: int, score: float, model_version: str) -> dict[str, Any]:
        prediction_id = next(self._ids)
        self.predictions[prediction_id] = {"task": task_id, "score": score}
        return {"id": prediction_id}

    def update_prediction(self, prediction_id: int, score: float) -> dict[str, Any]:
        self.predictions[prediction_id]["score"] = score
        return {"id": prediction_id}

    def create_annotation(self, task_id: int, result: list[dict[str, Any]],
                          completed_by: int | None = None) -> dict[str, Any]:
        annotation_id = next(self._ids)
        self.annotations[annotation_id] = {"task": task_id, "result": result,
                                           "completed_by": completed_by}
        return {"id": annotation_id}

    def delete_annotation(self, annotation_id: int) -> bool:
        return self.annotations.pop(annotation_id, None) is not None

    def export(self, project_id: int) -> list[dict[str, Any]]:
        if self.export_project is not None and project_id != self.export_project:
            return []
        snapshot = list(self.exported)
        if self.during_export is not None:
            self.during_export()
        return snapshot
