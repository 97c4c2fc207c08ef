"""Supervised fine-tuning (`algo.objective: sft`): the same trainer, engines, checkpoints, resume,
validation and run directory as RL, trained on the data's own responses instead of sampled ones (a cold
start before RL, distillation of long reasoning traces, rejection-sampling fine-tuning), as verl's SFT
trainer, TRL's SFTTrainer and OpenRLHF's train_sft do.

Each step takes `train.global_batch` rows from the prompt sampler (so the data order, the mixture, and
exact resume are the RL run's), renders each prompt as for rollouts (chat template, `data.*`), appends
the row's response (`data.response_key`, a field of the row: `extra_info.answer` in verl's GSM8K parquet)
and the end-of-text token, and trains the negative log-likelihood of the response tokens (loss on the
prompt: none). A response that is a list of messages is the rest of a conversation (from its first
assistant turn to its last): every assistant turn is trained, the turns between them (user, tool) are
not, all rendered by the chat template, aggregated by `algo.loss_agg` (token_mean: verl's and TRL's default). A response longer
than `rollout.max_new_tokens` is cut there (without its end token; `rollout/truncated_frac`). Logged:
`loss/nll` and `actor/perplexity` per step; validation is the run's own (greedy accuracy with the
verifiers on `data.val_files`, `val.benchmarks`), plus `eval/nll` on validation rows that have a response.

Owns: the check of the settings (`check_sft`: RL-only settings are refused, naming the key), the rows'
responses (`response_of`, `check_responses`: a row without one is an InputError naming it before the
model loads; `check_unverified`: validation rows with no checkable answer), the step's batch
(`SftRollouts`, the trainer's rollout source) and `validation_nll`.
Does not own: the loss (`trainer.step.make_loss_fn`), the loop (`trainer.loop`).
"""

from __future__ import annotations

import dataclasses

import torch

from reasonrl import distributed as dist
from reasonrl.config import ConfigError, RunConfig
from reasonrl.data.prompts import prompt_opens_think, render_text, row_value
from reasonrl.errors import InputError
from reasonrl.trainer.rollout_source import SyncRollouts
from reasonrl.trainer.sampling import StepRollouts
from reasonrl.types import Completion, Problem, RolloutGroup

# algo keys that keep their meaning in SFT (everything else in `algo` is an RL setting)
KEPT = ("objective", "loss_agg")


def _leaves(x, prefix: str):
    if dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            yield from _leaves(getattr(x, f.name), f"{prefix}.{f.name}")
    else:
        yield prefix, x


def check_sft(cfg: RunConfig) -> None:
    """ConfigError naming the first setting SFT cannot honour (module docstring)."""
    from reasonrl.config import AlgoConfig

    defaults = dict(_leaves(AlgoConfig(), "algo"))
    for key, value in _leaves(cfg.algo, "algo"):
        if key.split(".")[1] not in KEPT and value != defaults[key]:
            raise ConfigError(f"{key}={value!r} is an RL setting; algo.objective=sft trains on the data's "
                              "responses (no sampling, no rewards, no advantages): remove it")  # fmt: skip
    r = cfg.rollout
    if r.n != 1:
        raise ConfigError(
            f"rollout.n={r.n} with algo.objective=sft: each row has one response; set rollout.n=1"
        )
    if r.max_staleness:
        raise ConfigError("rollout.max_staleness > 0 with algo.objective=sft: SFT samples nothing to overlap")
    if r.tools.enabled:
        raise ConfigError(
            "rollout.tools.enabled with algo.objective=sft: training on tool transcripts is not built"
        )
    if cfg.reward.weights and list(cfg.reward.weights) != ["correctness"]:
        raise ConfigError("reward.weights with algo.objective=sft: rewards do not train SFT (validation uses the "
                          "verifiers' correctness only)")  # fmt: skip


def check_row_responses(cfg: RunConfig, problems: list[Problem], what: str) -> None:
    """The responses the run trains on, checked before the model loads: every row's under SFT
    (`check_responses`), every row's text demonstration under `algo.guidance`
    (`trainer.guidance.check_demonstrations`); nothing otherwise."""
    if cfg.algo.objective == "sft":
        check_responses(problems, cfg.data.response_key, what)
    if cfg.algo.guidance.enabled:
        from reasonrl.trainer.guidance import check_demonstrations

        check_demonstrations(problems, cfg.data.response_key, what)


