"""Simulated runs: the paper's 14 models (Table 1) graded over the full-size synthetic dataset.

They exist to validate the reports at the paper's scale: a report over these runs must give
back the verdict shares they were drawn with, within sampling error, and the paper's order.

How a verdict is drawn. Every check gets one uniform draw ``u``, shared by all models and
judges (common random numbers: a check hard for one model is hard for all, as in real data),
correlated within a question through a Gaussian copula (questions differ in difficulty; how
much is calibrated per model so that its Gamut score is the paper's). A
model's verdict is ``u`` read through its verdict shares for the check's tier: the lowest
``meets`` share of draws are ``meets``, then ``partially_meets``, ``missing``, ``contradicts``.
The tier shares are the paper's overall shares with mass moved between ``meets`` and
``missing`` per tier, calibrated so the tier scores come out as the paper's AC / V / Ctx while
the check-weighted mixture of the tiers keeps the overall shares exactly (the paper's Gamut
depends on the tier mix, not on the overall shares alone). A lenient judge upgrades a share of
the ``missing`` and ``partially_meets`` verdicts by one step and moves a few verdicts of its own
at random (judges disagree on single checks); the text-only variant upgrades the same way (the
named entity makes the task easier). Contradictions stay: leniency is about credit, not facts.

Beside the runs, OUT/dataset/ holds the questions they answer as an annotation folder
(questions.jsonl and images/, as `gamut synthetic` writes it), which each run's results.json
names by a path relative to OUT; each run carries a card (model.json, as a submission's result
folder does) with the model's type and, where the paper states it, its size.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field
from scipy import optimize, stats

from gamut_hf import atomic
from gamut_hf.core.compiler import compile_rubric
from gamut_hf.core.names import ModelAccess
from gamut_hf.core.rubric import TIERS, VERDICTS, parse_meta_rubric
from gamut_hf.core.scorer import score_run
from gamut_hf.dataset.synthetic import SyntheticParams, synthetic_image, synthetic_questions
from gamut_hf.reports.progress import steps
from gamut_hf.reports.statistics import question_scores

# Where the simulated runs' dataset goes, inside OUT; results.json names it by this path.
DATASET_FOLDER = "dataset"
# A run's card beside its tables: the name the leaderboard reads (gamut_hf.leaderboard.entries.CARD_FILE).
CARD_FILE = "model.json"


@dataclass(frozen=True)
class PaperRow:
    """One row of the paper's Table 1 (judge Gemini 3.1 Pro, multimodal): scores and verdict shares in %."""

    model: str
    gamut: float
    answer_critical: float
    valuable: float
    context: float
    meets: float
    partially_meets: float
    missing: float
    contradicts: float
    # Not in Table 1: the model's weights published or not, and its size where the paper's names state it.
    access: ModelAccess = "proprietary"
    parameters_billions: float | None = None

    @property
    def shares(self) -> np.ndarray:
        values = np.array([self.meets, self.partially_meets, self.missing, self.contradicts])
        return values / values.sum()


