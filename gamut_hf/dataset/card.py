"""The dataset card (README.md of a built dataset), rendered from the data itself.

The YAML header is made with huggingface_hub's ``DatasetCardData`` and datasets'
``DatasetInfosDict``, so ``configs:`` and ``dataset_info:`` are exactly what the hub and
``load_dataset`` expect; the body fills the package's ``card_template.md`` (package data, so an
installed gamut-hf builds datasets; ``dataset_card/template.md`` at the top of the repository is
a link to it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from importlib.resources import files
from string import Template

from datasets import Features
from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from huggingface_hub import DatasetCardData

from gamut_hf.core.compiler import CompileParams
from gamut_hf.core.names import VARIANTS, Variant
from gamut_hf.dataset.annotations import AnnotatedQuestion
from gamut_hf.dataset.features import (
    COLUMN_DESCRIPTIONS,
    COMMON_ITEM_FIELDS,
    OPTIONAL_PAYLOAD_FIELDS,
    PAYLOAD_FIELD_DESCRIPTIONS,
    PAYLOAD_FIELDS_BY_TYPE,
    RUBRIC_VERSION,
)
from gamut_hf.dataset.stats import RubricStats, stats_markdown

TEMPLATE = files("gamut_hf.dataset") / "card_template.md"
CARD_FILE = "README.md"
# Written into every card right after its YAML header (an HTML comment: the hub shows nothing).
# `gamut build --overwrite` replaces only a folder whose card carries it (build.check_output_folder).
BUILD_MARKER = "<!-- gamut-hf: this folder was written by `gamut build`; --overwrite may replace it -->"
# What the card's examples load when the build was given no --repo-id: never the build folder's own
# path, which means nothing on the hub or on another machine.
REPO_PLACEHOLDER = "<your-user>/<dataset>"


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return name
    return "100K<n<1M"


def card_metadata(
    pretty_name: str,
    features: Mapping[Variant, Features],
    rows: Mapping[Variant, int],
    sizes: Mapping[Variant, int],
    license: str,
) -> str:
    data = DatasetCardData(
        license=license,
        language="en",
        pretty_name=pretty_name,
        task_categories=["visual-question-answering", "question-answering"],
        size_categories=_size_category(max(rows.values())),
        tags=["factual-completeness", "rubric", "llm-as-a-judge", "long-form", "benchmark"],
        configs=[
            {
                "config_name": variant,
                "default": variant == "multimodal",
                "data_files": [{"split": "test", "path": f"{variant}/test-*.parquet"}],
            }
            for variant in VARIANTS
        ],
    )
    infos = DatasetInfosDict(
        {
            variant: DatasetInfo(
                features=features[variant],
                splits=SplitDict(
                    {"test": SplitInfo(name="test", num_bytes=sizes[variant], num_examples=rows[variant])}
                ),
                dataset_size=sizes[variant],
            )
            for variant in VARIANTS
        }
    )
    infos.to_dataset_card_data(data)
    return data.to_yaml()


def _md(text: str) -> str:
    """Text from the data, safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _example_items(question: AnnotatedQuestion) -> str:
    lines = []
    for item in question.meta_rubric.items:
        if item.type == "knowledge":
            payload = item.statement
        elif item.type == "strict_list":
            payload = "all of: " + "; ".join(item.elements)
        elif item.type == "flexible_list":
            payload = f"at least {item.threshold} of: " + "; ".join(item.options)
        elif item.type == "process":
            payload = " -> ".join(s.text + ("" if s.required else " (optional)") for s in item.steps)
        else:
            payload = f"{item.subject} {item.relation} {item.object}"
        insight = getattr(item, "meta_insight", None)
        lines.append(
            f"- `{item.id}` **{item.label}** ({item.tier}, {item.type}): {_md(payload)}"
            + (f" *Meta-insight:* {_md(insight)}" if insight else "")
        )
    return "\n".join(lines)


