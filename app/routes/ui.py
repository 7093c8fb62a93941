"""``/ui/``: the annotator's page (labeling, reasons, progress, the map), served offline.

Plain HTML, CSS and JavaScript from ``app/static/ui`` with no build step; the map's layout
library (dagre) is vendored in ``app/static/vendor/dagre`` and served under ``/ui/vendor/dagre/``,
so the page works whether or not the docs (``/static``) are on. The page talks to the REST API
of the same service and keeps the project key in the browser's ``sessionStorage`` only.
Its Content-Security-Policy lets it load and call nothing but the service itself.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from app.routes import annotators
from app.routes.docs import STATIC_DIR

__all__ = ["UI_DIR", "install_ui"]

UI_DIR = STATIC_DIR / "ui"
DAGRE_DIR = STATIC_DIR / "vendor" / "dagre"
CONTENT_SECURITY_POLICY = ("default-src 'self'; img-src 'self' data:; object-src 'none'; "
                           "base-uri 'none'; frame-ancestors 'none'")


class _UIFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["Cache-Control"] = "no-cache"
        return response


def install_ui(app: FastAPI) -> None:
    """Add ``/ui/`` (its files) and the per-annotator counts route its progress view reads."""
    app.include_router(annotators.router)

    @app.get("/ui", include_in_schema=False)
    def ui_redirect() -> RedirectResponse:
        return RedirectResponse("ui/", status_code=308)

    # before /ui, which would otherwise answer for its paths
    app.mount("/ui/vendor/dagre", _UIFiles(directory=DAGRE_DIR), name="ui-dagre")
    app.mount("/ui", _UIFiles(directory=UI_DIR, html=True), name="ui")
