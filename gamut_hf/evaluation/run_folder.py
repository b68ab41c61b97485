"""A run folder's outputs: the one place that names, writes and reads them back.

A scored run is three files: ``details.parquet`` (one row per check), ``responses.parquet``
(the answer to each question) and ``results.json`` (the run's figures). ``results.json`` is
written last and doubles as the manifest: it records the size and sha256 of the two tables
it was scored with. A reader verifies each table it reads against that record, so a folder
whose writer was killed between two files (new tables beside the old results.json), or whose
files were changed by hand, is refused with one line instead of being read as a mix. Every
file is read under the input rules of :mod:`gamut_hf.files` (a regular file, capped): a FIFO or
a device in a run folder is refused, not read.
Every file goes in through :mod:`gamut_hf.atomic` (temporary file, fsync, rename).

The run store (``store.sqlite``) lives in the same folder but belongs to :mod:`gamut_hf.evaluation.store`;
a result folder on the leaderboard has the three outputs and no store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from gamut_hf import atomic
from gamut_hf.core.scorer import DEFAULT_SCORE_PARAMS, RunScore, ScoreParams
from gamut_hf.errors import first_problem
from gamut_hf.evaluation.panel import PanelSummary
from gamut_hf.evaluation.prices import StageCost
from gamut_hf.evaluation.store import STORE_FILES
from gamut_hf.files import MAX_JSON_BYTES, InputError, decode_text, parse_json, read_bytes

if TYPE_CHECKING:
    import pyarrow as pa

    from gamut_hf.backends.base import Completion

RESULTS_FILE = "results.json"
DETAILS_FILE = "details.parquet"
RESPONSES_FILE = "responses.parquet"
# The store and the three outputs: all a run folder is made of.
RUN_FOLDER_FILES = (*STORE_FILES, RESULTS_FILE, DETAILS_FILE, RESPONSES_FILE)
# A table is read whole to verify its digest; far above a full run's (1,813 questions x 15 checks).
MAX_TABLE_BYTES = 2 * 1024 * 1024 * 1024


class RunFolderError(InputError):
    """A run folder that is missing or cannot be read as one consistent run."""


class StageReport(BaseModel):
    """What one stage did; printed at its end and kept in results.json."""

    stage: str
    done_before: int = 0
    done_now: int = 0
    failed: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # Why a request failed, for the command's last word when all did; not written to results.json
    # (an endpoint's error names its address, which may carry credentials).
    first_error: str | None = Field(None, exclude=True)

    def add(self, completions: Sequence[Completion]) -> None:
        if self.first_error is None:
            self.first_error = next((c.error for c in completions if c.error is not None), None)
        self.prompt_tokens += sum(c.prompt_tokens for c in completions)
        self.completion_tokens += sum(c.completion_tokens for c in completions)
        self.cached_tokens += sum(c.cached_tokens or 0 for c in completions)

    def line(self, unit: str) -> str:
        rate = self.done_now / self.seconds if self.seconds else 0.0
        text = (
            f"{self.stage}: {self.done_now} {unit} in {self.seconds:.1f} s ({rate:.2f}/s), "
            f"{self.done_before} already stored"
        )
        if self.seconds and self.prompt_tokens:
            text += f", {self.prompt_tokens / self.seconds:.0f} prompt tok/s"
        if self.prompt_tokens and self.cached_tokens:
            text += f", prefix cache {100 * self.cached_tokens / self.prompt_tokens:.0f}% of prompt tokens"
        if self.failed:
            text += f", {self.failed} failed (rerun to retry)"
        return text


def unclosed_line(count: int) -> str:
    """What a run says of answers left empty by a reasoning that never closed."""
    return f"{count} answer{'s' if count != 1 else ''} empty: reasoning cut by max_tokens (raise --max-tokens)"


class FileDigest(BaseModel):
    """What results.json records of a table it was written with."""

    size: int
    sha256: str

    @classmethod
    def of(cls, data: bytes) -> FileDigest:
        return cls(size=len(data), sha256=hashlib.sha256(data).hexdigest())


class EscalationSummary(BaseModel):
    """results.json's escalation: the checks the first judge was unsure of, asked again."""

    judge: dict[str, Any]  # the second judge's fingerprint
    below: float
    escalated: int  # checks whose first verdict was under ``below`` (or unreadable)
    answered: int  # of these, those the second judge has answered: its verdict is the one scored
    checks: int  # checks the first judge was asked