def check_unverified(cfg: RunConfig, val: list[Problem], log=print) -> None:
    """One line when validation rows have no checkable answer (verifier "none": `eval/nll` only, no
    accuracy); InputError when `checkpoint.keep_best` names an accuracy no validation row can give."""
    from reasonrl.rewards.verifiers.unverified import NONE

    unchecked = sum(p.verifier == NONE for p in val)
    if not unchecked:
        return
    log(f"validation: {unchecked} of {len(val)} rows have no checkable answer (verifier none): they give "
        "eval/nll, not eval/accuracy")  # fmt: skip
    best = cfg.checkpoint.keep_best or ""
    if unchecked == len(val) and best.startswith(("eval/accuracy", "eval/mean@", "eval/verifier_errors")):
        raise InputError(f"checkpoint.keep_best={best!r}: no validation row has a checkable answer (verifier "
                         "none), so it is never measured; keep the best by eval/nll (best_mode: min)")  # fmt: skip


def response_of(problem: Problem, key: str):
    """The value at `key` (`data.response_key`) of a problem's row, or None (`prompts.row_value`)."""
    return row_value(problem, key)


def _turns_problem(value) -> str | None:
    """Why `value` is not a conversation's continuation (messages from the first assistant turn to the
    last, each {role, content} with text), or None."""
    if not value or not all(isinstance(m, dict) and isinstance(m.get("role"), str)
                            and isinstance(m.get("content"), str) for m in value):  # fmt: skip
        return "messages must be {role, content} with text"
    if value[0]["role"] != "assistant" or value[-1]["role"] != "assistant":
        return "the turns must start and end with an assistant message"
    return None


def check_responses(problems: list[Problem], key: str, what: str) -> None:
    """InputError naming the first row whose response (data.response_key) is neither a non-empty string
    nor a conversation's continuation (`_turns_problem`)."""
    for i, p in enumerate(problems):
        value = response_of(p, key)
        where = f"{what}: row {i} (uid {p.uid or '-'})"
        if isinstance(value, (list, tuple)):
            why = _turns_problem(list(value))
            if why is None and not p.apply_chat_template:
                why = (
                    "several turns need the tokenizer's chat template (the row has apply_chat_template false)"
                )
            if why is not None:
                raise InputError(f"{where}: the turns at {key} (data.response_key): {why}")
        elif not isinstance(value, str) or not value:
            got = "nothing" if value is None else f"{type(value).__name__} {str(value)[:40]!r}"
            raise InputError(f"{where}: no response text at {key} (data.response_key; algo.objective=sft "
                             f"trains on it), got {got}")  # fmt: skip


def _turn_pieces(tokenizer, problem: Problem, turns: list[dict]) -> list[tuple[str, bool]]:
    """The continuation as (text, trained) pieces: each assistant turn as the chat template renders it
    (trained; the last one its content alone: the end-of-text token follows), and between them the other
    turns with the next assistant header (not trained). InputError where the template does not render
    the conversation's turns as prefixes of the whole (one that rewrites earlier turns, e.g. dropping
    their thinking)."""
    messages = [*problem.prompt, *turns]
    pieces, done = (
        [],
        render_text(tokenizer, problem),
    )  # the prompt as encode_prompt renders it
    last = len(messages) - 1  # (an assistant message: checked by check_responses)
    for i in range(len(problem.prompt), len(messages)):
        if messages[i]["role"] != "assistant":
            continue
        before = render_text(tokenizer, problem, messages[:i])
        through = render_text(tokenizer, problem, messages[: i + 1], False)
        if not before.startswith(done) or not through.startswith(before):
            raise InputError(f"uid {problem.uid!r}: the chat template does not render this conversation's turns as "
                             "prefixes of the whole (a template that rewrites earlier turns, such as one dropping "
                             "their thinking), so its turns cannot be trained as one sequence")  # fmt: skip
        if len(before) > len(done):
            pieces.append((before[len(done) :], False))
        pieces.append((messages[i]["content"] if i == last else through[len(before) :], True))
        done = through
    return pieces


