"""The leaderboard Space: leaderboard, failure browser, analysis and judged submissions.

``build_app`` is the factory both ``gamut space`` (local result folders) and ``space/app.py``
(a Hugging Face Space, folders synced with the hub) call. Sign-in exists only inside a Space:
outside one, a ``gr.LoginButton`` needs a hub token to even build, so locally every
submission is made as the user "local".

Safety: every user-supplied string reaches the page either through a component that shows
text (Dataframe "str" cells, Textbox) or through ``html.escape`` (see failures.py); uploads
are parsed as JSON text, never executed or unpickled, and never name a path. Gradio's upload
route itself refuses a file over the limit while it streams in (``launch_options``).

The board ranks complete runs of one variant under one judge (multimodal and the primary judge
first); partial runs are listed apart, unranked. A result folder that cannot be read is left
out with its reason, shown under the board, and never stops the Space.

With a hub requests repository, the queue is read again on every queue refresh and before
every submission (a worker elsewhere changes it), and a request whose push failed is sent
again with the next push or refresh.
"""

from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr
import pandas as pd

from gamut_hf.core.names import DEFAULT_VARIANT, MODEL_ACCESS, MODEL_TYPES, VARIANTS
from gamut_hf.dataset.hub import HubFolder, PushError
from gamut_hf.evaluation.audit import FoundAudit, find_audits
from gamut_hf.evaluation.run_folder import RESULTS_FILE
from gamut_hf.leaderboard.entries import (
    LEADERBOARD_COLUMNS,
    Entry,
    is_partial,
    leaderboard_row,
    leaderboard_table,
    load_entry,
)
from gamut_hf.leaderboard.failures import (
    ANY,
    FailureIndex,
    QuestionInfo,
    dataset_questions,
)
from gamut_hf.leaderboard.queue import RequestQueue
from gamut_hf.leaderboard.submission import (
    MAX_UPLOAD_BYTES,
    SubmissionError,
    parse_submission,
)
from gamut_hf.reports.report import Figure, Report, Table, label_runs
from gamut_hf.reports.statistics import Bootstrap, run_summary

LOCAL_USER = "local"
DEFAULT_COLUMNS = [
    "rank",
    "model",
    "type",
    "size (B)",
    "variant",
    "judge",
    "Gamut",
    "Gamut 95% CI",
    "AC",
    "V",
    "Ctx",
    "% meets",
    "% missing",
    "% contra",
]
SIZE_BUCKETS = {"under 10B": (0, 10), "10B to 100B": (10, 100), "over 100B": (100, float("inf")), "unknown": None}


# Tables and figures the Analysis tab has room for, in report order (the breakdowns' tables are
# left to the report); enough for three boards, two judges' comparison and their audits.
ANALYSIS_SLOTS = 18


def launch_options() -> dict:
    """What every launch of the Space passes to ``launch``: gradio refuses a bigger upload itself,
    while it streams in, instead of saving it whole before the submission check sees it."""
    return {"max_file_size": MAX_UPLOAD_BYTES}


def in_space() -> bool:
    """Inside a Hugging Face Space with OAuth enabled (``hf_oauth: true``)."""
    return bool(os.environ.get("SPACE_ID") and os.environ.get("OAUTH_CLIENT_ID"))


@dataclass
class SpaceConfig:
    results: Path
    requests: Path
    dataset: str | None = "gamut-sample"
    login: bool = field(default_factory=in_space)
    resamples: int = 1000
    primary_judge: str | None = None  # the default board's judge; None: the judge of the most runs
    results_hub: HubFolder | None = None  # in a Space: the results dataset, pulled on refresh
    requests_hub: HubFolder | None = None  # in a Space: the requests dataset, pushed on submit