class RunResults(BaseModel):
    """results.json: one run, one candidate, one judge, and the tables it was scored with."""

    model: dict[str, Any]
    judge: dict[str, Any]
    dataset: dict[str, Any]
    variant: str
    prompt_versions: dict[str, str]
    score: RunScore
    # What the score was computed with: every reader rescoring details.parquet uses the same.
    score_params: ScoreParams = DEFAULT_SCORE_PARAMS
    judge_errors: int
    unfinished_checks: int
    # Answers left empty because the candidate's reasoning never closed (cut by max_tokens);
    # judged like any empty answer. Absent (0) in folders written before it was counted.
    unclosed_reasoning: int = 0
    usage: dict[str, dict[str, int | float]]
    # The Gamut score from the judge's verdict probabilities (expected verdict counts per tier,
    # gamut_hf.core.scorer.expected_question_score), where the judge gave them for every check.
    expected_gamut: float | None = None
    escalation: EscalationSummary | None = None
    # A panel run's members' own scores and their agreement (gamut_hf.evaluation.panel); the score
    # above is the panel's, and ``judge`` names the panel.
    panel: PanelSummary | None = None
    # Each priced stage's cost in US$ and the price it was priced at (gamut_hf.evaluation.prices);
    # a stage of a local model without a given price is absent.
    cost: dict[str, StageCost] = Field(default_factory=dict)
    stages: list[StageReport] = Field(default_factory=list)
    files: dict[str, FileDigest] = Field(default_factory=dict, description="file name -> its size and sha256")

    @property
    def cost_usd(self) -> float | None:
        """The run's cost over its priced stages; None where none is priced."""
        return sum(cost.usd for cost in self.cost.values()) if self.cost else None


RUN_FOLDER_ADVICE = "give --out a new or empty folder, or a run folder"


def claim_run_folder(out: str | Path) -> Path:
    """Make ``out`` a run folder (run, generate, judge, score and merge share the folder and its
    manifest): new, empty, or a run folder already; never a folder of another's files or of
    another command (:func:`gamut_hf.atomic.claim_folder`)."""
    return atomic.claim_folder(out, "run", names=RUN_FOLDER_FILES, advice=RUN_FOLDER_ADVICE)


@contextmanager
def hold_run_folder(out: str | Path) -> Iterator[Path]:
    """:func:`claim_run_folder`, locked while a command writes there: two at once are refused."""
    with atomic.claimed_folder(out, "run", names=RUN_FOLDER_FILES, advice=RUN_FOLDER_ADVICE) as folder:
        yield folder


def _parquet_bytes(columns: Mapping[str, Sequence[Any]], features: Any) -> bytes:
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    # pyarrow directly: the datasets file (features in the schema metadata), without a progress bar.
    sink = pa.BufferOutputStream()
    pq.write_table(datasets.Dataset.from_dict(dict(columns), features=features).data.table, sink)
    return bytes(sink.getvalue().to_pybytes())


def write_outputs(
    out: str | Path, results: RunResults, details: Mapping[str, Sequence[Any]], responses: Mapping[str, Sequence[Any]]
) -> RunResults:
    """Write details.parquet and responses.parquet (tables given column by column), then
    results.json recording their digests; returns the results as written."""
    from gamut_hf.dataset.features import DETAILS_FEATURES, RESPONSES_FEATURES

    folder = Path(out)
    digests = {}
    if "reasoning" not in responses:  # a candidate without reasoning (a submission, a simulation)
        responses = {**responses, "reasoning": [None] * len(responses["question_id"])}
    for column, empty in (("verdict_probabilities", None), ("escalated", False), ("panel_verdicts", None)):
        if column not in details:  # verdicts read from elsewhere (inspect_ai, a simulation)
            details = {**details, column: [empty] * len(details["check_id"])}
    for name, columns, features in (
        (DETAILS_FILE, details, DETAILS_FEATURES),
        (RESPONSES_FILE, responses, RESPONSES_FEATURES),
    ):
        data = _parquet_bytes(columns, features)
        atomic.write_bytes(folder / name, data)
        digests[name] = FileDigest.of(data)
    results = results.model_copy(update={"files": digests})
    # Last: until it is in place a reader sees the old results.json, whose digests refuse the new tables.
    atomic.write_text(folder / RESULTS_FILE, results.model_dump_json(indent=2) + "\n")
    return results


