"""Verifier "qa_em": exact match of a short answer against a list of gold aliases (verl's Search-R1
data, data_source `searchR1_*`).

Owns: taking the last `<answer>...</answer>` of the answer region, normalising it the SQuAD way
(lower case, punctuation and the articles a / an / the removed, whitespace collapsed), and scoring
1 iff it equals one normalised gold alias. Gold: `ground_truth["target"]` (a list of aliases, or one
string), or the ground truth itself when it is a string or list. Does not own: routing
(`rewards.routing`) or the search tool that retrieves passages (`rollout.search_tool`; the passages are
not part of the text scored here).

Deliberately strict: verl's `subem_check` (gold contained in the prediction) is not used, because a
policy could list every candidate answer inside one `<answer>` tag and score.
"""

from __future__ import annotations

import re
import string
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult, checks_ground_truth, result
from reasonrl.rewards.extract import answer_region, answer_tag
from reasonrl.rewards.ground_truth import decoded
from reasonrl.types import Problem

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(s: str) -> str:
    return " ".join(_ARTICLES.sub(" ", s.lower().translate(_PUNCT)).split())


def gold_aliases(ground_truth: Any) -> list[str]:
    gt = decoded(ground_truth)
    if isinstance(gt, dict):
        gt = gt.get("target", gt.get("answers", gt.get("answer")))
    if isinstance(gt, (str, int, float)) and not isinstance(gt, bool):
        gt = [gt]
    texts = isinstance(gt, list) and all(
        isinstance(g, (str, int, float)) and not isinstance(g, bool) for g in gt
    )
    if not texts or not any(normalize_answer(str(g)) for g in gt):
        raise ValueError(
            f"qa_em: ground truth {ground_truth!r} has no gold answer (expected {{'target': [...]}} or a list of texts)"
        )
    return [str(g) for g in gt]


@VERIFIERS.register("qa_em")
def qa_em(response: str, problem: Problem) -> RewardResult:
    ans = answer_tag(answer_region(response))
    if ans is None:
        return result(False, None)
    golds = {normalize_answer(g) for g in gold_aliases(problem.ground_truth)}
    return result(normalize_answer(ans) in golds and bool(normalize_answer(ans)), ans)


checks_ground_truth(qa_em, lambda problem: gold_aliases(problem.ground_truth))