class SpaceData:
    """What the tabs show. A refresh loads only new or changed result folders (a worker finished a
    submission); the analysis report is rebuilt in the background, so no click waits for it."""

    def __init__(self, config: SpaceConfig):
        self.config = config
        self.questions: dict[str, QuestionInfo] = dataset_questions(config.dataset) if config.dataset else {}
        # folder name -> (mtime, entry, its run_summary): the intervals are the costly part, kept across refreshes
        self.loaded: dict[str, tuple[int, Entry, dict]] = {}
        self.entries: list[Entry] = []
        self.not_loaded: dict[str, str] = {}  # result folder -> why it is not on the board
        self.audits: list[FoundAudit] = []  # judge audits in the results folder
        self.board = leaderboard_table([])
        self.index: FailureIndex | None = None
        self.report: Report | None = None
        self.report_thread: threading.Thread | None = None
        self.refresh()

    def refresh(self) -> bool:
        """Take in result folders that appeared or changed since the last look; True when any did."""
        if self.config.results_hub is not None:
            try:
                self.config.results_hub.pull()
            except PushError as error:  # the hub is down: show what is already here
                print(f"gamut space: {error}; showing the local copy")
        self.audits = find_audits([self.config.results])  # a few small files: read on every look
        found = {p.parent.name: p.stat().st_mtime_ns for p in self.config.results.glob(f"*/{RESULTS_FILE}")}
        if found == {key: mtime for key, (mtime, _, _) in self.loaded.items()}:
            return False
        bootstrap = Bootstrap(resamples=self.config.resamples)
        loaded, not_loaded = {}, {}
        for key, mtime in sorted(found.items()):
            if key in self.loaded and self.loaded[key][0] == mtime:
                loaded[key] = self.loaded[key]
                continue
            try:
                entry = load_entry(self.config.results / key)
                if entry is None:
                    not_loaded[key] = "no score (the judge left checks unreadable or unjudged)"
                else:
                    loaded[key] = (mtime, entry, run_summary(entry.run.questions, bootstrap))
            except Exception as error:  # noqa: BLE001 - one unreadable folder must not take the board down
                # Named from the results folder: the server's own paths are not the visitor's business.
                reason = str(error).replace(f"{self.config.results / key}{os.sep}", "").splitlines()[0]
                not_loaded[key] = f"{type(error).__name__}: {reason}"
                print(f"gamut space: result folder {key} not loaded: {not_loaded[key]}")
        self.loaded = loaded
        # Folders that failed before and have not changed keep their reason without a second try.
        self.not_loaded = {
            **{k: why for k, why in self.not_loaded.items() if k in found and k not in loaded},
            **not_loaded,
        }
        self.entries = [entry for _, entry, _ in loaded.values()]
        # Labels depend on every entry (a backend is added where names collide): made afresh each time.
        label_runs([entry.run for entry in self.entries])
        size = len(self.questions) or None
        self.board = leaderboard_table(
            [leaderboard_row(entry, summary, is_partial(entry, size)) for _, entry, summary in loaded.values()]
        )
        self.index = FailureIndex(self.entries, self.questions) if self.entries else None
        self.report = None
        self.report_thread = threading.Thread(target=self._build_report, args=(list(self.entries),), daemon=True)
        self.report_thread.start()
        return True

    def _build_report(self, entries: list[Entry]) -> None:
        from gamut_hf.reports.report import build_report

        report = (
            build_report([e.run.folder for e in entries], Bootstrap(resamples=self.config.resamples))
            if entries
            else None
        )
        if entries == self.entries:  # not overtaken by a later refresh
            self.report = report

    def analysis(self):
        if self.report is None and self.report_thread is not None:
            self.report_thread.join()
        return self.report

    def judges(self) -> list[str]:
        return sorted(self.board["judge"].unique())

    def primary_judge(self) -> str | None:
        """The configured judge, else the one that judged the most runs (the paper's main judge
        grades both variants; others often one)."""
        judges = self.board["judge"].value_counts()
        if self.config.primary_judge in judges.index:
            return self.config.primary_judge
        return min(judges.index, key=lambda judge: (-judges[judge], judge)) if len(judges) else None

    def not_loaded_note(self) -> str:
        if not self.not_loaded:
            return ""
        return "**Not loaded** (fix or remove these result folders):\n" + "\n".join(
            f"- `{key}`: {why}" for key, why in sorted(self.not_loaded.items())
        )

    def audit_note(self, judge: str | None) -> str:
        """The audit(s) of the judge whose board is shown, or how to make one."""
        keys = {entry.run.judge_key for entry in self.entries if entry.run.judge == judge}
        if not keys:
            return ""
        lines = []
        for audit in self.audits:
            if audit.judge_key in keys:
                row = audit.row()
                flip = row["injection flip rate"]
                lines.append(
                    f"- `{row['audit']}` ({row['labels']}, {row['checks judged']} checks): kappa "
                    f"{row['kappa']:.3f}, accuracy {100 * row['accuracy']:.1f}%, Gamut error "
                    f"{row['Gamut MAE']:.1f} points, injection flip rate "
                    f"{'-' if flip is None else f'{100 * flip:.1f}%'}"
                )
        if not lines:
            return (
                f"**Judge audit**: none for {judge} in the results folder yet "
                "(`gamut judge-audit --out RESULTS/judge-audit-NAME`)."
            )
        return f"**Judge audit of {judge}** (its verdicts against known right verdicts):\n" + "\n".join(lines)

    def model_choices(self) -> list[tuple[str, str]]:
        return [(f"{row.model} · {row.variant} · judge {row.judge}", row.key) for row in self.board.itertuples()]


