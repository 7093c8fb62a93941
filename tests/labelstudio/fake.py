"""An in-memory Label Studio with the methods of LabelStudioClient, for the replay tests."""

from __future__ import annotations

import itertools
from typing import Any

from sporal_labelstudio.adapter import BOT_EMAIL

BOT_USER = 2  # the bot's id in the captured payloads


class FakeLabelStudio:
    def __init__(self) -> None:
        self.tasks: dict[int, dict[str, Any]] = {}
        self.annotations: dict[int, dict[str, Any]] = {}
        self.predictions: dict[int, dict[str, Any]] = {}
        self.exported: list[dict[str, Any]] = []  # what export() answers
        self.during_export: Any = None  # called while the export is read (a racing event)
        self._ids = itertools.count(1000)

    def users(self) -> list[dict[str, Any]]:
        return [{"id": BOT_USER, "email": BOT_EMAIL}]

    def create_task(self, project_id: int, data: dict[str, Any]) -> dict[str, Any]:
        task_id = next(self._ids)
        self.tasks[task_id] = dict(data)
        return {"id": task_id, "data": data}

    def update_task_data(self, task_id: int, data: dict[str, Any]) -> dict[str, Any]:
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
        snapshot = list(self.exported)
        if self.during_export is not None:
            self.during_export()
        return snapshot
