"""What a run costs: a price per million tokens for each model, and the cost of each stage.

A price comes, in this order, from ``--model-price``/``--judge-price IN/OUT`` (kept in the run's
store with the model it was given for, so a resumed run, ``gamut judge`` after ``gamut generate``
and ``gamut score`` price it the same), or, for a model behind an OpenAI-compatible endpoint,
from the shipped table of list prices (``gamut_hf/data/prices/prices.json``, dated: prices
change). A local model (transformers, vllm) has no list price: its stages are priced only when
a price is given. A stage is priced from the tokens the run store holds for it, which are the
tokens of every call of the run, resumed or not: what the run cost, not one invocation.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

if TYPE_CHECKING:  # results.json's reader imports this module: it stays free of the backends
    from gamut_hf.evaluation.config import ModelSpec, RunConfig

PRICE_TABLE = Path(__file__).resolve().parents[1] / "data" / "prices" / "prices.json"

ROLES = ("candidate", "judge", "escalation")
STAGE_OF_ROLE: dict[str, str] = {"candidate": "generation", "judge": "judge", "escalation": "escalation"}
PRICE_FLAG: dict[str, str] = {
    "candidate": "--model-price",
    "judge": "--judge-price",
    "escalation": "--escalate-judge-price",
}
# A dated release of a listed model (gpt-4o-2024-08-06, claude-opus-4-5-20251101) has its price;
# another model whose name merely starts like it (gpt-5.4 after gpt-5) does not.
DATED_RELEASE = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8}|-latest)?")


BATCH_SHARE = 0.5


class Price(BaseModel):
    """US dollars per million tokens: sent (prompt), received (output) and, where the provider
    bills them apart, prompt tokens read from its prompt cache."""

    prompt: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_prompt: float | None = Field(None, ge=0)
    # The share of the price a provider batch pays (OpenAI's, Anthropic's and Google's are half).
    batch: float = Field(BATCH_SHARE, gt=0, le=1)
    source: str = Field("given", description="where the price comes from: a flag, or the table and its date")

    def cost(self, prompt_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
        cached = min(cached_tokens, prompt_tokens) if self.cached_prompt is not None else 0
        fresh = prompt_tokens - cached
        return (fresh * self.prompt + cached * (self.cached_prompt or 0.0) + output_tokens * self.output) / 1e6

    def batched(self) -> Price:
        """This price at the provider's batch rate."""
        return self.model_copy(
            update={
                "prompt": self.prompt * self.batch,
                "output": self.output * self.batch,
                "cached_prompt": None if self.cached_prompt is None else self.cached_prompt * self.batch,
                "source": f"{self.source}, at the batch rate (x{self.batch:g})",
            }
        )

    def per_million(self) -> str:
        return f"${self.prompt:g}/${self.output:g} per M tokens"


class StageCost(BaseModel):
    """results.json's cost of one stage: the price it was priced at and the US dollars."""

    price: Price
    usd: float


@cache
def price_table() -> tuple[str, dict[str, Price]]:
    """The shipped list prices: their date and each model's price."""
    table = json.loads(PRICE_TABLE.read_text(encoding="utf-8"))
    source = f"list price of {table['date']}"
    return table["date"], {name: Price(**price, source=source) for name, price in table["models"].items()}


def listed_price(model: str) -> Price | None:
    """The table's price of ``model`` (a provider prefix such as ``openai/`` and a dated release
    suffix are allowed), None where it is not listed."""
    name = model.rsplit("/", 1)[-1].lower()
    _, prices = price_table()
    for listed in sorted(prices, key=len, reverse=True):
        if name.startswith(listed) and DATED_RELEASE.fullmatch(name[len(listed) :]):
            return prices[listed]
    return None


def given_prices(given: dict[str, Price | None], config: RunConfig) -> dict[str, dict[str, Any]]:
    """The prices given on the command line as the store keeps them: with the model each is for."""
    return {
        role: {"model": spec.name, **price.model_dump(exclude={"source"})}
        for role, price in given.items()
        if price is not None and (spec := _spec(config, role)) is not None
    }


