"""``sporal labelstudio setup|run``: the typer sub-app that app/cli.py mounts."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["labelstudio"]

labelstudio = typer.Typer(help="Label Studio drives sporal: its annotators answer sporal's "
                          "questions.", no_args_is_help=True, add_completion=False)

SporalUrl = Annotated[str, typer.Option(help="sporal's base URL.")]
SporalKey = Annotated[str | None, typer.Option(help="sporal's project key (X-API-Key).",
                                               envvar="SPORAL_KEY")]
Project = Annotated[int, typer.Option(help="The sporal project id.")]
LsUrl = Annotated[str, typer.Option(help="Label Studio's base URL.")]
LsToken = Annotated[str, typer.Option(help="Label Studio's API token (legacy token).",
                                      envvar="LABEL_STUDIO_TOKEN")]
Window = Annotated[int, typer.Option(min=1, help="Open tasks each person's Label Studio "
                                     "project holds at a time.")]
Names = Annotated[str, typer.Option(help="How a Label Studio user is named in sporal: "
                                    "email or username.")]
Listen = Annotated[str, typer.Option(help="HOST:PORT of the webhook endpoint.")]
StatePath = Annotated[Path, typer.Option(help="The adapter's SQLite state file.")]
WebhookUrl = Annotated[str | None, typer.Option(
    help="The URL Label Studio posts to (default: http://LISTEN/webhook).")]


def _adapter(sporal_url: str, sporal_key: str | None, project: int, ls_url: str, ls_token: str,
             window: int, state: Path, strategy: str | None = None,
             names: str = "email") -> Any:
    from sporal_labelstudio.adapter import Adapter
    from sporal_labelstudio.ls_client import LabelStudioClient
    from sporal_labelstudio.sporal_client import SporalClient
    from sporal_labelstudio.state import State

    return Adapter(SporalClient(sporal_url, sporal_key), LabelStudioClient(ls_url, ls_token),
                   State(state), project=project, window=window, strategy=strategy,
                   names=names)


@labelstudio.command()
def setup(
    project: Project,
    ls_token: LsToken,
    sporal_url: SporalUrl = "http://127.0.0.1:8000",
    sporal_key: SporalKey = None,
    ls_url: LsUrl = "http://127.0.0.1:8080",
    window: Window = 3,
    listen: Listen = "127.0.0.1:8090",
    state: StatePath = Path("sporal-labelstudio.db"),
    webhook_url: WebhookUrl = None,
    person: Annotated[list[str] | None, typer.Option(
        help="A Label Studio user (email or username, signed up already) who answers in a "
        "project of their own; repeat it for each person. Run setup again to add one.")] = None,
    names: Names = "email",
) -> None:
    """Set up the webhook and a Label Studio project for each person (adding those named)."""
    adapter = _adapter(sporal_url, sporal_key, project, ls_url, ls_token, window, state,
                       names=names)
    adapter.setup(webhook_url or f"http://{listen}/webhook")
    for who in person or []:
        try:
            adapter.add_person(who)
        except LookupError as error:
            typer.echo(str(error), err=True)
            raise typer.Exit(1) from None
    for row in adapter.people():
        typer.echo(f"{row.name}: {ls_url.rstrip('/')}/projects/{row.ls_project}")
    if adapter.config_kept:
        typer.echo(adapter.config_kept, err=True)


@labelstudio.command()
def run(
    project: Project,
    ls_token: LsToken,
    sporal_url: SporalUrl = "http://127.0.0.1:8000",
    sporal_key: SporalKey = None,
    ls_url: LsUrl = "http://127.0.0.1:8080",
    window: Window = 3,
    listen: Listen = "127.0.0.1:8090",
    state: StatePath = Path("sporal-labelstudio.db"),
    webhook_url: WebhookUrl = None,
    names: Names = "email",
    person: Annotated[list[str] | None, typer.Option(
        help="A Label Studio user who answers in a project of their own (as setup).")] = None,
    strategy: Annotated[str | None, typer.Option(
        help="sporal's strategy (default: the service's).")] = None,
    reconcile_every: Annotated[float, typer.Option(
        help="Seconds between reconciles from Label Studio's export.")] = 60.0,
    max_body: Annotated[int, typer.Option(
        min=1, help="Largest webhook body accepted, in bytes (larger: 413).")] = 1024 * 1024,
    queue_size: Annotated[int, typer.Option(
        min=1, help="Webhook events waiting for the worker at most (more: 503, and the next "
        "reconcile recovers them).")] = 1000,
) -> None:
    """Serve the webhook and keep Label Studio's open tasks and sporal's labels in step."""
    from sporal_labelstudio.server import Limits, Runner

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    adapter = _adapter(sporal_url, sporal_key, project, ls_url, ls_token, window, state, strategy,
                       names)
    adapter.setup(webhook_url or f"http://{listen}/webhook")  # idempotent; repairs drift
    for who in person or []:
        adapter.add_person(who)
    runner = Runner(adapter, listen, reconcile_every=reconcile_every,
                    limits=Limits(max_body=max_body, queue_size=queue_size))
    signal.signal(signal.SIGTERM, lambda *_: runner.stop())
    try:
        runner.serve()
    except KeyboardInterrupt:
        runner.stop()