# -- leaderboard -----------------------------------------------------------------------------


def filter_board(
    board: pd.DataFrame, types: list[str], variant: str | None, judge: str | None, sizes: list[str], columns: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One variant under one judge: (complete runs, ranked best first; partial runs, unranked)."""
    mask = board["type"].isin(types) & (board["variant"] == variant) & (board["judge"] == judge)
    size = pd.to_numeric(board["size (B)"], errors="coerce")
    in_bucket = pd.Series(False, index=board.index)
    for bucket in sizes:
        bounds = SIZE_BUCKETS.get(bucket)
        in_bucket |= size.isna() if bounds is None else ((size >= bounds[0]) & (size < bounds[1]))
    shown = [c for c in LEADERBOARD_COLUMNS if c in columns or c == "model"]
    chosen = board[mask & in_bucket]
    partial = chosen["partial"].astype(bool)
    complete = chosen[~partial].reset_index(drop=True)
    ranked = complete[shown + ["key"]]
    if "rank" in columns:  # ties share a rank, counted within what is shown
        ranked.insert(0, "rank", complete["Gamut"].rank(method="min", ascending=False).astype(int))
    return ranked, chosen[partial][shown + ["key"]].reset_index(drop=True)


def _png(png: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(png))


def build_app(config: SpaceConfig) -> gr.Blocks:
    data = SpaceData(config)
    queue = RequestQueue(config.requests)
    known_ids = list(data.questions)

    with gr.Blocks(title="GAMUT leaderboard") as app:
        gr.Markdown(
            "# GAMUT: factual completeness of long answers\nScores are computed here from the judge's "
            "verdicts on every check; intervals are 95% bootstrap intervals over questions."
        )
        with gr.Tabs(selected="leaderboard") as tabs:
            # -- leaderboard --
            with gr.Tab("Leaderboard", id="leaderboard"):
                board = data.board
                with gr.Row():
                    variants = gr.Radio(
                        list(VARIANTS), value=DEFAULT_VARIANT, label="Variant", elem_id="filter-variant"
                    )
                    judges = gr.Radio(data.judges(), value=data.primary_judge(), label="Judge", elem_id="filter-judge")
                    types = gr.CheckboxGroup(
                        list(MODEL_TYPES), value=list(MODEL_TYPES), label="Model type", elem_id="filter-type"
                    )
                    sizes = gr.CheckboxGroup(
                        list(SIZE_BUCKETS), value=list(SIZE_BUCKETS), label="Size", elem_id="filter-size"
                    )
                columns = gr.CheckboxGroup(
                    ["rank", *LEADERBOARD_COLUMNS[1:]],
                    value=[c for c in DEFAULT_COLUMNS if c != "model"],
                    label="Columns",
                    elem_id="columns",
                )
                ranked, partial_runs = filter_board(
                    board, list(MODEL_TYPES), DEFAULT_VARIANT, data.primary_judge(), list(SIZE_BUCKETS), DEFAULT_COLUMNS
                )
                shown_keys = gr.State(list(ranked["key"]))
                table = gr.Dataframe(
                    ranked.drop(columns="key"),
                    show_search="search",
                    interactive=False,
                    elem_id="leaderboard-table",
                    pinned_columns=2,
                    wrap=True,
                )
                gr.Markdown(
                    "Complete runs of one variant under one judge, ranked by Gamut; pick another variant "
                    "or judge above. Click a model's row to browse its failures."
                )
                partial_keys = gr.State(list(partial_runs["key"]))
                partial_table = gr.Dataframe(
                    partial_runs.drop(columns="key"),
                    interactive=False,
                    elem_id="partial-table",
                    wrap=True,
                    label="Partial runs: fewer questions answered, so not ranked",
                )
                audit_note = gr.Markdown(data.audit_note(data.primary_judge()), elem_id="judge-audit")
                not_loaded = gr.Markdown(data.not_loaded_note(), elem_id="not-loaded")
                refresh = gr.Button("Refresh", elem_id="refresh", size="sm")

            # -- failures --
            with gr.Tab("Failures", id="failures"):
                index = data.index
                with gr.Row():
                    models = gr.Dropdown(
                        data.model_choices(),
                        value=list(ranked["key"][:1] if len(ranked) else board["key"][:1]),
                        multiselect=True,
                        max_choices=2,
                        label="Model (a second one shows side by side)",
                        elem_id="failure-models",
                    )
                    filters = {
                        name: gr.Dropdown(
                            [ANY, *(index.choices(name) if index else [])],
                            value=ANY,
                            label=name.replace("_", " "),
                            elem_id=f"failure-{name}",
                        )
                        for name in ("domain", "tier", "verdict", "item_type")
                    }
                count = gr.Markdown(elem_id="failure-count")
                questions = gr.Dataframe(interactive=False, elem_id="failure-questions", max_height=300)
                question_id = gr.Textbox(label="Question id", elem_id="question-id")
                with gr.Row():
                    image = gr.Image(label="Image", height=280, elem_id="question-image", interactive=False)
                    header = gr.HTML(elem_id="question-header")
                with gr.Row():
                    left = gr.HTML(elem_id="answer-left")
                    right = gr.HTML(elem_id="answer-right")

            # -- analysis --
            with gr.Tab("Analysis", id="analysis") as analysis_tab:
                analysis_note = gr.Markdown("Open this tab to build the analysis.", elem_id="analysis-note")
                analysis_blocks = []
                for _ in range(ANALYSIS_SLOTS):
                    with gr.Column(visible=False) as column:
                        title = gr.Markdown()
                        figure = gr.Image(interactive=False, show_label=False)
                        frame = gr.Dataframe(interactive=False)
                    analysis_blocks.append((column, title, figure, frame))

            # -- submit --
            with gr.Tab("Submit", id="submit"):
                gr.Markdown(
                    f'Upload your model\'s responses as JSONL, one `{{"question_id": ..., "response": ...}}` '
                    f"per line (at most {MAX_UPLOAD_BYTES // 2**20} MiB). A worker judges them with the "
                    "leaderboard's judge; self-reported scores are not accepted. One submission waiting per "
                    "user, three a day."
                )
                if config.login:
                    gr.LoginButton()
                upload = gr.File(label="responses.jsonl", file_types=[".jsonl"], type="filepath", elem_id="upload")
                with gr.Row():
                    name = gr.Textbox(label="Model name", placeholder="org/model-name", elem_id="model-name")
                    link = gr.Textbox(label="Link (https)", elem_id="model-link")
                    access = gr.Radio(list(MODEL_ACCESS), value="open", label="Type", elem_id="model-access")
                    parameters = gr.Number(label="Parameters (billions)", value=None, elem_id="model-params")
                    variant = gr.Radio(list(VARIANTS), value="multimodal", label="Variant", elem_id="model-variant")
                partial = gr.Checkbox(label="Partial submission (not every question answered)", elem_id="partial")
                send = gr.Button("Submit", variant="primary", elem_id="send")
                status = gr.Textbox(label="Result", interactive=False, lines=4, elem_id="submit-status")
                requests_table = gr.Dataframe(interactive=False, elem_id="requests-table", label="Queue")
                requests_refresh = gr.Button("Refresh queue", size="sm", elem_id="requests-refresh")

        # -- behaviour --
        def show_board(types_, variant_, judge_, sizes_, columns_):
            ranked_, partial_ = filter_board(data.board, types_, variant_, judge_, sizes_, ["model", *columns_])
            return (
                ranked_.drop(columns="key"),
                list(ranked_["key"]),
                partial_.drop(columns="key"),
                list(partial_["key"]),
                data.audit_note(judge_),
            )

        board_inputs = [types, variants, judges, sizes, columns]
        board_outputs = [table, shown_keys, partial_table, partial_keys, audit_note]
        for control in board_inputs:
            control.input(show_board, board_inputs, board_outputs, api_name=False)

        def refresh_board(types_, variant_, judge_, sizes_, columns_):
            data.refresh()
            if judge_ not in data.judges():  # none yet, or its runs are gone: the primary judge
                judge_ = data.primary_judge()
            return (
                *show_board(types_, variant_, judge_, sizes_, columns_),
                gr.Dropdown(choices=data.model_choices()),
                gr.Radio(choices=data.judges(), value=judge_),
                data.not_loaded_note(),
            )

        refresh.click(refresh_board, board_inputs, [*board_outputs, models, judges, not_loaded], api_name="refresh")

        def open_failures(keys: list[str], event: gr.SelectData):
            key = keys[event.index[0]] if event.index and event.index[0] < len(keys) else None
            if key is None:
                return gr.Tabs(), gr.Dropdown()
            return gr.Tabs(selected="failures"), gr.Dropdown(value=[key])

        def list_questions(keys, domain, tier, verdict, item_type):
            if data.index is None or not keys:
                return pd.DataFrame(), "No model chosen."
            found, total = data.index.questions(
                list(keys), domain=domain, tier=tier, verdict=verdict, item_type=item_type
            )
            shown = (
                f"{total} questions match; the {len(found)} worst first."
                if total > len(found)
                else f"{total} questions match, worst first."
            )
            return found, shown

        failure_inputs = [models, *filters.values()]
        for control in failure_inputs:
            control.input(list_questions, failure_inputs, [questions, count], api_name=False)
        app.load(list_questions, failure_inputs, [questions, count], api_name=False)

        def pick_question(frame: pd.DataFrame, event: gr.SelectData):
            return str(frame.iloc[event.index[0]]["question"]) if event.index else ""

        def show_question(qid: str, keys: list[str]):
            qid = (qid or "").strip()
            if data.index is None or not qid:
                return None, "", "", ""
            if qid not in data.index.by_question:
                return None, "<p>No such question.</p>", "", ""
            keys = list(keys or [])
            views = [data.index.answer_html(qid, key) for key in keys[:2]]
            return (
                data.index.image(qid),
                data.index.question_header(qid),
                views[0] if views else "",
                views[1] if len(views) > 1 else "",
            )

        # Programmatic updates chain with .then; only a person's input starts an event (.input, .submit,
        # .select), so no update can set off another (a Dropdown updated from the server re-fires .change).
        question_view = [image, header, left, right]
        question_id.submit(show_question, [question_id, models], question_view, api_name="question")
        models.input(show_question, [question_id, models], question_view, api_name=False)
        questions.select(pick_question, [questions], [question_id], api_name=False).then(
            show_question, [question_id, models], question_view, api_name=False
        )
        for frame, keys in ((table, shown_keys), (partial_table, partial_keys)):
            frame.select(open_failures, [keys], [tabs, models], api_name=False).then(
                list_questions, failure_inputs, [questions, count], api_name=False
            ).then(show_question, [question_id, models], question_view, api_name=False)
        # The question list as a named endpoint, for scripted clients (and the tests).
        api_questions = gr.Button(visible=False)
        api_questions.click(list_questions, failure_inputs, [questions, count], api_name="questions")

        def fill_analysis():
            report = data.analysis()
            updates = []
            blocks = []
            if report is not None:
                for section in report.included[1:]:  # the runs table is the leaderboard here
                    for block in section.blocks:
                        if isinstance(block, Figure):
                            blocks.append((f"**{section.title}**: {block.caption}", _png(block.png), None))
                        elif isinstance(block, Table) and section.title != "Breakdowns":
                            blocks.append((f"**{section.title}**: {block.title}", None, block.shown))
            blocks = blocks[: len(analysis_blocks)]
            for i in range(len(analysis_blocks)):
                if i < len(blocks):
                    text, png, frame = blocks[i]
                    updates += [
                        gr.Column(visible=True),
                        text,
                        gr.Image(value=png, visible=png is not None),
                        gr.Dataframe(value=frame, visible=frame is not None),
                    ]
                else:
                    updates += [gr.Column(visible=False), "", gr.Image(value=None), gr.Dataframe(value=None)]
            note = "Analysis of the runs on the leaderboard (`gamut report` gives the whole report)."
            if report is not None:
                claims = next(s for s in report.sections if s.title.startswith("The paper's claims"))
                note += "\n\n" + "\n".join(
                    f"- {line}" for block in claims.blocks if isinstance(block, list) for line in block
                )
                omitted = [f"- {s.title}: {s.omitted}" for s in report.sections if s.omitted]
                note += "\n\nLeft out:\n" + "\n".join(omitted) if omitted else ""
            return [note, *updates]

        analysis_outputs = [analysis_note] + [c for block in analysis_blocks for c in block]
        analysis_tab.select(fill_analysis, None, analysis_outputs, api_name="analysis")

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
            return pd.DataFrame(rows, columns=["model", "variant", "status", "submitted", "by", "reason"])

        def submit_as(user: str, path, name_, link_, access_, parameters_, variant_, partial_):
            if not path:
                return "Refused: choose a responses.jsonl file first.", queue_rows()
            size = os.path.getsize(path)
            if size > MAX_UPLOAD_BYTES:
                return f"Refused: the file is {size:,} bytes; the limit is {MAX_UPLOAD_BYTES:,}.", queue_rows()
            if not known_ids:
                return "Refused: this Space has no dataset to check submissions against.", queue_rows()
            stale = sync_queue()  # "already waiting" and "already on the board" are judged on the queue as it is now
            # An empty Number field arrives as 0: "not given".
            card = {
                "name": name_,
                "link": link_ or None,
                "access": access_,
                "parameters_billions": parameters_ or None,
                "variant": variant_,
            }
            try:
                with open(path, "rb") as handle:
                    submission = parse_submission(handle.read(), card, known_ids, partial=bool(partial_))
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

        submit_inputs = [upload, name, link, access, parameters, variant, partial]
        if config.login:

            def submit(path, name_, link_, access_, parameters_, variant_, partial_, profile: gr.OAuthProfile | None):
                if profile is None:
                    return "Refused: sign in with Hugging Face first.", queue_rows()
                return submit_as(profile.username, path, name_, link_, access_, parameters_, variant_, partial_)
        else:

            def submit(path, name_, link_, access_, parameters_, variant_, partial_):
                return submit_as(LOCAL_USER, path, name_, link_, access_, parameters_, variant_, partial_)

        send.click(submit, submit_inputs, [status, requests_table], api_name="submit")
        requests_refresh.click(queue_table, None, requests_table, api_name="queue")
        app.load(queue_table, None, requests_table, api_name=False)
    return app
