"""The math sets of the zero-RL papers' five-benchmark table (DeepScaleR, SimpleRL-Zoo, Dr. GRPO:
AIME24, AMC23, MATH-500, Minerva, OlympiadBench) beside AIME's own converter, plus MathArena's sets, each in its
public source's own columns. Every one is a boxed-answer prompt scored by the math verifier; the
data_source is Reasoning360's name where it has one (`math__minerva`, `math__olympiad_bench`).

- `amc`: `math-ai/amc23` (`question`, `answer`, `id`, `url`; 40 problems of AMC 12 2023) and
  `AI-MO/aimo-validation-amc` (`problem`, `answer` as a float such as 142.0, `id`, `url`).
- `matharena`: MathArena's competition sets (`MathArena/hmmt_feb_2025`, `brumo_2025`, `cmimc_2025`:
  `problem_idx`, `problem`, `answer` in LaTeX); option `competition` names the set (data_source
  `math__<competition>`).
- `olympiadbench`: OlympiadBench's open-ended text-only sets (`Hothan/OlympiadBench` config
  `OE_TO_maths_en_COMP`, 675 problems; Qwen2.5-Math's `olympiadbench/test.jsonl`): `question`,
  `final_answer` (a list of LaTeX strings), `id`, `is_multiple_answer`, `unit`, `error`. Several
  final answers are one comma list (the math verifier compares it as a set, order-free). `error` is
  OlympiadBench's absolute tolerance for a numerical answer: kept as `extra_info.tolerance`, which the
  math verifier applies to plain numbers. A `unit` is named in the prompt, as OlympiadBench's own
  prompt does, so an answer without it is the expected one.
- `minerva`: Minerva's MATH-style STEM questions (Qwen2.5-Math's `minerva_math/test.jsonl`: `problem`,
  `solution` ending in `\\boxed{}` or "The final answer is $X$. I hope it is correct."; `math-ai/minervamath`:
  `question`, `answer`).
"""

from __future__ import annotations

import math
import re

from reasonrl.data.prepare import RowError, need, prompts, register, text
from reasonrl.rewards.extract import last_boxed
from reasonrl.types import Problem

_MINERVA_FINAL = re.compile(r"final answer is\s*\$?(.+?)\$?\.?\s*I hope it is correct", re.DOTALL)


def answer_text(row: dict, *names: str) -> str:
    """The gold answer as text; a float that is a whole number (AMC's 142.0) is written 142."""
    value = need(row, *names)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return text(row, *names)


def _problem(question: str, gold: str, data_source: str, uid: str, extra: dict) -> Problem:
    return Problem(prompts.user(question, prompts.MATH), gold, data_source, "math", extra, uid=uid)


@register("amc", "math-ai/amc23 (question, answer) or AI-MO/aimo-validation-amc (problem, answer)")
def amc(row: dict, ctx) -> Problem:
    extra = {"index": ctx.index, **({"url": row["url"]} if row.get("url") else {})}
    return _problem(text(row, "question", "problem"), answer_text(row, "answer"), "math__amc",
                    f"amc/{row.get('id', ctx.index)}", extra)  # fmt: skip


@register("matharena", "MathArena/{hmmt_feb_2025,brumo_2025,cmimc_2025,...}: problem_idx, problem, answer",
          competition="hmmt_feb_2025")  # fmt: skip
def matharena(row: dict, ctx) -> Problem:
    name = str(ctx.options["competition"])
    return _problem(text(row, "problem", "question"), answer_text(row, "answer"), f"math__{name}",
                    f"{name}/{row.get('problem_idx', ctx.index)}", {"index": ctx.index})  # fmt: skip


@register(
    "olympiadbench", "Hothan/OlympiadBench OE_TO_maths_en_COMP: question, final_answer (list), unit, error"
)
def olympiadbench(row: dict, ctx) -> Problem:
    final = need(row, "final_answer", "answer")
    answers = [final] if isinstance(final, (str, int, float)) else list(final)
    answers = [str(a).strip().strip("$").strip() for a in answers]
    if not answers or not all(answers):
        raise RowError("final_answer", "must be a non-empty list of answers")
    question = text(row, "question", "problem")
    if str(row.get("context") or "").strip():  # a few sets put shared givens in a separate field
        question = f"{str(row['context']).strip()}\n\n{question}"
    extra: dict = {"index": ctx.index}
    unit = str(row.get("unit") or "").strip()
    if unit:
        question += f"\n\nThe unit of the answer is {unit}; give the number without the unit."
        extra["unit"] = unit
    error = row.get("error")
    if error is not None and str(error).strip():
        try:
            tolerance = abs(float(str(error).split(",")[0]))  # one tolerance per answer; the first
        except ValueError:
            tolerance = float("nan")
        if not math.isfinite(tolerance):
            raise RowError("error", f"must be a finite number (a tolerance), got {error!r}")
        extra["tolerance"] = tolerance
    uid = row.get("id", ctx.index)
    return _problem(question, ", ".join(answers), "math__olympiad_bench", f"olympiadbench/{uid}", extra)


@register(
    "minerva", "Minerva math: problem, solution (\\boxed{} or 'The final answer is $X$'), or question, answer"
)
def minerva(row: dict, ctx) -> Problem:
    if row.get("answer") is not None and str(row["answer"]).strip():
        gold = answer_text(row, "answer")
    else:
        solution = text(row, "solution")
        gold = last_boxed(solution) or ""
        if not gold.strip():
            m = _MINERVA_FINAL.search(solution)
            gold = m.group(1).strip() if m else ""
        if not gold.strip():
            raise RowError("solution", "has no \\boxed{} answer and no 'The final answer is ...' line")
    uid = row.get("idx", row.get("id", ctx.index))
    extra = {"index": ctx.index, **({"type": row["type"]} if row.get("type") else {})}
    return _problem(text(row, "problem", "question"), gold.strip(), "math__minerva", f"minerva/{uid}", extra)
