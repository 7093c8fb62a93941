"""The `sporal` command: serve the API, migrate the database, re-run the paper's experiment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

cli = typer.Typer(help="A reasoning service for active learning of strict partial orders.",
                  no_args_is_help=True, add_completion=False)


def _print_version(value: bool) -> None:
    if value:
        from app import __version__

        typer.echo(f"sporal {__version__}")
        raise typer.Exit()


@cli.callback()
def options(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the version and exit.")] = False,
) -> None:
    """A reasoning service for active learning of strict partial orders."""


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes.")] = 1,
) -> None:
    """Apply the database migrations, then start the HTTP service."""
    from app.server import serve as run_server

    run_server(host=host, port=port, workers=workers)


@cli.command()
def migrate() -> None:
    """Bring the database at SPORAL_DATABASE_URL up to the newest schema."""
    from app.db import migrate as run_migrations

    run_migrations()


@cli.command()
def simulate(
    data: Annotated[Path, typer.Option(help="Folder with DOMAIN.pairs / DOMAIN.features.")],
    out: Annotated[Path, typer.Option(help="Folder for curves.csv, summary and plots.")],
    domain: Annotated[str, typer.Option(help="A domain name of the folder, or 'all'.")] = "all",
    strategies: Annotated[str, typer.Option(help="Comma list of strategies, or 'all'.")] = "all",
    repeats: Annotated[int, typer.Option(help="Independent repeats (train/test splits).")] = 20,
    queries: Annotated[int, typer.Option(help="Queries per run after the 20 seeds.")] = 150,
    eval_every: Annotated[int, typer.Option(help="Evaluate every this many queries.")] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the whole experiment.")] = 0,
    jobs: Annotated[int, typer.Option(help="Worker processes (default: all cores).")] = 0,
    quick: Annotated[bool, typer.Option(help="Smoke-test profile: few repeats, queries.")] = False,
    model_lag: Annotated[int, typer.Option(
        min=0, help="Queries the strategy's model lags behind the labels (0: synchronous).")] = 0,
) -> None:
    """Re-run the paper's pool-based experiment (Sec. 5.3) and write curves, a summary and plots."""
    from reasoning.experiment import simulate as run_simulation

    run_simulation(data=data, out=out, domain=domain, strategies=strategies, repeats=repeats,
                   queries=queries, eval_every=eval_every, seed=seed, jobs=jobs, quick=quick,
                   model_lag=model_lag)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