def run_prices(
    config: RunConfig, given: dict[str, Price | None], stored: dict[str, Any] | None = None
) -> dict[str, Price | None]:
    """Each role's price: given now, else given earlier for the same model (``stored``, from the
    run's store), else listed for a model behind an OpenAI-compatible endpoint, else none."""
    prices: dict[str, Price | None] = {}
    roles = [*ROLES, *(f"judge {n}" for n in range(2, len(config.panel) + 2))]
    for role in roles:
        spec = _spec(config, role)
        kept = (stored or {}).get(role)
        if spec is None:  # no escalation judge
            prices[role] = None
        elif (price := given.get(role)) is not None:
            prices[role] = price.model_copy(update={"source": PRICE_FLAG.get(role, "given")})
        elif isinstance(kept, dict) and kept.get("model") == spec.name:
            fields = {name: value for name, value in kept.items() if name != "model"}
            try:
                prices[role] = Price(**fields, source=PRICE_FLAG.get(role, "given"))
            except ValidationError:  # not what this version wrote: the run is not priced from it
                prices[role] = None
        elif spec.backend == "openai":
            prices[role] = listed_price(spec.name)
        else:
            prices[role] = None
    return prices


def _spec(config: RunConfig, role: str) -> ModelSpec | None:
    if role.startswith("judge "):  # a panel's n-th judge (the first is "judge")
        return config.judges[int(role.split()[1]) - 1]
    if role == "escalation":
        return config.escalation.judge if config.escalation is not None else None
    return config.candidate if role == "candidate" else config.judge


def stage_costs(
    prices: dict[str, Price | None], usage: dict[str, dict[str, int | float]], *, panel: int = 0
) -> dict[str, StageCost]:
    """The cost of each priced stage from its stored tokens (results.json's ``usage``). ``panel``:
    the number of a panel's judges, each priced at its own price over its own calls (``usage``'s
    "judge 1", "judge 2", ...; ``prices``' "judge 1", ... where given, else "judge" for the first)."""
    costs = {}
    stages = dict(STAGE_OF_ROLE)
    if panel:
        prices = {**prices, "judge 1": prices.get("judge 1", prices.get("judge"))}
        prices.pop("judge", None)
        stages.update({f"judge {n}": f"judge {n}" for n in range(1, panel + 1)})
    for role, price in prices.items():
        stage = stages[role]
        tokens = usage.get(stage)
        if price is None or not tokens:
            continue
        usd = price.cost(
            int(tokens.get("prompt_tokens", 0)),
            int(tokens.get("completion_tokens", 0)),
            int(tokens.get("cached_tokens", 0)),
        )
        # Calls answered in a provider batch pay its share of the price (usage's batched_* tokens).
        usd -= (1 - price.batch) * price.cost(
            int(tokens.get("batched_prompt_tokens", 0)),
            int(tokens.get("batched_completion_tokens", 0)),
            int(tokens.get("batched_cached_tokens", 0)),
        )
        costs[stage] = StageCost(price=price, usd=round(usd, 6))
    return costs


def cost_line(costs: dict[str, StageCost], usage: dict[str, dict[str, int | float]]) -> str | None:
    """What a run says of its cost beside its score; None where no stage is priced."""
    if not costs:
        return None
    parts = [
        f"{stage} ${cost.usd:,.4f} ({cost.price.per_million()}, {cost.price.source}{_batch_note(usage.get(stage), cost)})"
        for stage, cost in costs.items()
    ]
    total = sum(cost.usd for cost in costs.values())
    stages = [stage for stage in usage if stage not in ("judge",) or not any(s.startswith("judge ") for s in usage)]
    unpriced = [stage for stage in stages if stage not in costs and usage.get(stage, {}).get("calls")]
    rest = f"; {' and '.join(unpriced)} not priced (no price given)" if unpriced else ""
    return f"cost ${total:,.4f}: " + " + ".join(parts) + rest


def _batch_note(tokens: dict[str, int | float] | None, cost: StageCost) -> str:
    calls = int((tokens or {}).get("batched_calls", 0))
    return f"; {calls} calls in provider batches at x{cost.price.batch:g}" if calls else ""


def shown_cost(usd: float | None) -> str:
    """A run's cost for a table cell: cents above a dollar, four decimals below, "not priced" for none."""
    if usd is None or usd != usd:  # None, or NaN where a table holds no cost
        return "not priced"
    return f"{usd:,.2f}" if usd >= 1 else f"{usd:.4f}"