# ../shared/paper_tables.md, Table 1, in the paper's order.
PAPER_TABLE1: tuple[PaperRow, ...] = tuple(
    PaperRow(*row)
    for row in (
        ("Gemini 3.1 Pro", 58.7, 63.9, 51.9, 45.1, 55.2, 11.5, 29.2, 4.1),
        ("Gemini 3 Flash", 57.9, 63.0, 51.6, 44.7, 54.9, 12.1, 28.5, 4.5),
        ("Claude Opus 4.8", 53.1, 59.4, 43.9, 40.4, 45.3, 13.5, 38.6, 2.6),
        ("Gemini 2.5 Pro", 51.8, 55.8, 47.2, 39.7, 52.1, 11.5, 30.5, 5.9),
        ("Claude Opus 4.6", 50.5, 54.6, 45.7, 38.8, 49.2, 12.9, 32.6, 5.2),
        ("GPT-5.4", 42.6, 46.8, 37.8, 29.0, 39.5, 14.0, 42.0, 4.5),
        ("Claude Sonnet 4.6", 41.5, 46.7, 34.3, 30.5, 38.4, 13.5, 43.2, 4.9),
        ("GPT-4o", 34.2, 39.1, 28.0, 21.5, 29.7, 12.6, 54.3, 3.4),
        ("Qwen3-VL 235B", 33.0, 34.1, 32.6, 26.4, 39.4, 12.1, 39.8, 8.7, "open", 235),
        # Llama 4's names state no size (the paper gives none): shown as unknown.
        ("Llama 4 Maverick", 18.3, 19.5, 17.3, 12.3, 22.9, 11.7, 57.9, 7.6, "open"),
        ("Llama 4 Scout", 14.1, 14.4, 14.3, 10.5, 21.1, 11.3, 59.3, 8.3, "open"),
        ("Qwen3-VL 8B", 13.7, 12.3, 17.0, 11.5, 27.3, 10.6, 50.7, 11.5, "open", 8),
        ("Llama 3.2 90B", 11.8, 12.7, 10.9, 8.2, 17.8, 10.0, 65.1, 7.2, "open", 90),
        ("Llama 3.2 11B", 5.1, 3.8, 7.8, 4.3, 14.2, 9.2, 68.3, 8.3, "open", 11),
    )
)


class SimulatedJudge(BaseModel):
    name: str
    leniency: float = Field(
        0.0, ge=0, le=1, description="share of missing and partially_meets verdicts raised one step"
    )
    noise: float = Field(0.0, ge=0, le=1, description="share of verdicts moved one step either way at random")


class SimulationParams(BaseModel):
    questions: int = 1813
    seed: int = 0
    judges: list[SimulatedJudge] = Field(
        default_factory=lambda: [
            SimulatedJudge(name="Gemini 3.1 Pro"),
            # The paper's Qwen3-VL 235B judge: uniformly more lenient, with its own disagreements.
            SimulatedJudge(name="Qwen3-VL 235B", leniency=0.33, noise=0.05),
        ]
    )
    text_only_easing: float | None = Field(
        0.55,
        ge=0,
        le=1,
        description="share of missing and partially_meets verdicts raised one step in the "
        "text-only variant (graded by the first judge); "
        "None: no text-only runs",
    )
    # The dataset's pictures are random shapes; small ones keep simulate quick (960x1280 would
    # take minutes at full scale) and still fill the Space's image boxes.
    image_width: int = Field(240, ge=16)
    image_height: int = Field(320, ge=16)

    @property
    def dataset(self) -> SyntheticParams:
        """The synthetic dataset the runs answer."""
        return SyntheticParams(
            questions=self.questions, seed=self.seed, image_width=self.image_width, image_height=self.image_height
        )


class _Checks:
    """The simulated dataset's checks as flat arrays: question index and tier index of each check."""

    def __init__(self, checks: list[list]):
        self.sizes = np.array([len(cs) for cs in checks])
        self.question = np.repeat(np.arange(len(checks)), self.sizes)
        self.tier = np.array([TIERS.index(c.tier) for cs in checks for c in cs])
        self.tier_share = np.bincount(self.tier, minlength=len(TIERS)) / len(self.tier)

    def verdicts(self, shares: np.ndarray, read: np.ndarray) -> np.ndarray:
        """Verdict index (into VERDICTS) of each check: its draw read through its tier's shares."""
        bounds = np.cumsum(shares, axis=1)[self.tier]
        return np.minimum((read[:, None] >= bounds).sum(axis=1), len(VERDICTS) - 1)

    def scores(self, verdicts: np.ndarray) -> tuple[np.ndarray, float]:
        """Mean tier scores (0-100, over the questions with the tier) and the Gamut score, as the scorer computes them."""
        _, tiers, score = question_scores(self.question, self.tier, verdicts, len(self.sizes))
        return 100 * np.nanmean(tiers, axis=0), 100 * float(score.mean())


