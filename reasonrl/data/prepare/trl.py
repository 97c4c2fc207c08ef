"""TRL's GRPO data (what `GRPOTrainer(train_dataset=...)` and `trl grpo --dataset_name` take: trl-lib's
DeepMath-103K, open-r1's sets): a `prompt` column (text, or a list of messages: TRL's standard and
conversational forms) and any other columns, which TRL hands every reward function as keyword arguments.

Each row becomes a reasonrl row: the prompt as messages; the answer column (option `answer`: default
`solution`, the column TRL's `accuracy_reward` reads, else `answer` where the row has no `solution`) as the
ground truth, which the routed verifier (data_source `math` unless `--option data_source=...`) checks; and
every column but the prompt kept in `extra_info`, where the `trl_function` verifier gives them back to the
functions as TRL did (`reward.options.trl_function`; docs/rewards.md). `--option answer=none`: rows without
an answer (functions that need no label: format, length, a reward model's) route to `trl_function` itself,
so a run on them needs `reward.options.trl_function.functions`; `--option answer=environment`: rows a TRL
environment scores (`rollout.tools.environment` with a `get_reward`) route to the `environment` verifier, and
their columns (an `environment` column picking one of several among them) go to its `reset`.
"""

from __future__ import annotations

from reasonrl.data.prepare import RowError, register, text
from reasonrl.data.prepare.sft import NO_ANSWER, _messages
from reasonrl.types import Problem

FALLBACK = "answer"  # the answer column where the row has no `solution`
ENVIRONMENT = "environment"  # answer=environment: rows a TRL environment's get_reward scores


@register("trl", "TRL GRPO data: prompt (text or messages) + any columns (kept for TRL's reward functions); "
          "answer column (default solution, else answer; none: scored by trl_function alone; environment: by "
          "rollout.tools.environment's get_reward)",
          answer="solution", dataset="trl")  # fmt: skip
def trl(row: dict, ctx) -> Problem:
    if row.get("prompt") is None:
        raise RowError("prompt", "missing (TRL's GRPO data has a prompt column: text or a list of messages)")
    prompt = _messages(row["prompt"], "prompt")
    name = ctx.options["answer"]
    verifier = None
    if name == NO_ANSWER:
        gold, verifier = "", "trl_function"
    elif name == ENVIRONMENT:
        gold, verifier = "", ENVIRONMENT
    else:
        if row.get(name) is None and name == "solution" and row.get(FALLBACK) is not None:
            name = FALLBACK
        if row.get(name) is None:
            raise RowError(name, f"missing (the answer the verifier checks; rows scored by TRL reward functions "
                           f"alone: --option answer={NO_ANSWER})")  # fmt: skip
        gold = text(row, name)
    extra = {str(k): v for k, v in row.items() if k != "prompt"}
    extra.setdefault("index", ctx.index)
    uid = row.get("id", row.get("uuid", ctx.index))
    return Problem(
        prompt, gold, "math", "math", extra, uid=f"{ctx.options['dataset']}/{uid}", verifier=verifier
    )
