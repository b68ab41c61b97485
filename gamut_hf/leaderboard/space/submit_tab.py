"""The Submit tab: an upload of responses checked against the dataset and queued for a worker
(signed in with Hugging Face inside a Space, as "local" outside one), and the queue itself."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from gamut_hf.core.names import MODEL_ACCESS, VARIANTS
from gamut_hf.dataset.hub import PushError
from gamut_hf.evaluation.config import DEFAULT_MAX_TOKENS
from gamut_hf.leaderboard.space.data import LOCAL_USER
from gamut_hf.leaderboard.submission import MAX_UPLOAD_BYTES, SubmissionError, parse_submission

if TYPE_CHECKING:
    from gamut_hf.leaderboard.space.app import SpaceUI


@dataclass
class SubmitTab:
    inputs: list[Any]  # upload, name, link, access, parameters, variant, partial
    send: Any
    status: Any
    queue_note: Any  # above the queue: how many requests, or that there is none
    requests_table: Any
    requests_refresh: Any


def layout(ui: SpaceUI, tab: Any) -> None:
    gr.Markdown(
        f'Upload your model\'s responses as JSONL, one `{{"question_id": ..., "response": ...}}` '
        f"per line (at most {MAX_UPLOAD_BYTES // 2**20} MiB). A worker judges them with the "
        "leaderboard's judge; self-reported scores are not accepted. One submission waiting per "
        "user, three a day.\n\n"
        "**Generate with the leaderboard's prompt**: the question alone as the user's message (with "
        "the photo for the multimodal variant; `text_question` for text_only), no system prompt, "
        f"greedy, at most {DEFAULT_MAX_TOKENS:,} new tokens by default; only the answer, never a "
        "reasoning trace. `gamut generate --out runs/mine --model M ...` does exactly that, and "
        "`gamut submission runs/mine responses.jsonl` writes this file (and names the variant to choose)."
    )
    if ui.config.login:
        gr.LoginButton()
    upload = gr.File(label="responses.jsonl", file_types=[".jsonl"], type="filepath", elem_id="upload")
    with gr.Row():
        name = gr.Textbox(label="Model name", placeholder="org/model-name", elem_id="model-name")
        link = gr.Textbox(label="Link (https)", elem_id="model-link")
        access = gr.Radio(list(MODEL_ACCESS), value="open", label="Type", elem_id="model-access")
        # Text, not a Number: gradio sends an empty Number as 0, which is no model's size.
        parameters = gr.Textbox(
            label="Parameters (billions)", placeholder="e.g. 7; empty if unknown", elem_id="model-params"
        )
        variant = gr.Radio(list(VARIANTS), value="multimodal", label="Variant", elem_id="model-variant")
    partial = gr.Checkbox(label="Partial submission (not every question answered)", elem_id="partial")
    send = gr.Button("Submit", variant="primary", elem_id="send")
    status = gr.Textbox(label="Result", interactive=False, lines=4, elem_id="submit-status")
    queue_note = gr.Markdown("**Queue**", elem_id="queue-note")
    requests_table = gr.Dataframe(interactive=False, elem_id="requests-table", label="Queue", visible=False)
    requests_refresh = gr.Button("Refresh queue", size="sm", elem_id="requests-refresh")
    ui.submit = SubmitTab(
        [upload, name, link, access, parameters, variant, partial],
        send,
        status,
        queue_note,
        requests_table,
        requests_refresh,
    )


def wire(ui: SpaceUI) -> None:
    config, queue, submit_tab = ui.config, ui.queue, ui.submit

    def sync_queue() -> str:
        """Send what an earlier push left behind, then read the queue as the workers left it; a
        note for the submitter when the hub cannot be reached."""
        hub = config.requests_hub
        if hub is None:
            return ""
        try:
            if hub.unpushed:
                hub.push([], "requests not sent before")
            hub.pull()
        except PushError as error:
            print(f"gamut space: {error}; showing the local copy of the queue")
            return f" (The hub cannot be reached, so the queue shown may be out of date: {error})"
        return ""

    def queue_table():
        sync_queue()
        return queue_rows()

    def queue_rows():
        rows = [
            {
                "model": r.model.name,
                "variant": r.model.variant,
                "status": r.status,
                "submitted": r.submitted_at.strftime("%Y-%m-%d %H:%M"),
                "by": r.submitted_by,
                "reason": r.reason or "",
            }
            for r in sorted(queue.records(), key=lambda r: r.submitted_at, reverse=True)
        ]
        # A request file that cannot be read is skipped by every worker; shown so it gets fixed or removed.
        rows += [
            {"model": name, "variant": "", "status": "UNREADABLE", "submitted": "", "by": "", "reason": why}
            for name, why in sorted(queue.unreadable.items())
        ]
        return pd.DataFrame(rows, columns=["model", "variant", "status", "submitted", "by", "reason"])

    def submit_as(user: str, path, name_, link_, access_, parameters_, variant_, partial_):
        if not path:
            return "Refused: choose a responses.jsonl file first.", queue_rows()
        size = os.path.getsize(path)
        if size > MAX_UPLOAD_BYTES:
            return f"Refused: the file is {size:,} bytes; the limit is {MAX_UPLOAD_BYTES:,}.", queue_rows()
        if not ui.known_ids:
            return "Refused: this Space has no dataset to check submissions against.", queue_rows()
        stale = sync_queue()  # "already waiting" and "already on the board" are judged on the queue as it is now
        card = {
            "name": name_,
            "link": link_ or None,
            "access": access_,
            "parameters_billions": str(parameters_).strip() or None if parameters_ is not None else None,
            "variant": variant_,
        }
        try:
            with open(path, "rb") as handle:
                submission = parse_submission(handle.read(), card, ui.known_ids, partial=bool(partial_))
            record = queue.submit(submission, user)
        except SubmissionError as error:
            return "Refused:\n" + "\n".join(error.problems), queue_rows()
        accepted = (
            f"Accepted: {record.model.name} ({record.model.variant}), {record.questions} answers, "
            f"queued as PENDING.{stale}"
        )
        if config.requests_hub is not None:
            try:
                config.requests_hub.push(queue.files(record.key), f"submit {record.key}")
            except PushError as error:  # HubFolder keeps the files and sends them with its next push
                accepted += (
                    f" It is stored here, but sending it to the hub failed ({error}); it is sent again "
                    "with the next submission or queue refresh."
                )
        return accepted, queue_rows()

    if config.login:

        def submit(path, name_, link_, access_, parameters_, variant_, partial_, profile: gr.OAuthProfile | None):
            if profile is None:
                return "Refused: sign in with Hugging Face first.", queue_rows()
            return submit_as(profile.username, path, name_, link_, access_, parameters_, variant_, partial_)
    else:

        def submit(path, name_, link_, access_, parameters_, variant_, partial_):
            return submit_as(LOCAL_USER, path, name_, link_, access_, parameters_, variant_, partial_)

    def describe_queue(rows: pd.DataFrame):
        """The line above the queue, and the table hidden while it has no request."""
        if rows is None or rows.empty:
            return "**Queue**: no submission yet.", gr.Dataframe(visible=False)
        return f"**Queue**: {len(rows)} request{'s' * (len(rows) != 1)}, newest first.", gr.Dataframe(visible=True)

    described = [submit_tab.queue_note, submit_tab.requests_table]
    outputs = [submit_tab.status, submit_tab.requests_table]
    submit_tab.send.click(submit, submit_tab.inputs, outputs, api_name="submit").then(
        describe_queue, submit_tab.requests_table, described, api_name=False
    )
    submit_tab.requests_refresh.click(queue_table, None, submit_tab.requests_table, api_name="queue").then(
        describe_queue, submit_tab.requests_table, described, api_name=False
    )
    ui.app.load(queue_table, None, submit_tab.requests_table, api_name=False).then(
        describe_queue, submit_tab.requests_table, described, api_name=False
    )