def calibrated_shares(row: PaperRow, checks: _Checks, draws: np.ndarray, rounds: int = 4) -> np.ndarray:
    """Verdict shares per tier (one row per tier) whose tier scores approach the paper's.

    Mass ``delta[t]`` moves from ``missing`` to ``meets`` in tier t, with the check-weighted
    mean of ``delta`` held at zero so the overall shares stay the paper's. Each round fits
    ``delta`` to the remaining gap by least squares under that constraint (one point of
    delta moves a tier score by about one point).
    """
    targets = np.array([row.answer_critical, row.valuable, row.context])
    weights = checks.tier_share
    delta = np.zeros(len(TIERS))
    move = np.array([1.0, 0.0, -1.0, 0.0])
    for _ in range(rounds):
        shares = row.shares + delta[:, None] * move
        gap = (targets - checks.scores(checks.verdicts(shares, draws))[0]) / 100
        step = gap - (weights @ gap) / weights.sum()
        delta = np.clip(delta + step, -row.shares[0], row.shares[2])
        delta -= weights @ delta  # exact overall shares even after clipping
    return row.shares + delta[:, None] * move


def calibrated_model(
    row: PaperRow, checks: _Checks, common: np.ndarray, own: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A model's draws and tier shares: the copula correlation is the one whose Gamut is the paper's.

    Questions that differ more in difficulty raise the mean of per-question scores above the
    pooled ratio, so the correlation sets the level and the tier shares the profile. ``common``
    is the question effect and ``own`` the check effect, both shared by every model.
    """

    def fitted(rho: float) -> tuple[np.ndarray, np.ndarray, float]:
        draws = stats.norm.cdf(np.sqrt(rho) * common + np.sqrt(1 - rho) * own)
        shares = calibrated_shares(row, checks, draws)
        return draws, shares, checks.scores(checks.verdicts(shares, draws))[1] - row.gamut

    low, high = 0.0, 0.95
    if fitted(low)[2] >= 0:
        rho = low
    elif fitted(high)[2] <= 0:
        rho = high
    else:
        rho = optimize.brentq(lambda r: fitted(r)[2], low, high, xtol=1e-3)
    draws, shares, _ = fitted(rho)
    return draws, shares


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _write_dataset(owned: atomic.OwnedFolder, questions: list[dict], params: SyntheticParams, progress: bool) -> None:
    """The annotation folder of ``questions`` in DATASET_FOLDER, as `gamut synthetic` writes one
    (:func:`gamut_hf.dataset.synthetic.write_synthetic`: the same images, seeded per question)."""
    owned.folder(f"{DATASET_FOLDER}/images")
    for index, question in enumerate(steps(questions, "writing the dataset", "image", progress)):
        synthetic_image(params.seed * 1_000_003 + index, params.image_width, params.image_height).save(
            owned.path(f"{DATASET_FOLDER}/{question['image']}"), "JPEG", quality=85
        )
    owned.write_text(
        f"{DATASET_FOLDER}/questions.jsonl", "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions)
    )


def model_card(row: PaperRow, variant: str) -> dict:
    """A simulated run's model.json: the fields of a submission's card the leaderboard shows."""
    return {
        "name": row.model,
        "link": None,
        "access": row.access,
        "parameters_billions": row.parameters_billions,
        "variant": variant,
        "partial": False,
        "submitted_by": "gamut simulate (the paper's Table 1)",
    }


def simulate_runs(
    out: str | Path,
    params: SimulationParams = SimulationParams(),
    table: tuple[PaperRow, ...] = PAPER_TABLE1,
    progress: bool = False,
) -> list[Path]:
    """Write one run folder (results.json, details.parquet, responses.parquet, model.json) per
    model, judge and variant under ``out``, and the dataset they answer in ``out``/dataset.
    ``progress``: show how far it is on stderr."""
    from gamut_hf.backends.base import model_fingerprint
    from gamut_hf.evaluation.judge import GENERATE_PROMPT_VERSION, JUDGE_PROMPT_VERSION
    from gamut_hf.evaluation.run_folder import RunResults, write_outputs

    questions = synthetic_questions(params.dataset)
    checks = [compile_rubric(parse_meta_rubric(q["meta_rubric"])) for q in questions]
    flat = _Checks(checks)
    columns: dict[str, list] = {
        "question_id": [q["id"] for q, cs in zip(questions, checks, strict=False) for _ in cs],
        "domain": [q["domain"] for q, cs in zip(questions, checks, strict=False) for _ in cs],
        "check_id": [c.id for cs in checks for c in cs],
        "tier": [c.tier for cs in checks for c in cs],
        "kind": [c.kind for cs in checks for c in cs],
        "item_id": [c.item_id for cs in checks for c in cs],
        "check_text": [c.text for cs in checks for c in cs],
    }
    blank = [None] * len(flat.tier)

    rng = np.random.default_rng(params.seed)
    common = np.repeat(rng.standard_normal(len(questions)), flat.sizes)
    own = rng.standard_normal(len(common))
    models = {
        row.model: calibrated_model(row, flat, common, own) for row in steps(table, "calibrating", "model", progress)
    }

    graders = [(judge, "multimodal", 0.0) for judge in params.judges]
    if params.text_only_easing is not None:
        graders.append((params.judges[0], "text_only", params.text_only_easing))
    folders = []
    with atomic.OwnedFolder(
        out, "simulate", others_allowed=False, advice="simulate into a new or empty folder"
    ) as owned:
        _write_dataset(owned, questions, params.dataset, progress)
        # Drawn once per judge and variant: every model meets the same judge on the same checks.
        judge_draws = {
            (judge.name, variant): (rng.random(len(common)), rng.random(len(common)), rng.random(len(common)))
            for judge, variant, _ in graders
        }
        runs = [(grader, row) for grader in graders for row in table]
        for (judge, variant, easing), row in steps(runs, "simulating runs", "run", progress):
            raise_draw, noise_draw, direction = judge_draws[(judge.name, variant)]
            draws, shares = models[row.model]
            index = flat.verdicts(shares, draws)
            for chance in (easing, judge.leniency):
                index = np.where((index == 1) | (index == 2), index - (raise_draw < chance), index)
            step = np.where(direction < 0.5, -1, 1) * (noise_draw < judge.noise)
            index = np.clip(index + step, 0, len(VERDICTS) - 1)
            verdicts = np.array(VERDICTS)[index]
            per_question = np.split(verdicts, np.cumsum(flat.sizes)[:-1])
            pairs = zip(checks, per_question, strict=True)
            run_score = score_run([(cs, dict(zip((c.id for c in cs), vs, strict=True))) for cs, vs in pairs])
            results = RunResults(
                model=model_fingerprint("simulated", row.model, {}),
                judge=model_fingerprint(
                    "simulated",
                    judge.name,
                    {"leniency": judge.leniency, "noise": judge.noise} if judge.leniency or judge.noise else {},
                ),
                dataset={
                    # A path from the results folder (OUT), where the Space and readers find it.
                    "source": DATASET_FOLDER,
                    "revision": None,
                    "fingerprint": f"synthetic-{params.questions}-seed{params.seed}",
                },
                variant=variant,
                prompt_versions={"generate": GENERATE_PROMPT_VERSION, "judge": JUDGE_PROMPT_VERSION},
                score=run_score,
                judge_errors=0,
                unfinished_checks=0,
                usage={},
            )
            name = f"{_slug(row.model)}__{_slug(judge.name)}__{variant}"
            responses = {
                "question_id": [q["id"] for q in questions],
                "error": [None] * len(questions),
                "response": [f"A simulated answer of {row.model} to {q['id']}." for q in questions],
            }
            write_outputs(
                owned.folder(name),
                results,
                {**columns, "verdict": verdicts.tolist(), "rationale": blank, "raw": blank},
                responses,
            )
            owned.write_text(f"{name}/{CARD_FILE}", json.dumps(model_card(row, variant), indent=2) + "\n")
            folders.append(Path(out) / name)
    return folders
