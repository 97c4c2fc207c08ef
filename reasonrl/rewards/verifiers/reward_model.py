"""A scalar reward model as a reward term ("reward_model"): a Hugging Face sequence-classification model
with one label reads the prompt and the completion, and its one logit is the score. This is how TRL's
GRPOTrainer uses a model in `reward_funcs` (its `--reward_model_name_or_path`), verl its
`reward_model.enable`, OpenRLHF its `--reward_pretrain`. In reasonrl it is a term of `reward.weights`
beside (or instead of) the routed verifier's correctness:

    reward:
      weights: {correctness: 1.0, reward_model: 0.1}
      options: {reward_model: {path: Skywork/Skywork-Reward-V2-Qwen3-0.6B, device: cuda}}

Owns: the `reward_model` verifier and its batch form `score_batch` (the runner's "batch" run mode: one
call per batch, in a thread of the calling process, so the model loads once per process and scores
`batch_size` rows per forward), loading each (path, device, dtype) once (`load`), building a row's input
(`model_input`) and the load-time checks of its options.
Does not own: combining terms or the run modes (`rewards.runner`), the hub probe (`models.hub`).

Options (`reward.options.reward_model`): `path` (a local directory or a hub id; required), `device`
("auto": the rank's GPU where there is one, else "cpu"; or any torch device), `dtype` ("auto": bfloat16
on a GPU, float32 on the CPU; "float32", "bfloat16", "float16"), `batch_size` (rows per forward) and
`max_length` (tokens the model reads; a longer input keeps its last `max_length` tokens, so the
completion's end, where the score is read, is always seen; info["truncated"] says so).

The input: with a chat template, the model's own template renders the prompt's messages and an assistant
turn holding the completion (TRL's way; the row's `chat_template_kwargs` go to the template too); without
one (encoder reward models such as OpenAssistant's DeBERTa), the prompt's last user message and the
completion are a text pair. The completion is put in as it is: a template that rewrites an assistant turn
(Qwen3's moves a `<think>` block into its own field) is not applied to it.

The policy writes the completion, so it is an adversary of this model: a completion that spells a special
token of the reward model's tokenizer (`<|im_end|>`, `<|im_start|>assistant`) would otherwise become that
token, end the assistant's turn early and open a turn of its own making. The completion is tokenised with
special tokens split into plain text, so it can never close or forge a turn (tested).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem

DTYPES = ("auto", "float32", "bfloat16", "float16")
_SLOT = "\x00reasonrl-completion\x00"  # stands for the completion while the chat template renders
_models: dict[tuple[str, str, str], tuple[Any, Any]] = {}  # (path, device, dtype) -> (model, tokenizer)
_lock = threading.Lock()  # one load and one forward at a time (the training and validation runners share it)


def _device(device: str) -> str:
    """`device` as a torch device; "auto" and "cuda" name the rank's own GPU (cuda:LOCAL_RANK under
    torchrun): the model loads in a runner thread, and a thread starts on GPU 0 whatever the rank set."""
    import os

    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if device == "cuda" else device


def load(path: str, device: str = "auto", dtype: str = "auto") -> tuple[Any, Any]:
    """(model, tokenizer) of the reward model at `path`, loaded once per process; ValueError naming the
    path when it is not a one-label sequence classifier or its tokenizer has no pad or end token."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from reasonrl.models.hub import is_hub_id, offline_unless_reachable

    device = _device(device)
    if dtype == "auto":
        dtype = "float32" if device == "cpu" else "bfloat16"
    key = (path, device, dtype)
    if key in _models:
        return _models[key]
    offline_unless_reachable(path)
    path = path if is_hub_id(path) else str(Path(path).expanduser())
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model, info = AutoModelForSequenceClassification.from_pretrained(
            path, dtype=getattr(torch, dtype), output_loading_info=True)  # fmt: skip
    except (OSError, ValueError) as e:
        raise ValueError(f"reward model {path!r} cannot be loaded as a sequence classifier: {e}") from None
    _check_config(path, model.config)
    if info.get("missing_keys"):  # transformers would fill them at random: a random score head scores noise
        raise ValueError(f"reward model {path!r}: its checkpoint lacks {sorted(info['missing_keys'])[:3]} (a "
                         f"trained sequence-classification reward model has them all)")  # fmt: skip
    if tokenizer.pad_token_id is None:  # as TRL: the end token pads
        if tokenizer.eos_token is None:
            raise ValueError(f"reward model {path!r}: its tokenizer has no pad and no end token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id  # where the score is read: the last token not padding
    _models[key] = (model.to(device).eval(), tokenizer)
    return _models[key]


def model_input(
    tokenizer, response: str, problem: Problem, max_length: int
) -> tuple[list[int], list[int] | None, bool]:
    """(token ids, token type ids or None, truncated) of one row for the reward model (module docstring)."""
    if not tokenizer.chat_template:  # an encoder reward model: (question, answer) as a text pair

        def pair(**cut) -> tuple[list[int], list[int] | None]:
            enc = tokenizer(problem.user_text, response, split_special_tokens=True, **cut)
            return enc["input_ids"], enc.get("token_type_ids")

        ids, types = pair()
        if len(ids) <= max_length:
            return ids, types, False
        return (*pair(truncation="longest_first", max_length=max_length), True)  # cut from the longer side
    messages = [dict(m) for m in problem.prompt] + [{"role": "assistant", "content": _SLOT}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, **problem.chat_template_kwargs)
    if text.count(_SLOT) != 1:
        raise ValueError("the reward model's chat template does not show an assistant turn's content as it is; "
                         "it cannot read a completion")  # fmt: skip
    before, after = text.split(_SLOT)
    ids = (tokenizer(before, add_special_tokens=False)["input_ids"]
           # the completion: special tokens spelled in it stay text
           + tokenizer(response, add_special_tokens=False, split_special_tokens=True)["input_ids"]
           + tokenizer(after, add_special_tokens=False)["input_ids"])  # fmt: skip
    return ids[-max_length:], None, len(ids) > max_length


def score_batch(responses: list[str], problems: list[Problem], path: str | None = None, device: str = "auto",
                dtype: str = "auto", batch_size: int = 8, max_length: int = 4096) -> list[RewardResult]:  # fmt: skip
    """The reward model's score of each (response, problem), `batch_size` rows per forward, rows of
    similar length together (padding changes no score: the model reads each row's last real token)."""
    import torch

    with _lock:
        model, tokenizer = load(path, device, dtype)
        rows = [model_input(tokenizer, r, p, max_length) for r, p in zip(responses, problems)]
        scores = [0.0] * len(rows)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
        pad = tokenizer.pad_token_id
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(rows[i][0]) for i in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros_like(ids)
            types = torch.zeros_like(ids) if rows[chunk[0]][1] is not None else None
            for k, i in enumerate(chunk):
                n = len(rows[i][0])
                ids[k, :n], mask[k, :n] = torch.tensor(rows[i][0]), 1
                if types is not None:
                    types[k, :n] = torch.tensor(rows[i][1])
            extra = {"token_type_ids": types.to(model.device)} if types is not None else {}
            with torch.inference_mode():
                logits = model(
                    input_ids=ids.to(model.device), attention_mask=mask.to(model.device), **extra
                ).logits
            for k, i in enumerate(chunk):
                scores[i] = float(logits[k, 0].float())
    return [RewardResult(s, {"extracted": None, "reason": "scored", "truncated": row[2], "tokens": len(row[0])})
            for s, row in zip(scores, rows)]  # fmt: skip


@VERIFIERS.register("reward_model")
def reward_model(response: str, problem: Problem, path: str | None = None, device: str = "auto", dtype: str = "auto",
                 batch_size: int = 8, max_length: int = 4096) -> RewardResult:  # fmt: skip
    """The reward model's score of one response (the runner calls `score_batch` on a whole batch)."""
    return score_batch([response], [problem], path, device, dtype, batch_size, max_length)[0]


def _check_options(options: dict[str, Any]) -> None:
    """ValueError naming the first option that cannot work (before any model loads)."""
    import torch

    if options.get("dtype", "auto") not in DTYPES:
        raise ValueError(f"option 'dtype' must be one of {', '.join(DTYPES)}, got {options['dtype']!r}")
    device = options.get("device", "auto")
    if device != "auto":
        try:
            torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"option 'device' must be 'auto' or a torch device ('cpu', 'cuda:0'), "
                             f"got {device!r}") from None  # fmt: skip
    for key in ("batch_size", "max_length"):
        if options.get(key, 1) < 1:
            raise ValueError(f"option {key!r} must be >= 1, got {options[key]!r}")