def response_tokens(tokenizer, problem: Problem, key: str, max_tokens: int):
    """(the response's tokens, cut to `max_tokens`; which of them are not trained (a conversation's other
    turns), or None where all are; whether it was cut). A text: its tokens and the end-of-text token; a
    conversation's continuation: its pieces (`_turn_pieces`), each tokenised alone, then end-of-text. A text
    that opens with `<think>` after a prompt that already does (a template whose generation prompt ends in
    `<think>`, as DeepSeek-R1's and Qwen3's thinking ones) starts after it, as the model would (LUFFY does the
    same with its demonstrations)."""
    value = response_of(problem, key)
    if isinstance(value, str):
        if value.startswith("<think>") and prompt_opens_think(tokenizer, problem):
            value = value.removeprefix("<think>").removeprefix("\n")
        ids, frozen = tokenizer(value, add_special_tokens=False)["input_ids"], None
    else:
        ids, frozen = [], []
        for text, trained in _turn_pieces(tokenizer, problem, list(value)):
            part = tokenizer(text, add_special_tokens=False)["input_ids"]
            ids, frozen = ids + part, frozen + [not trained] * len(part)
        frozen.append(False)
    ids.append(tokenizer.eos_token_id)
    return ids[:max_tokens], None if frozen is None else frozen[:max_tokens], len(ids) > max_tokens


def response_completion(tokenizer, problem: Problem, key: str, max_tokens: int) -> Completion:
    """A row's response (`response_tokens`) as a Completion (sampler log-probs 0: nothing sampled it)."""
    ids, frozen, cut = response_tokens(tokenizer, problem, key, max_tokens)
    from reasonrl.rollout.base import completion_text

    text = completion_text(tokenizer, ids)
    return Completion(ids, text, [0.0] * len(ids), "length" if cut else "stop", tool_mask=frozen)


class SftRollouts(SyncRollouts):
    """The trainer's rollout source under SFT: each step's rows with their own responses (module docstring)."""

    def get(self, step: int) -> tuple[StepRollouts, dict[str, float]]:
        from reasonrl.data.prompts import encode_prompts

        run, cfg = self.run, self.cfg
        problems = dist.shard(run.sampler.next())  # every rank draws the whole step; trains on its share
        prompts = encode_prompts(run.tokenizer, problems, run.max_prompt_tokens)
        key, budget = cfg.data.response_key, cfg.rollout.max_new_tokens
        groups = [RolloutGroup(p, prompt, [response_completion(run.tokenizer, p, key, budget)])
                  for p, prompt in zip(problems, prompts)]  # fmt: skip
        state = run.sampler.state_dict()
        return StepRollouts(groups, run.sampler.metrics(), None, self.version, 0.0, state), {}


def validation_nll(run, cfg: RunConfig, problems: list[Problem]) -> dict[str, float]:
    """`eval/nll`: the token-mean negative log-likelihood of the validation rows' responses (those that have
    one) under the policy; {} where none has."""
    from reasonrl.data.prompts import encode_prompts
    from reasonrl.trainer.batching import build_batch

    key = cfg.data.response_key
    rows = [p for p in problems if response_of(p, key)]
    if not rows:
        return {}
    total, tokens = 0.0, 0
    prompts = encode_prompts(run.tokenizer, rows, run.max_prompt_tokens)
    for s in range(0, len(rows), cfg.train.micro_batch):
        groups = []
        for p, prompt in zip(rows[s : s + cfg.train.micro_batch], prompts[s : s + cfg.train.micro_batch]):
            groups.append(
                RolloutGroup(
                    p, prompt, [response_completion(run.tokenizer, p, key, cfg.rollout.max_new_tokens)]
                )
            )
        batch = build_batch(groups, run.pad_id)
        logprobs = run.train_engine.logprobs(batch, cfg.train.micro_batch)
        total += float(-(logprobs * batch.mask).sum())
        tokens += int(batch.mask.sum())
    return {"eval/nll": total / max(tokens, 1), "eval/nll_tokens": float(tokens)}


def perplexity(metrics: dict) -> dict[str, float]:
    """`actor/perplexity` = exp(loss/nll) where the step logged one (token_mean: per token)."""
    nll = metrics.get("loss/nll")
    return {} if nll is None else {"actor/perplexity": float(torch.exp(torch.tensor(float(nll))))}
