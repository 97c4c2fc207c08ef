"""Shared records that flow through the loop: Problem -> Completion -> RolloutGroup -> TrainBatch.

Owns: the plain data records (and `RewardResult`, what a verifier returns; `UpdateMetrics`, what an
engine's optimizer update reports) and their documented shapes, and the mapping of `Problem` to and from
a verl / Reasoning360 (Guru) parquet row. Does not own: reading files (`data.schema`), scoring
(`rewards`), or building tensors from rollouts (`trainer.batching`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from reasonrl.errors import InputError

if TYPE_CHECKING:  # keep `import reasonrl.types` free of torch
    import torch


def missing(value: Any) -> bool:
    """Whether a field's value stands for nothing: None, or NaN (pandas' missing value)."""
    return value is None or (isinstance(value, float) and value != value)


@dataclass
class Problem:
    """One training / evaluation problem; the in-memory form of a verl/Reasoning360 parquet row.

    prompt:        chat messages, e.g. [{"role": "user", "content": "..."}]
    ground_truth:  `reward_model.ground_truth` (string, number, list or JSON-encoded structure)
    data_source:   routes the problem to a verifier by prefix (e.g. "math__dapo", "openai/gsm8k")
    ability:       free-form domain label ("math", "codegen", ...)
    extra_info:    anything else the verifier needs (tests, puzzle metadata, split, index)
    verifier:      explicit verifier name; overrides routing by `data_source` when set
    apply_chat_template: False for prompts already rendered for one model (AReaL-boba's R1-Distill
                   text): the messages' text is tokenised as it is, without the tokenizer's template
    chat_template_kwargs: extra arguments of the tokenizer's chat template for this prompt, e.g.
                   {"enable_thinking": false} for Qwen3 (a row's own, over `data.chat_template_kwargs`)
    """

    prompt: list[dict[str, str]]
    ground_truth: Any
    data_source: str
    ability: str = ""
    extra_info: dict[str, Any] = field(default_factory=dict)
    verifier: str | None = None
    uid: str = ""
    apply_chat_template: bool = True
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def user_text(self) -> str:
        """Content of the last user message (what a plain-text model sees)."""
        for msg in reversed(self.prompt):
            if msg.get("role") == "user":
                return msg.get("content", "")
        return self.prompt[-1].get("content", "") if self.prompt else ""

    def to_row(self) -> dict[str, Any]:
        """verl / Reasoning360 row. Non-string ground truths are kept as-is (parquet stores them)."""
        extra = dict(self.extra_info)
        if self.verifier:
            extra["verifier"] = self.verifier
        if self.uid:
            extra.setdefault("uid", self.uid)
        return {
            "data_source": self.data_source,
            "prompt": [dict(m) for m in self.prompt],
            "ability": self.ability,
            "reward_model": {"style": "rule", "ground_truth": self.ground_truth},
            "extra_info": extra,
            "apply_chat_template": self.apply_chat_template,
            # only when set: an empty mapping has no parquet type
            **(
                {"chat_template_kwargs": dict(self.chat_template_kwargs)} if self.chat_template_kwargs else {}
            ),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any], where: str = "row") -> Problem:
        """Build from a verl / Reasoning360 row; `where` names the row in error messages."""
        # a null data_source / prompt counts as missing (parquet stores absent keys as null)
        if not isinstance(row, dict):
            raise InputError(f"{where}: a row must be a mapping, got {type(row).__name__}")
        row = {k: v for k, v in row.items() if not missing(v)}  # NaN: pandas' missing value
        absent = [k for k in ("data_source", "prompt", "reward_model") if row.get(k) is None and
                  not (k == "prompt" and row.get("raw_prompt"))]  # fmt: skip
        if absent:
            raise InputError(
                f"{where}: missing field(s) {absent}; a row needs data_source, prompt, reward_model"
            )
        if not isinstance(row["data_source"], str) or not row["data_source"].strip():
            raise InputError(f"{where}: field 'data_source' must be a non-empty string")
        prompt = _prompt_messages(row, where)
        rm = _mapping(row["reward_model"], "reward_model", where)
        if "ground_truth" not in rm:
            raise InputError(f"{where}: field 'reward_model' has no 'ground_truth'")
        if rm["ground_truth"] is None:
            raise InputError(
                f"{where}: field 'reward_model.ground_truth' is null (every completion would score 0)"
            )
        extra = _mapping(row.get("extra_info") or {}, "extra_info", where)
        verifier = extra.pop("verifier", None)  # our own keys, written by to_row
        uid = extra.pop("uid", None)
        return cls(
            prompt=prompt,
            ground_truth=rm["ground_truth"],
            data_source=str(row["data_source"]),
            ability=str(row.get("ability") or ""),
            extra_info=extra,
            verifier=verifier or None,
            uid=str(uid if uid is not None else extra.get("index", "")),
            apply_chat_template=_flag(row.get("apply_chat_template", True), "apply_chat_template", where),
            chat_template_kwargs=template_kwargs(row.get("chat_template_kwargs"), where),
        )


@dataclass
class Completion:
    """One sampled response.

    token_ids:        completion tokens (no prompt, no padding), length T_i
    text:             decoded completion (special tokens removed)
    sampler_logprobs: the rollout engine's log-probability of each sampled token, length T_i
    finish_reason:    "stop" (EOS / stop string) or "length" (hit max_new_tokens)
    tool_mask:        True on the tokens a tool wrote (its outputs: no loss on them), or None: the model
                      wrote every token (`rollout.tools`)
    model_text:       the text without the tool outputs (what the verifiers score), or None: `text`
    tool_calls:       each tool call's status ("success", "error", "timeout", ...), in order
    guided:           a demonstration put in the group (`algo.guidance`), not sampled: its sampler
                      log-probs are unknown (0 here)
    turns:            the model's attempts in it (`rollout.interaction`: feedback between them)
    env_reward:       its environment's `get_reward()` (`rollout.tools.environment`), or its OpenRLHF agent's
                      steps' rewards summed (`rollout.agent`), or verl's tools' (`tool_rewards`), or None
    env_reason:       how that went ("environment_reward", "no_environment_reward", "agent_done",
                      "agent_unfinished", "error: ..."), or "": the completion was no episode
    env_logs:         the numbers its OpenRLHF agent's last step logged (`extra_logs`), or None
    tool_rewards:     the step reward of each call of verl's tools (`rollout.tools.verl_config`), in order;
                      `env_reward` is their sum
    env_functions:    what each TRL reward function taking `environments=` gave, called beside its
                      environment's instance ({name: {value, metrics, extra} or {error}}), or None
    """

    token_ids: list[int]
    text: str
    sampler_logprobs: list[float]
    finish_reason: str = "stop"
    tool_mask: list[bool] | None = None
    model_text: str | None = None
    tool_calls: tuple[str, ...] = ()
    guided: bool = False
    turns: int = 1
    env_reward: float | None = None
    env_reason: str = ""
    env_logs: dict[str, float] | None = None
    tool_rewards: tuple[float, ...] = ()
    env_functions: dict[str, dict] | None = None

    @property
    def answer_text(self) -> str:
        """What the verifiers score: the model's own text."""
        return self.text if self.model_text is None else self.model_text


@dataclass
class RewardResult:
    """What a verifier returns: `score` in [0, 1] for correctness verifiers (shaping terms may be
    negative) and `info`, whose standard entries have typed accessors: `extracted` (the answer string
    compared, or None), `reason` ("correct", "wrong", "no_answer", "timeout", "error: ...") and
    `correctness` (the routed verifier's own 0..1 score when the runner combined weighted terms, else
    the score). Anything else a verifier reports stays in `info`."""

    score: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def extracted(self) -> Any:
        return self.info.get("extracted")

    @property
    def reason(self) -> str:
        return str(self.info.get("reason") or "")

    @property
    def correctness(self) -> float:
        return float(self.info.get("correctness", self.score))


@dataclass
class RolloutGroup:
    """The n completions of one prompt, with their rewards (and the verifiers' results) once scored."""

    problem: Problem
    prompt_ids: list[int]
    completions: list[Completion]
    rewards: list[float] = field(default_factory=list)
    results: list[RewardResult] = field(default_factory=list)

    @property
    def correctness(self) -> list[float]:
        """Each completion's correctness (`RewardResult.correctness`: the routed verifier's own score,
        without `reward.weights`' shaping terms): what "solved" means for metrics, the curriculum and evaluation.
        A group built from scores alone (no verifier results) gives its rewards."""
        return [r.correctness for r in self.results] if self.results else list(self.rewards)


@dataclass
class TrainBatch:
    """Tensors for one policy update; B sequences, P prompt positions, T completion positions.

    input_ids:        long [B, P+T]  left-padded prompt then right-padded completion
    attention_mask:   long [B, P+T]  1 on real tokens
    mask:             bool [B, T]    trainable completion tokens (False on padding / masked-out rows)
    advantages:       float [B, T]   per-token advantages (sequence advantages broadcast over T)
    rewards:          float [B]      per-sequence scalar reward
    group_ids:        long [B]       index of the prompt group each row belongs to
    old_logprobs:     float [B, T]   policy at sampling time, recomputed by the trainer (or None)
    ref_logprobs:     float [B, T]   reference policy (or None)
    sampler_logprobs: float [B, T]   what the rollout engine reported (or None)
    lengths:          long [B]       completion lengths (tokens)
    truncated:        bool [B]       the completion hit max_new_tokens
    values:           float [B, T]   critic values (PPO / GAE), or None
    returns:          float [B, T]   value targets from a token-level estimator (GAE), or None
    is_weights:       float [B, T]   truncated importance weights vs the sampler (TIS), or None
    pg_mask:          bool [B, T]    tokens the policy-gradient term trains (algo.top_entropy_quantile), or
                                     None: all of `mask`
    cov_select:       bool [B, T]    tokens a covariance loss acts on (clip_cov / kl_cov, chosen once per step
                                     over every rank's tokens by `trainer.step.attach_cov_selection`), or None
    term_rewards:     float [B, K]   each reward term's raw score (gdpo), or None
    term_weights:     K floats       the terms' weights (`reward.weights`, then 1 for a shaping term), or None
    guided:           bool [B]       the row is a demonstration (`algo.guidance`), or None: none is
    extras:           free-form per-row data for plugins (the trainer itself uses none)
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    mask: torch.Tensor
    prompt_len: int
    advantages: torch.Tensor | None = None
    rewards: torch.Tensor | None = None
    group_ids: torch.Tensor | None = None
    old_logprobs: torch.Tensor | None = None
    ref_logprobs: torch.Tensor | None = None
    sampler_logprobs: torch.Tensor | None = None
    lengths: torch.Tensor | None = None
    truncated: torch.Tensor | None = None
    values: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    is_weights: torch.Tensor | None = None
    pg_mask: torch.Tensor | None = None
    cov_select: torch.Tensor | None = None
    term_rewards: torch.Tensor | None = None
    term_weights: tuple[float, ...] | None = None
    guided: torch.Tensor | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    # [B, P+T] fields (left-padded prompt, right-padded completion); [B, T] completion fields
    FULL_FIELDS = ("input_ids", "attention_mask")
    COMPLETION_FIELDS = ("mask", "advantages", "old_logprobs", "ref_logprobs", "sampler_logprobs", "values",
                         "returns", "is_weights", "pg_mask", "cov_select")  # fmt: skip

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    def trimmed(self) -> TrainBatch:
        """Without the prompt columns no row uses (left padding) and the completion columns after the
        longest completion; every field keeps its meaning (positions come from the attention mask)."""
        p, used = self.prompt_len, self.attention_mask.bool().any(0)
        first = int(used[:p].nonzero()[0]) if bool(used[:p].any()) else p
        last = int(used[p:].nonzero()[-1]) + 1 if bool(used[p:].any()) else 1
        if first == 0 and last == self.mask.shape[1]:
            return self
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in self.FULL_FIELDS:
            out[name] = out[name][:, first : p + last]
        for name in self.COMPLETION_FIELDS:
            if out[name] is not None:
                out[name] = out[name][:, :last]
        out["prompt_len"] = p - first
        return TrainBatch(**out)

    def select(self, idx: torch.Tensor | slice) -> TrainBatch:
        """Rows `idx` of every tensor field (non-tensor extras are shared)."""

        def pick(t):
            return None if t is None else t[idx]

        return TrainBatch(
            input_ids=self.input_ids[idx],
            attention_mask=self.attention_mask[idx],
            mask=self.mask[idx],
            prompt_len=self.prompt_len,
            advantages=pick(self.advantages),
            rewards=pick(self.rewards),
            group_ids=pick(self.group_ids),
            old_logprobs=pick(self.old_logprobs),
            ref_logprobs=pick(self.ref_logprobs),
            sampler_logprobs=pick(self.sampler_logprobs),
            lengths=pick(self.lengths),
            truncated=pick(self.truncated),
            values=pick(self.values),
            returns=pick(self.returns),
            is_weights=pick(self.is_weights),
            pg_mask=pick(self.pg_mask),
            cov_select=pick(self.cov_select),
            term_rewards=pick(self.term_rewards),
            term_weights=self.term_weights,
            guided=pick(self.guided),
            extras={
                k: (v[idx] if hasattr(v, "shape") and getattr(v, "ndim", 0) > 0 else v)
                for k, v in self.extras.items()
            },
        )


class UpdateMetrics(dict):
    """One optimizer update's metrics (name -> value), as a train engine returns them. `token_means`
    names the per-token diagnostics (entropy, clip fractions, ...) that are means over the update's
    `tokens` trained tokens (every rank's), so a step's updates are averaged weighted by `tokens`
    (`trainer.metrics.mean_metrics`): an update of short answers counts less than one of long ones."""

    def __init__(self, values: Mapping[str, Any] = (), token_means: frozenset[str] = frozenset(),
                 tokens: float = 0.0) -> None:  # fmt: skip
        super().__init__(values)
        self.token_means = frozenset(token_means)
        self.tokens = float(tokens)


def _flag(value: Any, name: str, where: str) -> bool:
    if value is None:
        return True
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, bool):
        raise InputError(f"{where}: field {name!r} must be true or false, got {value!r}")
    return value


# apply_chat_template's own arguments, which reasonrl sets: not a template's extra variables ("tools", the
# tool schemas a template shows the model, is one a recipe may set: rollout.tools, docs/rollouts.md)
RESERVED_TEMPLATE_KWARGS = frozenset(
    {"conversation", "add_generation_prompt", "tokenize", "return_dict", "return_tensors", "padding",
     "truncation", "max_length", "continue_final_message", "documents", "chat_template"}
)  # fmt: skip


def template_kwargs(value: Any, where: str, label: str | None = None) -> dict[str, Any]:
    """A prompt's chat-template arguments ({} when absent): a mapping (or a JSON string of one) whose
    keys are template variables, none of them one of apply_chat_template's own arguments. Errors name
    `where` (a file's row) and the field, or `label` (a recipe key, a flag) instead."""
    if value is None:
        return {}
    out = _mapping(value, "chat_template_kwargs", where)
    named = label or f"{where}: field 'chat_template_kwargs'"
    for k in out:
        if not isinstance(k, str) or not k.isidentifier() or k in RESERVED_TEMPLATE_KWARGS:
            raise InputError(f"{named} has the key {k!r}, which is not a chat-template variable (an identifier "
                             "other than apply_chat_template's own arguments)")  # fmt: skip
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in out.items()}


def _mapping(value: Any, name: str, where: str) -> dict[str, Any]:
    """A row field that must be a mapping (or a JSON string of one, as verl / Guru files store it)."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: field {name!r} is not valid JSON ({e.msg} at char {e.pos})") from None
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: field {name!r} must be a mapping, got {type(value).__name__}")
    return dict(value)


CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function", "ipython")


def _prompt_messages(row: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """Chat messages from `prompt` (a list of {role, content}, or a plain string); Reasoning360's
    HumanEval / MBPP preprocessing writes `prompt: []` with the text in `raw_prompt`."""
    prompt = row.get("prompt")
    if prompt is None or (hasattr(prompt, "__len__") and len(prompt) == 0 and not isinstance(prompt, str)):
        raw = row.get("raw_prompt")
        if isinstance(raw, str) and raw.strip():
            return [{"role": "user", "content": raw}]
    if isinstance(prompt, str):
        if not prompt.strip():
            raise InputError(f"{where}: field 'prompt' is an empty string")
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, (str, bytes, Mapping)) or not hasattr(prompt, "__iter__"):
        raise InputError(f"{where}: field 'prompt' must be a list of {{role, content}} messages, "
                         f"got {type(prompt).__name__}")  # fmt: skip
    messages = list(prompt)
    if not messages:
        raise InputError(f"{where}: field 'prompt' is empty (and there is no 'raw_prompt')")
    for i, m in enumerate(messages):
        if (
            not isinstance(m, Mapping)
            or not isinstance(m.get("role"), str)
            or not isinstance(m.get("content"), str)
        ):
            raise InputError(f"{where}: field 'prompt[{i}]' must be a {{role: str, content: str}} message")
        if m["role"] not in CHAT_ROLES:  # a chat template skips a role it does not know, silently
            raise InputError(
                f"{where}: field 'prompt[{i}].role' is {m['role']!r}, not one of {', '.join(CHAT_ROLES)}"
                " (ShareGPT's human / gpt are user / assistant)"
            )
    if not any(m["content"].strip() for m in messages):
        raise InputError(f"{where}: field 'prompt' has no text (every message's content is blank)")
    return [dict(m) for m in messages]