# -- reading ---------------------------------------------------------------------------------


def is_run_folder(folder: str | Path) -> bool:
    return (Path(folder) / RESULTS_FILE).is_file()


def run_folders_in(root: str | Path) -> list[Path]:
    """The run folders directly inside ``root``, by name."""
    return sorted(path.parent for path in Path(root).glob(f"*/{RESULTS_FILE}"))


@dataclass(frozen=True)
class RunFolder:
    """A run folder's results.json, read and validated; its tables are read through :meth:`table`."""

    folder: Path
    results: RunResults

    def table(self, name: str, columns: Sequence[str] | None = None, **options: Any) -> pa.Table:
        """The table ``name``, refused unless its bytes are the ones results.json records."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.folder / name
        expected = self.results.files.get(name)
        if expected is None:
            raise RunFolderError(f"{self.folder}: {RESULTS_FILE} records no {name}")
        try:
            # The input rules of gamut_hf.files: a regular file, capped (a FIFO would hang, a device fill memory).
            data = read_bytes(path, max_bytes=MAX_TABLE_BYTES)
        except InputError as error:
            if not (path.exists() or path.is_symlink()):
                raise RunFolderError(
                    f"{self.folder}: {name} is missing; rewrite the folder with `gamut score {self.folder}`"
                ) from None
            raise RunFolderError(str(error), reason=error.reason) from None
        if FileDigest.of(data) != expected:
            raise RunFolderError(
                f"{self.folder}: {name} is not the one {RESULTS_FILE} was written with (an "
                f"interrupted write, or a file changed by hand); rewrite the folder with "
                f"`gamut score {self.folder}`"
            )
        try:
            return pq.read_table(pa.BufferReader(data), columns=list(columns) if columns else None, **options)
        except Exception as error:  # pyarrow raises several types for a damaged or foreign file
            raise RunFolderError(f"{path}: cannot be read as a GAMUT table ({error})".splitlines()[0]) from None


def read_run_folder(folder: str | Path) -> RunFolder:
    """A run folder's results.json, validated, with a one-line error for anything wrong."""
    folder = Path(folder)
    path = folder / RESULTS_FILE
    try:
        data = read_bytes(path)
    except InputError as error:
        if not folder.is_dir() or not (path.exists() or path.is_symlink()):
            raise RunFolderError(
                f"{folder}: not a run folder (no {RESULTS_FILE}); produce one with `gamut run --out {folder}`"
            ) from None
        raise RunFolderError(str(error), reason=error.reason) from None
    try:
        # Strict JSON (gamut_hf.files.parse_json): json.loads alone keeps the last of two equal keys,
        # so a score pasted in beside the written one would be read without a word.
        results = RunResults.model_validate(parse_json(decode_text(data, str(path)), str(path)))
    except InputError as error:
        raise RunFolderError(str(error), reason=error.reason) from None
    except ValidationError as error:
        where, message = first_problem(error)
        raise RunFolderError(f"{path}: {where or 'top level'}: {message}") from None
    missing = [name for name in (DETAILS_FILE, RESPONSES_FILE) if name not in results.files]
    if missing:
        raise RunFolderError(
            f"{path}: records no digest of {missing[0]} (written by an older gamut-hf); "
            f"rewrite the folder with `gamut score {folder}`"
        )
    return RunFolder(folder, results)


def stored_stages(folder: str | Path) -> list[StageReport]:
    """The stages the folder's results.json records (a rescore keeps them); none when it has no
    readable record of them."""
    try:
        stages = json.loads(read_bytes(Path(folder) / RESULTS_FILE, max_bytes=MAX_JSON_BYTES)).get("stages") or []
        return [StageReport.model_validate(stage) for stage in stages]
    except (InputError, ValueError, AttributeError, TypeError):  # no results.json, or not one this version reads
        return []
