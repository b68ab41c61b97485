"""`gamut author ...`: the question-authoring pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gamut_hf.backends import BACKENDS
from gamut_hf.cli.options import EXIT_BAD_INPUT, BadInput, key_values

if TYPE_CHECKING:  # the pipeline pulls in datasets and tqdm: imported only by the commands using it
    pass


# -- authoring --------------------------------------------------------------------------------


@click.group()
def author() -> None:
    """Build new questions and rubrics: propose -> draft -> refine -> review -> export (then `gamut build`)."""


def author_model_options(command: Any) -> Any:
    for option in reversed(
        [
            click.option("--model", metavar="M", help="Model: a packaged name, folder, hub id or API model name."),
            click.option("--backend", type=click.Choice(sorted(BACKENDS)), help="Backend [default: transformers]."),
            click.option("--model-option", "model_options", multiple=True, metavar="KEY=VALUE", help="Backend option."),
            click.option(
                "--base-url", "base_urls", multiple=True, metavar="URL", help="Endpoint(s) for the openai backend."
            ),
        ]
    ):
        command = option(command)
    return command


def _author_backend(options: dict[str, Any], *, need_model: bool = False):
    from gamut_hf.evaluation.config import ModelSpec, model_spec

    if need_model and not options["model"]:
        raise BadInput("propose needs a multimodal model: --model M (and --backend, --base-url as needed)")
    spec = model_spec(
        ModelSpec(),
        options["model"],
        options["backend"],
        key_values(options["model_options"], "--model-option"),
        options["base_urls"],
    )
    return spec.load()


def _retriever(folder: str, snippets: str | None, search_url: str | None):
    from gamut_hf.authoring.evidence import LocalSnippetStore, SearxngRetriever

    if search_url:
        return SearxngRetriever(search_url, LocalSnippetStore.open(Path(folder) / "snippets.jsonl"))
    if not snippets:
        raise BadInput(
            "say where evidence comes from: --snippets FILE (JSONL of url, title, text, retrieved) "
            "or --search-url URL (a SearxNG instance)"
        )
    store = LocalSnippetStore.open(snippets)
    if not store.snippets:
        raise BadInput(f"{snippets}: no snippets")
    return store


def evidence_options(command: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--snippets", metavar="FILE", help="Local snippet store: JSONL of {url, title, text, retrieved}."
            ),
            click.option(
                "--search-url", metavar="URL", help="A SearxNG instance to search instead (results cached in DIR)."
            ),
        ]
    ):
        command = option(command)
    return command


@author.command("propose")
@click.argument("images", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, metavar="DIR", help="The authoring workspace.")
@click.option("--domain", help="A domain hint for every image.")
@author_model_options
def author_propose(images: tuple[str, ...], out: str, domain: str | None, **options: Any) -> None:
    """Candidate questions per image; one chosen per image, every candidate kept with its reason."""
    from gamut_hf.authoring.pipeline import propose
    from gamut_hf.authoring.store import AuthoringStore

    backend = _author_backend(options, need_model=True)
    try:
        with AuthoringStore(out) as store:
            rows = propose(
                [Path(i) for i in images],
                backend,
                store,
                domain_hint=domain,
                echo=lambda line: click.echo(line, err=True),
            )
    finally:
        backend.close()
    chosen = sum(r["status"] == "selected" for r in rows)
    click.echo(
        f"{len(rows)} candidates for {len(images)} images: {chosen} chosen, "
        f"{sum(r['status'] == 'rejected' for r in rows)} rejected (see `gamut author review {out}`)"
    )


@author.command("draft")
@click.argument("folder", metavar="DIR")
@click.option(
    "--rounds",
    type=click.IntRange(min=1, max=10),
    default=3,
    show_default=True,
    help="Validation-repair rounds per question.",
)
@click.option("--question-id", "question_ids", multiple=True, metavar="ID", help="Only these questions (again).")
@click.option(
    "--max-tokens", type=click.IntRange(min=16), default=3000, show_default=True, help="Length cap of one draft."
)
@evidence_options
@author_model_options
def author_draft(
    folder: str,
    rounds: int,
    question_ids: tuple[str, ...],
    max_tokens: int,
    snippets: str | None,
    search_url: str | None,
    **options: Any,
) -> None:
    """Evidence -> meta-rubric per proposed question, through structured output and a repair loop."""
    from gamut_hf.authoring.pipeline import draft
    from gamut_hf.authoring.store import AuthoringStore

    retriever = _retriever(folder, snippets, search_url)
    backend = _author_backend(options)
    try:
        with AuthoringStore(folder) as store:
            failed = draft(
                store,
                retriever,
                backend,
                max_rounds=rounds,
                max_tokens=max_tokens,
                question_ids=question_ids or None,
                echo=lambda line: click.echo(line, err=True),
            )
    finally:
        backend.close()
    for qid, problems in failed.items():
        for problem in problems:
            click.echo(f"{qid}: {problem}")
    if failed:
        raise click.exceptions.Exit(EXIT_BAD_INPUT)


@author.command("refine")
@click.argument("folder", metavar="DIR")
@evidence_options
@author_model_options
def author_refine(folder: str, snippets: str | None, search_url: str | None, **options: Any) -> None:
    """The self-refinement audit: item-by-item grounding, new evidence, rebuild and recompile."""
    from gamut_hf.authoring.pipeline import refine
    from gamut_hf.authoring.store import AuthoringStore

    retriever = _retriever(folder, snippets, search_url)
    backend = _author_backend(options)
    try:
        with AuthoringStore(folder) as store:
            report = refine(store, retriever, backend, echo=lambda line: click.echo(line, err=True))
    finally:
        backend.close()
    for qid, findings in report.items():
        for finding in findings:
            if finding.verdict in ("removed", "re-grounded", "flagged"):
                click.echo(f"{qid}: item {finding.item_id}: {finding.verdict}: {finding.detail}")
    click.echo(f"audited {len(report)} question(s); findings in {Path(folder) / 'rubrics'}/*.audit.json")


@author.command("review")
@click.argument("folder", metavar="DIR")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=7861, show_default=True)
def author_review(folder: str, host: str, port: int) -> None:
    """The review app: edit questions and checks (saved as you type), accept, reject or send back."""
    from gamut_hf.authoring.review import build_review_app

    if not (Path(folder) / "authoring.sqlite").is_file():
        raise BadInput(f"{folder}: no authoring workspace here (start with `gamut author propose`)")
    build_review_app(folder).launch(server_name=host, server_port=port)


@author.command("export")
@click.argument("folder", metavar="DIR")
@click.argument("out", metavar="OUT")
def author_export(folder: str, out: str) -> None:
    """Accepted questions as an annotation folder for `gamut build`."""
    from gamut_hf.authoring.pipeline import export
    from gamut_hf.authoring.store import AuthoringStore

    if not (Path(folder) / "authoring.sqlite").is_file():
        raise BadInput(f"{folder}: no authoring workspace here (start with `gamut author propose`)")
    with AuthoringStore(folder) as store:
        count = export(store, out)
    click.echo(f"exported {count} accepted question(s) to {out}")


COMMANDS = [author]