def _check_setup(options: dict[str, Any], problem: Problem | None = None) -> None:  # noqa: ARG001
    """A path is set; a local one is a model directory whose config has one label."""
    from reasonrl.models.hub import is_hub_id

    path = options.get("path")
    if not path or not isinstance(path, str):
        raise ValueError(
            f"option 'path' (the reward model: a local directory or a hub id) is required, got {path!r}"
        )
    if is_hub_id(path):
        return  # read when it loads (the hub may be unreachable until then: models.hub)
    if not (Path(path).expanduser() / "config.json").is_file():
        raise ValueError(f"option 'path': {path!r} is not a model directory (no config.json)")
    from transformers import AutoConfig

    _check_config(path, AutoConfig.from_pretrained(str(Path(path).expanduser())))


def _check_config(path: str, config) -> None:
    """ValueError unless `config` is a sequence classifier's with one label (its score)."""
    archs = config.architectures or []
    if archs and not any(a.endswith("ForSequenceClassification") for a in archs):
        raise ValueError(f"reward model {path!r} is a {archs[0]}, not a sequence classifier with one label "
                         f"(AutoModelForSequenceClassification, as TRL's RewardTrainer saves)")  # fmt: skip
    if config.num_labels != 1:
        raise ValueError(
            f"reward model {path!r} has {config.num_labels} labels; a reward model has one (its score)"
        )


def _prepare(options: dict[str, Any]) -> str:
    """Load the model now (`rewards.services.prepare_terms`, before the policy): one line saying what."""
    device, dtype = str(options.get("device", "auto")), str(options.get("dtype", "auto"))
    with _lock:
        model, _ = load(str(options.get("path")), device, dtype)
    params = sum(p.numel() for p in model.parameters())
    return f"reward model {options.get('path')}: {params / 1e6:.1f}M parameters on {model.device} ({model.dtype})"


reward_model.prepare = _prepare  # type: ignore[attr-defined]
reward_model.score_batch = score_batch  # type: ignore[attr-defined]
reward_model.run_mode = "batch"  # type: ignore[attr-defined]
reward_model.check_options = _check_options  # type: ignore[attr-defined]
reward_model.check_setup = _check_setup  # type: ignore[attr-defined]
