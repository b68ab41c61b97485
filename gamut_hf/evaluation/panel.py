"""A panel of judges: each judges every check, and the panel's verdict is their majority.

The paper's robustness claim rests on several judges agreeing; a panel run stores every member's
verdicts (each keyed by its own fingerprint, so a member added later is the only one asked) and
scores the panel's verdicts, with each member's own score and the members' agreement beside it.

**The panel's verdict** of a check is the verdict most of its members gave. Where two or more
verdicts tie for most, it is the median of all the members' verdicts in the order meets >
partially_meets > missing > contradicts, and for an even count the lower of the two middle ones
(the less favourable: a tie never flatters the candidate). A member's unreadable verdict
(``error``) is left out; a check no member could read is an error.

**Agreement** over the checks every member answered: Krippendorff's alpha (nominal; it takes any
number of judges) and Cohen's kappa for each pair.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from pydantic import BaseModel

from gamut_hf.core.rubric import VERDICTS
from gamut_hf.core.scorer import Outcome

PANEL_BACKEND = "panel"


def panel_verdict(votes: Sequence[Outcome]) -> Outcome:
    """The panel's verdict from its members' (``error`` for an unreadable one)."""
    readable = [vote for vote in votes if vote != "error"]
    if not readable:
        return "error"
    counts = Counter(readable)
    most = max(counts.values())
    leaders = [verdict for verdict, n in counts.items() if n == most]
    if len(leaders) == 1:
        return leaders[0]
    ordered = sorted(readable, key=VERDICTS.index)
    return ordered[len(ordered) // 2]  # the lower middle for an even count: the less favourable


def panel_fingerprint(members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """results.json's judge for a panel: its members, and a name readers show as the judge's."""
    names = [str(member.get("model")) for member in members]
    return {"backend": PANEL_BACKEND, "model": f"panel of {', '.join(names)}", "members": list(members)}


class MemberScore(BaseModel):
    """One member's own figures over the run's checks."""

    judge: dict[str, Any]
    gamut: float | None  # its score from its own verdicts (None while it has unreadable or unjudged checks)
    errors: int
    unfinished: int


class PairAgreement(BaseModel):
    first: str
    second: str
    kappa: float | None  # None: undefined (both judges gave one and the same verdict throughout)


class PanelSummary(BaseModel):
    """results.json's panel: each member's score, and how far the members agree."""

    members: list[MemberScore]
    checks: int  # the checks every member answered: the agreement's base
    krippendorff_alpha: float | None
    pairwise_kappa: list[PairAgreement]

    def alone(self) -> str:
        """Each member's own score, as the summary, the report and the Space write it."""
        return ", ".join(f"{m.judge.get('model')} {_shown(m.gamut, '.1f')}" for m in self.members)

    def agreement_text(self) -> str:
        pairs = "; ".join(f"{p.first} ~ {p.second} {_shown(p.kappa, '.3f')}" for p in self.pairwise_kappa)
        return f"Krippendorff's alpha {_shown(self.krippendorff_alpha, '.3f')}; Cohen's kappa {pairs}"


def _shown(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def agreement(labels: Sequence[str], votes: Sequence[Sequence[str]]) -> tuple[float | None, list[PairAgreement]]:
    """Krippendorff's alpha and each pair's Cohen's kappa over checks (``votes``: per check, each
    member's verdict, in the order of ``labels``); None where a figure is undefined."""
    import math

    import krippendorff
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    if not votes:
        return None, [PairAgreement(first=a, second=b, kappa=None) for a, b in combinations(labels, 2)]
    codes = np.array([[VERDICTS.index(vote) for vote in check] for check in votes], dtype=float).T
    alpha: float | None = None
    if len(np.unique(codes)) > 1:  # one value throughout: no disagreement to measure
        alpha = float(krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal"))
    pairs = []
    for (i, a), (j, b) in combinations(enumerate(labels), 2):
        kappa = float(cohen_kappa_score(codes[i], codes[j], labels=list(range(len(VERDICTS)))))
        pairs.append(PairAgreement(first=a, second=b, kappa=None if math.isnan(kappa) else kappa))
    return alpha, pairs
