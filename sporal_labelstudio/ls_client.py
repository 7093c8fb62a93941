"""The few calls of Label Studio's REST API that the adapter makes, over httpx.

Authentication is Label Studio's legacy token (``Authorization: Token T``; a project's admin
starts Label Studio with ``--user-token T --enable-legacy-api-token``). Every method maps to
one documented route of Label Studio 1.23 (``/api/projects``, ``/api/tasks``,
``/api/predictions``, ``/api/annotations``, ``/api/webhooks``, ``/api/users``); the window's
changes are batched: tasks with their predictions in one import (``/api/projects/{id}/import``),
scores in one predictions import, and deletions in one Data Manager action (``/api/dm/actions``)
over the listed task ids only.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from sporal_labelstudio import retry

__all__ = ["LabelStudioClient", "LabelStudioError"]


class LabelStudioError(Exception):
    """An answer of Label Studio that is not a success."""

    def __init__(self, status: int, method: str, url: str, body: str) -> None:
        self.status = status
        super().__init__(f"Label Studio: {method} {url} -> {status}: {body[:500]}")


class LabelStudioClient:
    """Label Studio at ``base_url`` with the API token ``token``."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 60.0, retries: int = 3,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport,
                                  headers={"Authorization": f"Token {token}"})

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, url: str, **kwargs: Any) -> Any:
        response = retry.send(
            self._http, method, url, retries=self.retries, base_delay=0.5,
            retry_after=lambda r, attempt: 0.5 * 2 ** attempt if r.status_code >= 500 else None,
            **kwargs)
        if not response.is_success:
            raise LabelStudioError(response.status_code, method, url, response.text)
        return response.json() if response.content else None

    @staticmethod
    def _items(body: Any) -> list[dict[str, Any]]:
        return list(body["results"] if isinstance(body, dict) else body)

    # ------------------------------------------------------------------ projects
    def projects(self) -> list[dict[str, Any]]:
        return self._items(self._call("GET", "/api/projects", params={"page_size": 10_000}))

    def project(self, project_id: int) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/projects/{project_id}"))

    def create_project(self, **fields: Any) -> dict[str, Any]:
        return dict(self._call("POST", "/api/projects", json=fields))

    def update_project(self, project_id: int, **fields: Any) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/api/projects/{project_id}", json=fields))

    def export(self, project_id: int) -> list[dict[str, Any]]:
        """Every task of the project with its annotations (JSON export, all tasks).

        A busy Label Studio now and then answers 200 with no body: asked again a few times,
        then :class:`LabelStudioError` (never an empty list, which would say that every
        annotation is gone).
        """
        url = f"/api/projects/{project_id}/export"
        for attempt in range(self.retries + 1):
            body = self._call("GET", url, params={"exportType": "JSON",
                                                  "download_all_tasks": "true"})
            if body is not None:
                return list(body)
            time.sleep(0.5 * 2 ** attempt)
        raise LabelStudioError(200, "GET", url, "an empty answer")

    # ------------------------------------------------------------------ webhooks, users
    def webhooks(self, project_id: int) -> list[dict[str, Any]]:
        return self._items(self._call("GET", "/api/webhooks", params={"project": project_id}))

    def create_webhook(self, **fields: Any) -> dict[str, Any]:
        return dict(self._call("POST", "/api/webhooks", json=fields))

    def update_webhook(self, webhook_id: int, **fields: Any) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/api/webhooks/{webhook_id}", json=fields))

    def users(self) -> list[dict[str, Any]]:
        return self._items(self._call("GET", "/api/users"))

    def create_user(self, **fields: Any) -> dict[str, Any]:
        return dict(self._call("POST", "/api/users", json=fields))

    def whoami(self) -> dict[str, Any]:
        return dict(self._call("GET", "/api/current-user/whoami"))

    # ------------------------------------------------------------------ tasks
    def create_task(self, project_id: int, data: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/api/tasks", json={"project": project_id, "data": data}))

    def task(self, task_id: int) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/tasks/{task_id}"))

    def update_task_data(self, task_id: int, data: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/api/tasks/{task_id}", json={"data": data}))

    def import_tasks(self, project_id: int, tasks: list[dict[str, Any]]) -> list[int]:
        """Create ``tasks`` (each ``{"data", "predictions"}``) in one call; their ids, in order."""
        body = self._call("POST", f"/api/projects/{project_id}/import",
                          params={"return_task_ids": "true"}, json=tasks)
        return [int(i) for i in body.get("task_ids") or []]

    def _action(self, project_id: int, action: str, task_ids: list[int],
                filters: dict[str, Any] | None = None) -> int:
        """Run a Data Manager action on exactly ``task_ids``; how many items it processed."""
        if not task_ids:  # never an empty selection: Label Studio's default selects all
            return 0
        body: dict[str, Any] = {"selectedItems": {"all": False, "included": list(task_ids)}}
        if filters is not None:
            body["filters"] = filters
        answer = self._call("POST", "/api/dm/actions",
                            params={"id": action, "project": project_id}, json=body)
        return int((answer or {}).get("processed_items") or 0)

    def delete_unanswered_tasks(self, project_id: int, task_ids: list[int]) -> int:
        """Delete those of ``task_ids`` that have no annotation yet (one call)."""
        return self._action(project_id, "delete_tasks", task_ids, filters={
            "conjunction": "and", "items": [{"filter": "filter:tasks:total_annotations",
                                            "operator": "equal", "type": "Number", "value": 0}]})

    def delete_tasks(self, project_id: int, task_ids: list[int]) -> int:
        """Delete ``task_ids`` with whatever they hold (one call)."""
        return self._action(project_id, "delete_tasks", task_ids)

    def set_scores(self, project_id: int, scores: dict[int, float], model_version: str) -> None:
        """Give each task of ``scores`` one prediction with that score (two calls)."""
        if not scores:
            return
        self._action(project_id, "delete_tasks_predictions", list(scores))
        self._call("POST", f"/api/projects/{project_id}/import/predictions", json=[
            {"task": task, "result": [], "score": score, "model_version": model_version}
            for task, score in scores.items()])

    def create_prediction(self, task_id: int, score: float, model_version: str) -> dict[str, Any]:
        return dict(self._call("POST", "/api/predictions", json={
            "task": task_id, "result": [], "score": score, "model_version": model_version}))

    def update_prediction(self, prediction_id: int, score: float) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/api/predictions/{prediction_id}",
                               json={"score": score}))

    # ------------------------------------------------------------------ annotations
    def create_annotation(self, task_id: int, result: list[dict[str, Any]],
                          completed_by: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"result": result}
        if completed_by is not None:
            body["completed_by"] = completed_by
        return dict(self._call("POST", f"/api/tasks/{task_id}/annotations", json=body))

    def update_annotation(self, annotation_id: int, result: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/api/annotations/{annotation_id}",
                               json={"result": result}))

    def delete_annotation(self, annotation_id: int) -> bool:
        """Delete an annotation; ``False`` when it is already gone."""
        try:
            self._call("DELETE", f"/api/annotations/{annotation_id}")
        except LabelStudioError as error:
            if error.status == 404:
                return False
            raise
        return True
