"""The `sporal` command: serve the API, migrate the database, re-run the paper's experiment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    from typer._click import Command, Context  # the click that typer ships and subclasses


class _Commands(TyperGroup):
    """sporal's commands, ``labelstudio`` last, imported only when it is run or listed.

    ``sporal labelstudio`` is the Label Studio adapter (:mod:`sporal_labelstudio`), a client
    that talks HTTP to sporal and to Label Studio: no part of the service, so importing
    :mod:`app.cli` (or :mod:`app.main`) never imports it.
    """

    LAZY = "labelstudio"

    def list_commands(self, ctx: Context) -> list[str]:
        return [*super().list_commands(ctx), self.LAZY]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name != self.LAZY:
            return super().get_command(ctx, cmd_name)
        from sporal_labelstudio.cli import labelstudio

        command = typer.main.get_command(labelstudio)
        command.name = cmd_name  # as `add_typer(labelstudio, name=...)` would name it
        return command


cli = typer.Typer(help="A reasoning service for active learning of strict partial orders.",
                  no_args_is_help=True, add_completion=False, cls=_Commands)


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
    queries: Annotated[int | None, typer.Option(help=(
        "Queries per run after the 20 seeds (auc: default 150; coverage: default until "
        "every pool pair is decided)."))] = None,
    eval_every: Annotated[int, typer.Option(help="Evaluate every this many queries.")] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the whole experiment.")] = 0,
    jobs: Annotated[int, typer.Option(help="Worker processes (default: all cores).")] = 0,
    quick: Annotated[bool, typer.Option(help="Smoke-test profile: few repeats, queries.")] = False,
    model_lag: Annotated[int, typer.Option(
        min=0, help="Queries the strategy's model lags behind the labels (0: synchronous).")] = 0,
    mode: Annotated[str, typer.Option(help=(
        "auc: the paper's protocol (curves.csv, summary, claims). coverage: ask until every "
        "pool pair is decided (coverage.csv, oracle.csv, coverage.png, coverage.md)."))] = "auc",
    log_questions: Annotated[bool, typer.Option(
        "--log-questions", help=("Also write questions.csv: every pool pair a strategy chose "
                                 "(domain, mode, strategy, repeat, i, a, b)."))] = False,
    policy: Annotated[str | None, typer.Option(help=(
        "Coverage mode with a team of noisy annotators: comma list of trust, double, "
        "consensus and its variants (consensus-unweighted, consensus-nocheck, consensus-now, "
        "...: reasoning.simulation.teams.POLICIES) (coverage.csv gains policy, noise, "
        "answers, wrong_pairs, error_rate, positive_f1)."))] = None,
    noise: Annotated[str | None, typer.Option(help=(
        "Team: the chance that an answer is wrong, one for all or a comma list per annotator "
        "(default 0.1)."))] = None,
    annotators: Annotated[int, typer.Option(min=1, help="Team: the annotators.")] = 5,
    noise_model: Annotated[str, typer.Option(help=(
        "Team: independent or direct (answers the direct relation), one for all or a comma "
        "list per annotator."))] = "independent",
    resume: Annotated[bool, typer.Option(
        "--resume", help="Team: keep the runs in OUT/runs.jsonl and skip them.")] = False,
    check_rate: Annotated[float | None, typer.Option(
        min=0.0, max=1.0, help="Team, consensus: the share of check questions.")] = None,
    second_opinion_value: Annotated[float | None, typer.Option(
        min=0.0, help="Team, consensus: the least P(wrong) × pairs at stake asked again."
    )] = None,
) -> None:
    """Re-run the paper's experiment (Sec. 5.3), or measure the questions to a complete map
    (--mode coverage; with --policy, for a team of noisy annotators); write tables and plots."""
    from reasoning.simulation import simulate as run_simulation

    if mode not in ("auc", "coverage"):
        raise typer.BadParameter("auc or coverage", param_hint="--mode")
    team = _team_options(policy, noise, annotators, noise_model, resume, check_rate,
                         second_opinion_value)
    try:
        run_simulation(data=data, out=out, domain=domain, strategies=strategies,
                       repeats=repeats, queries=queries, eval_every=eval_every, seed=seed,
                       jobs=jobs, quick=quick, model_lag=model_lag, mode=mode,
                       log_questions=log_questions, team=team)
    except ValueError as exc:
        if team is None:
            raise
        raise typer.BadParameter(str(exc)) from None


def _team_options(policy: str | None, noise: str | None, annotators: int, noise_model: str,
                  resume: bool, check_rate: float | None,
                  second_opinion_value: float | None) -> dict | None:
    """The team arguments of the simulation, or None when no team option was given."""
    if policy is None and noise is None:
        return None
    from reasoning.consensus.asking import CHECK_RATE, SECOND_OPINION_VALUE, AskPolicy

    ask = AskPolicy(CHECK_RATE if check_rate is None else check_rate,
                    SECOND_OPINION_VALUE if second_opinion_value is None
                    else second_opinion_value)
    return {"policies": policy or "trust,double,consensus", "noise": noise or "0.1",
            "annotators": annotators, "noise_model": noise_model, "resume": resume,
            "ask": ask}


@cli.command("import")
def import_data(
    project: Annotated[str, typer.Option(help="The project: created, or the one of this name.")],
    al_cpl: Annotated[Path | None, typer.Option(
        "--al-cpl", help="An AL-CPL folder (DOMAIN.pairs / DOMAIN.features).")] = None,
    domain: Annotated[str | None, typer.Option(help="The AL-CPL domain to import.")] = None,
    with_labels: Annotated[bool, typer.Option(
        "--with-labels", help="AL-CPL: also assert each row's true label.")] = False,
    file: Annotated[Path | None, typer.Option(
        help="A JSON Lines or CSV file (docs/formats.md).")] = None,
    format: Annotated[str | None, typer.Option(
        "--format", help="jsonl or csv (default: from the file's suffix).")] = None,
    url: Annotated[str | None, typer.Option(
        help="A running service; default: in-process against SPORAL_DATABASE_URL.")] = None,
    api_key: Annotated[str | None, typer.Option(
        envvar="SPORAL_API_KEY", help="X-API-Key for --url (admin or the project's).")] = None,
    respond_async: Annotated[bool, typer.Option(
        "--async", help="--url: ask the service to import by a job (Prefer: respond-async), "
        "followed until it ends; a file over its SPORAL_IMPORT_ASYNC_BYTES is one anyway."
    )] = False,
    policy: Annotated[str | None, typer.Option(
        help="The project's label policy, strict or consensus (docs/teams.md), set before "
        "the file is read: a new project is created with it, an existing one switched.")]
    = None,
    question: Annotated[str | None, typer.Option(
        help="The question annotators are asked, with {a} and {b}; set like --policy.")]
    = None,
) -> None:
    """Import concepts, the pool and labels from a file or an AL-CPL domain (validated first).

    Against --url, a service that answers with a job (a large file, or --async) is followed
    with a progress bar until the job ends; its summary or its problem is printed as usual.
    """
    from app.importer import ImportFailed, import_local, import_remote, local_source, project_fields
    from app.services.importing import InputLimits
    from app.settings import get_settings

    try:
        if respond_async and url is None:
            raise ImportFailed("--async asks a service to import by a job: it needs --url")
        fields = project_fields(policy, question)
        if url is not None:
            pid, key, summary = import_remote(url, api_key, project, al_cpl=al_cpl,
                                              domain=domain, with_labels=with_labels,
                                              file=file, fmt=format,
                                              respond_async=respond_async, fields=fields)
        else:
            source = local_source(al_cpl=al_cpl, domain=domain, with_labels=with_labels,
                                  file=file, fmt=format,
                                  limits=InputLimits.of(get_settings()))
            pid, key, result = import_local(get_settings(), project, source, fields)
            summary = result.model_dump()
    except ImportFailed as exc:
        typer.echo(f"sporal import: {exc}", err=True)
        raise typer.Exit(1) from None
    _announce(pid, key, summary)


def _announce(pid: int, key: str | None, summary: dict[str, object]) -> None:
    """Print an import's summary (stdout, JSON) and a new project's key (on both streams)."""
    import json

    if key is not None:
        typer.echo(f"created project {pid}; its api_key (shown once, also as \"api_key\" in "
                   f"the JSON on stdout): {key}\nKeep it: clients send it as the X-API-Key "
                   "header, and the web page (/ui/) asks for it when the service runs with "
                   "keys (SPORAL_ADMIN_KEY set).", err=True)
    typer.echo(json.dumps({"project": pid, **({"api_key": key} if key is not None else {}),
                           **summary}))


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
