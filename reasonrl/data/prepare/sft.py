"""Supervised fine-tuning data (`algo.objective: sft`): conversations or prompt / response pairs as rows
whose response is `extra_info.response` (the default `data.response_key`). Shapes read, first found:
- `messages` (option `messages`; TRL's conversational data, OpenAI's, open-r1's Mixture-of-Thoughts /
  OpenR1-Math): the last assistant message is the response, every message before it the prompt (system
  and earlier turns included); messages after it are an error (nothing would train on them). With
  option `turns=all`, every assistant turn is trained (verl's multi-turn SFT, TRL's assistant-only loss):
  the prompt is what comes before the first assistant message, the response the messages from there to
  the last (user and tool turns between them in the sequence, not trained);
- `prompt` + `completion` (TRL's prompt-completion data; either may be text or messages);
- a prompt field (option `prompt`, else `prompt`, `question`, `problem`, `instruction` with `input`
  appended as Alpaca does, `input`) and a response field (option `response`, else `response`, `output`,
  `solution`, `generation`): OpenRLHF's input_key / output_key, verl's SFT parquet columns.
The final answer (option `answer`, default `answer`) becomes the ground truth, so that validation scores
the model with the verifier its data_source routes to (default `math`; common option `data_source`);
`answer=from_response` takes it from the response itself (its last `\\boxed{}`, `<answer>` or `####`
after any thinking: distilled traces such as Mixture-of-Thoughts' math, which carry no answer column;
validation then checks the model reaches the teacher's answer). A row without one is an error (an empty
ground truth would let any answer score), unless `answer=none`: rows with no checkable answer (general
chat, code traces without tests, explanations) route to verifier `none` (`rewards.verifiers.unverified`),
which SFT trains on and validates by `eval/nll` alone, and which every other use (RL, `reasonrl eval`,
`data passrate`) refuses at load, naming the row.
"""

from __future__ import annotations

from reasonrl.data.prepare import InputError, RowError, register, text
from reasonrl.types import Problem

PROMPTS = ("prompt", "question", "problem", "instruction", "input")
FROM_RESPONSE = "from_response"  # option answer: the response's own final answer is the ground truth
NO_ANSWER = "none"  # option answer: no checkable answer (verifier none: SFT only)
RESPONSES = ("response", "output", "solution", "generation")


def _messages(value, name: str) -> list[dict[str, str]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, (list, tuple)) or not value:
        raise RowError(name, f"must be text or a non-empty list of messages, got {type(value).__name__}")
    out = []
    for i, m in enumerate(value):
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("role"), str)
            or not isinstance(m.get("content"), str)
        ):
            raise RowError(name, f"message {i} must be {{role, content}} with text, got {str(m)[:60]!r}")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _from_messages(messages: list[dict], name: str) -> tuple[list[dict], str]:
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        raise RowError(name, "has no assistant message (the response to train on)")
    if last != len(messages) - 1:
        raise RowError(name, f"ends with a {messages[-1]['role']!r} message after the last assistant one")
    if last == 0:
        raise RowError(name, "has no message before the assistant's (the prompt)")
    if not messages[last]["content"].strip():
        raise RowError(name, "the last assistant message is empty")
    return messages[:last], messages[last]["content"]


def _all_turns(messages: list[dict], name: str) -> tuple[list[dict], list[dict]]:
    """(the messages before the first assistant one, the rest: every assistant turn is trained)."""
    _from_messages(messages, name)  # ends with a non-empty assistant message, after a prompt
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    if first == 0:
        raise RowError(name, "has no message before the assistant's (the prompt)")
    return messages[:first], messages[first:]


def _final_answer(response: str) -> str:
    """The final answer a response states after its reasoning (\\boxed{}, <answer>, ####), as the verifiers
    extract it; RowError where it states none."""
    from reasonrl.rewards.extract import extract

    found = extract(response, ("boxed", "answer_tag", "gsm8k"))
    if found is None:
        raise RowError(
            "response", f"states no final answer (\\boxed{{}}, <answer>, ####) for answer={FROM_RESPONSE}"
        )
    return found.answer


def _pair(row: dict, ctx) -> tuple[list[dict], str | list[dict]]:
    o = ctx.options
    if o["turns"] not in ("last", "all"):
        raise InputError(f"converter sft: option turns must be last or all, got {o['turns']!r}")
    if row.get(o["messages"]) is not None:
        messages = _messages(row[o["messages"]], o["messages"])
        return (_all_turns if o["turns"] == "all" else _from_messages)(messages, o["messages"])
    if row.get("completion") is not None and row.get("prompt") is not None:  # TRL prompt-completion
        completion = row["completion"]
        if not isinstance(completion, str):
            split = _all_turns if o["turns"] == "all" else _from_messages
            return split(
                _messages(row["prompt"], "prompt") + _messages(completion, "completion"), "completion"
            )
        return _messages(row["prompt"], "prompt"), text(row, "completion")
    prompt_names = (o["prompt"],) if o["prompt"] else PROMPTS
    response_names = (o["response"],) if o["response"] else RESPONSES
    name = next((n for n in prompt_names if row.get(n) is not None), prompt_names[0])
    prompt = _messages(
        text(row, name) if isinstance(row.get(name), (str, int, float)) else row.get(name), name
    )
    if name == "instruction" and isinstance(row.get("input"), str) and row["input"].strip():
        prompt[-1]["content"] += "\n\n" + row["input"].strip()
    return prompt, text(row, *response_names)


@register("sft", "SFT data: messages | prompt + completion | prompt / question / instruction + response / output "
          "/ solution; answer (validation's ground truth; none: SFT only)", messages="messages", prompt=None,
          response=None, answer="answer", dataset="sft", turns="last")  # fmt: skip
def sft(row: dict, ctx) -> Problem:
    prompt, response = _pair(row, ctx)
    verifier = None
    if ctx.options["answer"] == NO_ANSWER:
        from reasonrl.rewards.verifiers.unverified import NONE

        gold, verifier = "", NONE
    elif ctx.options["answer"] == FROM_RESPONSE:
        gold = _final_answer(response if isinstance(response, str) else response[-1]["content"])
    elif row.get(ctx.options["answer"]) is None:
        raise RowError(ctx.options["answer"], f"missing (the final answer validation checks; rows whose response "
                       f"ends in \\boxed{{}} can take it from there: --option answer={FROM_RESPONSE}; rows with "
                       f"no checkable answer train SFT only: --option answer={NO_ANSWER})")  # fmt: skip
    else:
        gold = text(row, ctx.options["answer"])
    uid = row.get("id", row.get("uuid", ctx.index))
    return Problem(prompt, gold, "math", "sft", {"response": response, "index": ctx.index},
                   uid=f"{ctx.options['dataset']}/{uid}", verifier=verifier)  # fmt: skip
