"""`gamut build`, `stats`, `push` and `synthetic`: the dataset side."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from gamut_hf.cli.options import compile_options, compile_params, fail_lines

if TYPE_CHECKING:  # the pipeline pulls in datasets and tqdm: imported only by the commands using it
    pass


@click.command()
@click.argument("source", metavar="SOURCE")
@click.argument("out", metavar="OUT")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it already holds files.")
@click.option("--repo-id", default=None, help="Hub id the card's examples should name (e.g. you/gamut).")
@click.option("--pretty-name", default="GAMUT", show_default=True)
@click.option("--license", "license_", default="cc-by-nc-4.0", show_default=True, help="Licence in the card.")
@click.option("--extra-domain", "extra_domains", multiple=True, help="Accept a domain beyond the known list.")
@compile_options
def build(
    source: str,
    out: str,
    overwrite: bool,
    repo_id: str | None,
    pretty_name: str,
    license_: str,
    extra_domains: tuple[str, ...],
    **options: Any,
) -> None:
    """Build an annotation folder (questions.jsonl + images) into a hub-layout dataset folder.

    Everything is validated first; any problem is reported (all of them, one per line), the
    exit status is 2 and nothing is written.
    """
    from gamut_hf.dataset.annotations import AnnotationError
    from gamut_hf.dataset.build import build_dataset

    try:
        questions = build_dataset(
            source,
            out,
            compile_params=compile_params(options),
            overwrite=overwrite,
            pretty_name=pretty_name,
            license=license_,
            repo_id=repo_id,
            extra_domains=extra_domains,
        )
    except AnnotationError as error:
        fail_lines(
            [f"{error.source}/{problem}" for problem in error.problems]
            + [f"gamut build: {len(error.problems)} problem(s); nothing written"]
        )
    checks = sum(len(q.checks) for q in questions)
    click.echo(f"built {out}: {len(questions)} questions, {checks} checks, configurations multimodal and text_only")


@click.command()
@click.argument("dataset", metavar="[DATASET]", default="gamut-sample")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option("--revision", default=None, help="Hub revision (for a hub id).")
def stats(dataset: str, as_json: bool, revision: str | None) -> None:
    """Rubric statistics (the paper's table) of a built folder, annotation folder, hub id or the sample."""
    from gamut_hf.dataset.loader import iter_questions, load_gamut
    from gamut_hf.dataset.stats import RubricRecord, rubric_stats, stats_markdown

    data = load_gamut(dataset, "text_only", revision=revision)  # no images needed
    result = rubric_stats(RubricRecord(q.domain, q.meta_rubric, q.checks) for q in iter_questions(data, "text_only"))
    click.echo(result.model_dump_json(indent=2) if as_json else stats_markdown(result).rstrip())


@click.command()
@click.argument("folder", metavar="OUT")
@click.argument("repo_id", metavar="REPO_ID")
@click.option("--private", is_flag=True, help="Create the repository as private.")
@click.option("--revision", default=None, help="Branch to push to (default: main).")
def push(folder: str, repo_id: str, private: bool, revision: str | None) -> None:
    """Upload a folder made by `gamut build` to the hub as dataset REPO_ID (token from HF_TOKEN or login)."""
    from gamut_hf.dataset.hub import PushError, push_dataset

    try:
        url = push_dataset(folder, repo_id, private=private, revision=revision)
    except PushError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"pushed {folder} to {repo_id}: {url}")


@click.command()
@click.argument("out", metavar="OUT")
@click.option("--questions", type=click.IntRange(min=1), default=1813, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def synthetic(out: str, questions: int, seed: int) -> None:
    """Write a synthetic annotation folder with the paper's rubric statistics (for scale work)."""
    from gamut_hf.dataset.synthetic import SyntheticParams, write_synthetic

    params = SyntheticParams(questions=questions, seed=seed)
    write_synthetic(out, params)
    click.echo(f"wrote {out}: {questions} synthetic questions with {params.image_width}x{params.image_height} JPEGs")


@click.command()
@click.argument("source", metavar="SOURCE")
@click.argument("out", metavar="OUT")
@click.option(
    "--images",
    metavar="WHERE",
    required=True,
    help="Where the release's photos are: crag-mm (the hub dataset), crag-mm=PATH (a local copy) or a folder.",
)
@click.option("--fetch-image-urls", is_flag=True, help="Download the CRAG-MM photos it holds only as an image_url.")
@click.option(
    "--skip-missing-photos",
    is_flag=True,
    help="Leave the questions without a usable photo out of the multimodal configuration (named), instead of refusing.",
)
@click.option("--revision", default=None, help="Hub revision of SOURCE.")
def convert(
    source: str, out: str, images: str, fetch_image_urls: bool, skip_missing_photos: bool, revision: str | None
) -> None:
    """The official release's layout (SOURCE: facebook/GAMUT, or a folder in its layout) into gamut-hf's,
    in OUT: the typed columns, photos embedded, the meta-rubric empty (the release has none)."""
    from gamut_hf.dataset.convert import convert_release
    from gamut_hf.dataset.loader import image_resolver

    converted = convert_release(
        source,
        out,
        images=image_resolver(images, fetch_urls=fetch_image_urls),
        revision=revision,
        skip_missing_photos=skip_missing_photos,
    )
    for reason in converted.left_out:
        click.echo(f"left out of multimodal: {reason}", err=True)
    rows = converted.rows
    click.echo(
        f"converted {source} into {out}: multimodal {rows['multimodal']} questions, text_only {rows['text_only']}; "
        "no meta-rubric (the release publishes its checks compiled)"
    )


COMMANDS = [build, stats, push, synthetic, convert]
