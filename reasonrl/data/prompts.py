"""Prompt formatting: chat messages -> token ids through the tokenizer's chat template.

Owns: `encode_prompt(s)` (with each prompt's chat-template arguments, `with_template_kwargs`; a row's prompt
from another of its fields, `with_prompt_key`, reading fields with `row_value`),
`fit_prompts` (the token budget, checked when data loads), and the
think-block policy at the prompt side: when the rendered prompt ends inside an open `<think>` (as
DeepSeek-R1-style templates' generation prompts do), `scoring_text` gives the verifiers the completion
with that `<think>` in front, so an answer the model leaves inside a never-closed think block earns nothing (the
extraction rule in `rewards.extract`). Models without a chat template get every message's text in
order (system messages included), as plain text, and so do rows with `apply_chat_template: false`
(prompts already rendered for one model, like AReaL-boba's). Does not own: the prompt wording of a dataset (stored
in each row's `prompt`) or generation.
"""

from __future__ import annotations

from dataclasses import replace

from reasonrl.errors import InputError
from reasonrl.types import Problem


def plain_text(problem: Problem) -> str:
    """The prompt for a tokenizer without a chat template: every message's content, in order."""
    return "\n\n".join(str(m["content"]) for m in problem.prompt if str(m.get("content", "")).strip())


def _templated(tokenizer, problem: Problem) -> bool:
    return problem.apply_chat_template and bool(getattr(tokenizer, "chat_template", None))


def _render(tokenizer, problem: Problem, generation: bool = True, **kwargs):
    """apply_chat_template (with the generation prompt unless `generation` is False), whose refusal (a
    template that raises: Gemma 2's "System role not supported", roles that do not alternate) becomes
    an InputError naming the prompt and its roles."""
    from jinja2.exceptions import TemplateError

    try:
        return tokenizer.apply_chat_template(
            problem.prompt, add_generation_prompt=generation, **problem.chat_template_kwargs, **kwargs
        )
    except TemplateError as e:
        roles = ", ".join(str(m.get("role")) for m in problem.prompt)
        hint = (
            "; fold the system message into the first user turn when preparing the data"
            if "system" in str(e).lower()
            else ""
        )
        raise InputError(f"prompt of uid {problem.uid!r} (roles: {roles}): the tokenizer's chat template refuses "
                         f"it: {e}{hint}") from None  # fmt: skip


def render_text(
    tokenizer, problem: Problem, messages: list[dict] | None = None, generation: bool = True
) -> str:
    """The chat template's text of `messages` (default: the problem's prompt), with the problem's template
    arguments, the generation prompt unless `generation` is False, a refusal named (`_render`)."""
    if messages is not None:
        problem = replace(problem, prompt=messages)
    return _render(tokenizer, problem, generation=generation, tokenize=False)


def prompt_text(tokenizer, problem: Problem) -> str:
    """The prompt as the model reads it, as text: the chat template's rendering (with the generation prompt),
    or the plain text of a model without one (an OpenRLHF agent's first observation, `rollout.agents`)."""
    return render_text(tokenizer, problem) if _templated(tokenizer, problem) else plain_text(problem)


def with_template_kwargs(problems: list[Problem], defaults: dict) -> list[Problem]:
    """`problems` with the chat-template arguments `defaults` (`data.chat_template_kwargs`, eval's
    `--chat-template-kwarg`) under each row's own; the same list when there are none."""
    if not defaults:
        return problems
    return [replace(p, chat_template_kwargs={**defaults, **p.chat_template_kwargs}) for p in problems]


def row_value(problem: Problem, key: str):
    """The value at `key` of a problem's row: `extra_info.<field>` (dotted, nested), `ground_truth`, or None
    where there is none (`data.response_key`, `data.prompt_key`)."""
    head, _, rest = key.partition(".")
    value = getattr(problem, head, None) if head in ("extra_info", "ground_truth") else None
    for part in rest.split(".") if rest else ():
        value = value.get(part) if isinstance(value, dict) else None
    return value


def with_prompt_key(problems: list[Problem], key: str | None, where: str) -> list[Problem]:
    """`problems` whose prompt is the text at `key` (`data.prompt_key`; verl SFT's prompt_key) as one user
    message, instead of their chat prompt; the same list when `key` is None. InputError naming the first
    row with no text there."""
    if not key:
        return problems
    out = []
    for i, p in enumerate(problems):
        value = row_value(p, key)
        if not isinstance(value, str) or not value.strip():
            got = "nothing" if value is None else f"{type(value).__name__} {str(value)[:40]!r}"
            raise InputError(f"{where}: row {i} (uid {p.uid or '-'}): no prompt text at {key} (data.prompt_key), "
                             f"got {got}")  # fmt: skip
        out.append(replace(p, prompt=[{"role": "user", "content": value}]))
    return out


def encode_prompt(tokenizer, problem: Problem) -> list[int]:
    if _templated(tokenizer, problem):
        ids = _render(tokenizer, problem, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers >= 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)
    return list(tokenizer(plain_text(problem), add_special_tokens=True)["input_ids"])


def prompt_opens_think(tokenizer, problem: Problem) -> bool:
    """True if the rendered prompt ends inside an open `<think>` block. With a chat template, only what
    the generation prompt adds counts (where the conversation alone renders as its prefix): a question
    that mentions `<think>` does not put the model's answer inside a think block."""
    if _templated(tokenizer, problem):
        text = render_text(tokenizer, problem)
        conversation = render_text(tokenizer, problem, generation=False)
        if text.startswith(conversation):
            text = text[len(conversation) :]
    else:
        text = plain_text(problem)
    return text.rfind("<think>") > text.rfind("</think>")


def scoring_text(completion: str, opens_think: bool) -> str:
    """What the verifiers see: the completion, behind the `<think>` its prompt opened (if any)."""
    return f"<think>{completion}" if opens_think else completion


def fit_prompts(tokenizer, problems: list[Problem], max_tokens: int, where: str, drop: bool = False,
                log=print, stats: dict | None = None) -> list[Problem]:  # fmt: skip
    """Problems whose prompt fits `max_tokens`. An over-long prompt is an error naming its row
    (`where` row i), unless `drop`, which leaves it out and reports how many were dropped.
    stats: receives "longest", the token count of the longest prompt kept."""
    kept = []
    for i, p in enumerate(problems):
        n = len(encode_prompt(tokenizer, p))
        if n <= max_tokens:
            kept.append(p)
            if stats is not None:
                stats["longest"] = max(stats.get("longest", 0), n)
        elif not drop:
            raise InputError(
                f"{where} row {i} (uid {p.uid!r}): prompt has {n} tokens > data.max_prompt_tokens={max_tokens}; "
                "raise the budget or set data.drop_overlong_prompts=true"
            )
    if len(kept) < len(problems):
        log(
            f"{where}: dropped {len(problems) - len(kept)} of {len(problems)} prompts over {max_tokens} tokens"
        )
    return kept


def encode_prompts(tokenizer, problems: list[Problem], max_tokens: int | None = None) -> list[list[int]]:
    out = []
    for i, p in enumerate(problems):
        ids = encode_prompt(tokenizer, p)
        if max_tokens is not None and len(ids) > max_tokens:
            raise InputError(
                f"prompt of problem {i} (uid {p.uid!r}) has {len(ids)} tokens > data.max_prompt_tokens={max_tokens}"
            )
        out.append(ids)
    return out
