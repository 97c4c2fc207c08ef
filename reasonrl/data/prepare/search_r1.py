"""Search-R1's question answering (`PeterJinGo/nq_hotpotqa_train`, train / test.parquet; FlashRAG's
`RUC-NLPIR/FlashRAG_datasets` nq, triviaqa, popqa, hotpotqa, 2wikimultihopqa, musique, bamboogle):
`question`, `golden_answers` (a list of aliases), `data_source` (nq, hotpotqa, ...; option `dataset` where
the file has none). Rows as Search-R1 and verl build them: data_source `searchR1_<source>` (scored by
`qa_em`, exact match against any alias), gold `{"target": [aliases]}`, the question ending in "?" after
Search-R1's instruction. Option `style`: `search_r1` (Search-R1's own prompt: queries in <search> tags,
results in <information>; rollout.tools.format search_r1) or `hermes` (verl's: a system message, queries
as <tool_call>s; rollout.tools.format hermes with names [search])."""

from __future__ import annotations

from reasonrl.data.prepare import InputError, RowError, prompts, register, text
from reasonrl.types import Problem

STYLES = ("search_r1", "hermes")


def _aliases(row: dict) -> list[str]:
    value = row.get("golden_answers")
    if value is None and isinstance(row.get("reward_model"), dict):  # a processed row: its ground truth
        gt = row["reward_model"].get("ground_truth")
        value = gt.get("target") if isinstance(gt, dict) else gt
    if value is None:
        raise RowError("golden_answers", "missing")
    value = [value] if isinstance(value, str) else list(value) if hasattr(value, "__iter__") else None
    aliases = [str(a).strip() for a in value or () if isinstance(a, str) and a.strip()]
    if not aliases:
        raise RowError("golden_answers", "must hold at least one answer (text)")
    return aliases


@register("search_r1", "PeterJinGo/nq_hotpotqa_train, FlashRAG_datasets: question, golden_answers, data_source",
          style="search_r1", dataset=None, split="train")  # fmt: skip
def search_r1(row: dict, ctx) -> Problem:
    style = ctx.options["style"]
    if style not in STYLES:
        raise InputError(
            f"converter search_r1: option style must be one of {', '.join(STYLES)}, got {style!r}"
        )
    question = text(row, "question")
    question = question if question.endswith("?") else question + "?"
    source = str(ctx.options["dataset"] or row.get("data_source") or "nq")
    if style == "search_r1":
        prompt = [{"role": "user", "content": prompts.SEARCH_R1 + question + "\n"}]
    else:
        prompt = [{"role": "system", "content": prompts.SEARCH_R1_SYSTEM},
                  {"role": "user", "content": prompts.SEARCH_R1_HERMES + question}]  # fmt: skip
    uid = row.get("id", ctx.index)
    return Problem(prompt, {"target": _aliases(row)}, f"searchR1_{source}", "fact-reasoning",
                   {"split": ctx.options["split"], "index": ctx.index}, uid=f"searchR1_{source}/{uid}")  # fmt: skip
