"""`gamut author review`: the annotators' Gradio app over an authoring workspace.

The annotator sees the image, the question, the meta-rubric as a scaffold (items with their
compiled checks nested under them) and the binary rubric as an editable table; edits the
question and the checks; accepts, rejects or sends back for rework. Every change is written to
the workspace's SQLite store as it is made (no save button: a crash or a closed tab loses
nothing), with who and when in the audit trail; consecutive keystrokes in one field coalesce
into one trail entry. The diff between the compiled and the edited binary rubric is shown
beside the table. Export writes the accepted questions as an annotation folder under the
workspace's ``exports/`` (only there: the app is a server, and a typed path must not pick where it writes).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import gradio as gr
import pandas as pd

from gamut_hf.authoring.pipeline import export
from gamut_hf.authoring.store import AuthoringStore
from gamut_hf.core.compiler import compile_rubric
from gamut_hf.core.rubric import RubricError, parse_checks, parse_meta_rubric
from gamut_hf.files import InputError

CHECK_COLUMNS = ["id", "item_id", "kind", "tier", "text"]


def compiled_checks(meta_rubric: dict | None, question_id: str) -> list[dict]:
    if not meta_rubric:
        return []
    rubric = parse_meta_rubric({**meta_rubric, "question_id": question_id}, question_id=question_id)
    return [c.model_dump() for c in compile_rubric(rubric)]


def scaffold_html(meta_rubric: dict | None, checks: list[dict]) -> str:
    """Items with the checks that compile from them nested underneath, everything escaped."""
    if not meta_rubric:
        return "<p><em>No meta-rubric yet (draft it with `gamut author draft`).</em></p>"
    parts = []
    for item in meta_rubric.get("items", []):
        title = " · ".join(html.escape(str(item.get(k, ""))) for k in ("id", "type", "tier", "label"))
        cited = len(item.get("evidence", []))
        parts.append(f"<div class='item'><strong>{title}</strong> <small>({cited} snippet(s))</small><ul>")
        for check in checks:
            if check["item_id"] == item.get("id"):
                parts.append(
                    f"<li><code>{html.escape(check['id'])}</code> <small>{html.escape(check['tier'])}</small> "
                    f"{html.escape(check['text'])}</li>"
                )
        parts.append("</ul></div>")
    return "".join(parts)


def diff_table(compiled: list[dict], edited: list[dict] | None) -> pd.DataFrame:
    """Every human edit of the binary rubric: checks added, removed or changed against the compiled one."""
    rows = []
    if edited is not None:
        before = {c["id"]: c for c in compiled}
        after = {c["id"]: c for c in edited}
        for cid, check in before.items():
            if cid not in after:
                rows.append({"change": "removed", "id": cid, "compiled": check["text"], "edited": ""})
            elif after[cid] != check:
                fields = [f for f in CHECK_COLUMNS if after[cid].get(f) != check.get(f)]
                rows.append(
                    {
                        "change": "changed " + ", ".join(fields),
                        "id": cid,
                        "compiled": check["text"],
                        "edited": after[cid]["text"],
                    }
                )
        for cid, check in after.items():
            if cid not in before:
                rows.append({"change": "added", "id": cid, "compiled": "", "edited": check["text"]})
    return pd.DataFrame(rows, columns=["change", "id", "compiled", "edited"])


EXPORTS = "exports"
EXPORT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def export_target(folder: str | Path, name: str) -> Path:
    """The folder an export from the app goes to: ``DIR/exports/NAME``, never elsewhere.

    The app is a server: a path typed into it must not choose where on the server files are
    written, so only a plain name is taken (no separators, no ``..``, no hidden names).
    """
    name = (name or "").strip()
    if not EXPORT_NAME.fullmatch(name) or ".." in name:
        raise InputError(
            f"export name {name[:100]!r}: use a plain folder name (letters, digits, . _ -), "
            f"created under {Path(folder) / EXPORTS}"
        )
    return Path(folder) / EXPORTS / name


def build_review_app(folder: str | Path) -> gr.Blocks:
    store = AuthoringStore(folder)

    def choices() -> list[tuple[str, str]]:
        return [(f"{q.id} · {q.stage} · {q.status}", q.id) for q in store.questions()]

    def view(question_id: str | None):
        q = store.question(question_id) if question_id else None
        if q is None:
            return None, "", "", "", pd.DataFrame(columns=CHECK_COLUMNS), pd.DataFrame(), "", pd.DataFrame(), ""
        compiled = compiled_checks(q.meta_rubric, q.id)
        checks = q.binary_rubric if q.binary_rubric is not None else compiled
        trail = pd.DataFrame(store.edits(q.id), columns=["seq", "question_id", "who", "at", "field", "before", "after"])
        image = str(store.folder / "images" / q.image)
        return (
            image,
            q.question,
            q.text_question,
            scaffold_html(q.meta_rubric, compiled),
            pd.DataFrame(checks, columns=CHECK_COLUMNS),
            diff_table(compiled, q.binary_rubric),
            notes_html(q.id),
            trail.drop(columns="question_id"),
            "",
        )

    def notes_html(question_id: str) -> str:
        q = store.question(question_id)
        audit = store.audit(question_id)
        findings = "".join(
            f"<li><code>{html.escape(f['item_id'])}</code> {html.escape(f['verdict'])}: {html.escape(f['detail'])}</li>"
            for f in (audit or {}).get("items", [])
        )
        assert q is not None  # the question list shows only stored questions
        return (
            f"<p>Stage <b>{html.escape(q.stage)}</b>, review <b>{html.escape(q.status)}</b>, "
            f"{len(store.rounds(question_id))} drafting round(s).</p>"
            + (f"<p>Self-refinement audit:</p><ul>{findings}</ul>" if findings else "")
        )

    def who_or_refuse(annotator: str) -> str | None:
        name = (annotator or "").strip()
        return name or None

    with gr.Blocks(title="GAMUT review") as app:
        gr.Markdown("# GAMUT rubric review\nEvery edit is saved as you make it, with your name and the time.")
        with gr.Row():
            annotator = gr.Textbox(label="Your name (recorded with every edit)", elem_id="annotator")
            question_id = gr.Dropdown(choices(), label="Question", elem_id="review-question")
        message = gr.Textbox(label="Status", interactive=False, elem_id="review-message")
        with gr.Row():
            image = gr.Image(label="Image", interactive=False, height=300, elem_id="review-image")
            with gr.Column():
                question = gr.Textbox(
                    label="Question (generic reference to the pictured subject)", elem_id="review-question-text"
                )
                text_question = gr.Textbox(label="Text-only question (subject named)", elem_id="review-text-question")
                notes = gr.HTML(elem_id="review-notes")
        with gr.Row():
            accept = gr.Button("Accept", variant="primary", elem_id="accept")
            rework = gr.Button("Send back for rework", elem_id="rework")
            reject = gr.Button("Reject", variant="stop", elem_id="reject")
        with gr.Row():
            scaffold = gr.HTML(elem_id="scaffold")
            with gr.Column():
                checks = gr.Dataframe(
                    headers=CHECK_COLUMNS,
                    interactive=True,
                    elem_id="checks",
                    wrap=True,
                    label="Binary rubric (edit cells; add or remove rows)",
                )
                diff = gr.Dataframe(interactive=False, elem_id="diff", label="Edits against the compiled rubric")
        trail = gr.Dataframe(interactive=False, elem_id="trail", label="Audit trail")
        with gr.Row():
            export_to = gr.Textbox(
                label=f"Export as (a folder under {Path(folder) / EXPORTS})", value="annotations", elem_id="export-to"
            )
            export_button = gr.Button("Export accepted questions", elem_id="export")

        shown = [image, question, text_question, scaffold, checks, diff, notes, trail, message]
        question_id.input(view, question_id, shown, api_name="view")

        def save_text(field: str):
            def save(annotator_: str, qid: str, value: str):
                who = who_or_refuse(annotator_)
                if not qid:
                    return "Choose a question first."
                if who is None:
                    return "Not saved: enter your name first."
                store.edit(qid, who, field, value)
                return f"Saved {field.replace('_', ' ')} ({who})."

            return save

        question.input(
            save_text("question"),
            [annotator, question_id, question],
            message,
            api_name="edit_question",
            trigger_mode="always_last",
        )
        text_question.input(
            save_text("text_question"),
            [annotator, question_id, text_question],
            message,
            api_name="edit_text_question",
            trigger_mode="always_last",
        )

        def save_checks(annotator_: str, qid: str, table: pd.DataFrame):
            who = who_or_refuse(annotator_)
            if not qid:
                return "Choose a question first.", gr.Dataframe()
            if who is None:
                return "Not saved: enter your name first.", gr.Dataframe()
            rows = [
                {c: str(v).strip() for c, v in row.items()}
                for row in table.fillna("").to_dict("records")
                if any(str(v).strip() for v in row.values())
            ]
            try:
                edited = [c.model_dump() for c in parse_checks(rows, question_id=qid)]
            except RubricError as error:
                return "Not saved: " + "; ".join(str(p) for p in error.problems), gr.Dataframe()
            store.edit(qid, who, "binary_rubric", edited)
            q = store.question(qid)
            assert q is not None  # just saved
            return f"Saved the binary rubric ({len(edited)} checks, {who}).", diff_table(
                compiled_checks(q.meta_rubric, qid), q.binary_rubric
            )

        checks.input(
            save_checks,
            [annotator, question_id, checks],
            [message, diff],
            api_name="edit_checks",
            trigger_mode="always_last",
        )

        def set_status(status: str):
            def decide(annotator_: str, qid: str):
                who = who_or_refuse(annotator_)
                if not qid or who is None:
                    return "Choose a question and enter your name first.", gr.Dropdown(), gr.Dataframe(), gr.HTML()
                store.edit(qid, who, "status", status)
                trail_rows = pd.DataFrame(store.edits(qid)).drop(columns="question_id")
                return (
                    f"{qid}: {status} ({who}).",
                    gr.Dropdown(choices=choices(), value=qid),
                    trail_rows,
                    notes_html(qid),
                )

            return decide

        for button, status in ((accept, "accepted"), (rework, "rework"), (reject, "rejected")):
            button.click(
                set_status(status), [annotator, question_id], [message, question_id, trail, notes], api_name=status
            )

        def do_export(name: str):
            try:
                target = export_target(folder, name)
                count = export(store, target)
            except InputError as error:
                return f"Not exported: {error}"
            return f"Exported {count} accepted question(s) to {target}; build it with `gamut build {target} OUT`."

        export_button.click(do_export, export_to, message, api_name="export")
    return app