def _columns_table(features: Mapping[Variant, Features]) -> str:
    """Each column, which configurations carry it and what it means."""
    header = "| column | " + " | ".join(f"`{v}`" for v in VARIANTS) + " | meaning |"
    lines = [header, "|---|" + "---|" * len(VARIANTS) + "---|"]
    for name, meaning in COLUMN_DESCRIPTIONS.items():
        present = " | ".join("yes" if name in features[variant] else "**no**" for variant in VARIANTS)
        lines.append(f"| `{name}` | {present} | {meaning} |")
    return "\n".join(lines)


def _item_fields_table() -> str:
    """Which payload fields of a meta-rubric item struct apply to which item type."""
    lines = ["| item `type` | fields that apply (all other payload fields are null) |", "|---|---|"]
    for kind, fields in PAYLOAD_FIELDS_BY_TYPE.items():
        described = "; ".join(
            f"`{name}`{' (optional, may be null)' if name in OPTIONAL_PAYLOAD_FIELDS else ''}: "
            + PAYLOAD_FIELD_DESCRIPTIONS[name]
            for name in fields
        )
        lines.append(f"| `{kind}` | {described} |")
    return "\n".join(lines)


# What a card built without a hub id says above its examples; `gamut push` takes it out.
PLACEHOLDER_NOTE = (
    f"`gamut push OUT REPO_ID` writes the hub id in place of `{REPO_PLACEHOLDER}` in the card it uploads. "
    "Before it is pushed, the local build folder loads the "
    'same way: `load_dataset("path/to/OUT", "text_only", split="test")`.\n\n'
)


def _where_to_load(repo_id: str | None) -> tuple[str, str]:
    """The dataset id the card's examples load, and the sentence that introduces them."""
    if repo_id:
        return repo_id, ""
    return REPO_PLACEHOLDER, PLACEHOLDER_NOTE


def card_for_repo(card: str, repo_id: str) -> str:
    """The card as pushed to ``repo_id``: its examples load that id (a card built with a hub id is
    unchanged)."""
    return card.replace(PLACEHOLDER_NOTE, "").replace(REPO_PLACEHOLDER, repo_id)


def render_card(
    questions: list[AnnotatedQuestion],
    stats: RubricStats,
    *,
    features: Mapping[Variant, Features],
    sizes: Mapping[Variant, int],
    compile_params: CompileParams,
    pretty_name: str = "GAMUT",
    license: str = "cc-by-nc-4.0",
    repo_id: str | None = None,
) -> str:
    example = max(questions, key=lambda q: len({i.type for i in q.meta_rubric.items}))
    checks = "\n".join(f"- `{c.id}` ({c.tier}): {_md(c.text)}" for c in example.checks[:8])
    licences = Counter((q.image_license, q.image_source) for q in questions)
    licences_table = "| licence | source | questions |\n|---|---|---|\n" + "\n".join(
        f"| {_md(lic)} | {_md(src)} | {n} |" for (lic, src), n in sorted(licences.items())
    )
    domains_table = "| domain | questions |\n|---|---|\n" + "\n".join(
        f"| {_md(d)} | {n} |" for d, n in stats.domains.items()
    )
    params = ", ".join(f"`{k}={v}`" for k, v in compile_params.model_dump().items())
    load_id, load_note = _where_to_load(repo_id)
    body = Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        metadata=card_metadata(pretty_name, features, dict.fromkeys(VARIANTS, len(questions)), sizes, license),
        build_marker=BUILD_MARKER,
        pretty_name=pretty_name,
        questions=len(questions),
        domain_count=len(stats.domains),
        load_id=load_id,
        load_note=load_note,
        columns_table=_columns_table(features),
        common_item_fields=", ".join(f"`{name}`" for name in COMMON_ITEM_FIELDS),
        item_fields_table=_item_fields_table(),
        compile_params=params,
        rubric_version=RUBRIC_VERSION,
        edited_count=sum(q.checks_edited for q in questions),
        example_id=example.id,
        example_domain=example.domain,
        example_question=_md(example.question),
        example_text_question=_md(example.text_question),
        example_items=_example_items(example),
        example_checks=checks,
        stats_table=stats_markdown(stats),
        domains_table=domains_table,
        licences_table=licences_table,
    )
    return body
