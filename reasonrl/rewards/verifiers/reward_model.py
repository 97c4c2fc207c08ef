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
completion's end, where the score is read, is always seen; info["truncated"] says so), `format` and
`normalize` (below).

`format`: "hf" (a sequence classifier as TRL and verl train it: the score is the one logit at the last
token that is not padding), "openrlhf" (a checkpoint of OpenRLHF's `train_rm`: a decoder with a one-output
value head named by its config's `value_head_prefix`, read as OpenRLHF reads it, at the end token it
appends: the rendered text loses its trailing newlines and ends with " " + the tokenizer's end token), or
"auto" (openrlhf when the config has `value_head_prefix` or names the architecture "RewardModel", else
hf). `normalize: true` scores (score - mean) / std with the mean and std the reward model's training saved
in its config (OpenRLHF's `--reward.normalize_enable`).

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

import re
import threading
from pathlib import Path
from typing import Any, NamedTuple

from reasonrl.rewards.base import VERIFIERS, RewardResult
from reasonrl.types import Problem

DTYPES = ("auto", "float32", "bfloat16", "float16")
FORMATS = ("auto", "hf", "openrlhf")
_SLOT = "\x00reasonrl-completion\x00"  # stands for the completion while the chat template renders
_models: dict[tuple[str, ...], Loaded] = {}  # (path, device, dtype, format, value head) -> the loaded model
_lock = threading.Lock()  # one load and one forward at a time (the training and validation runners share it)


class Loaded(NamedTuple):
    model: Any
    tokenizer: Any
    openrlhf: bool  # OpenRLHF's format: the value head read at the appended end token (module docstring)


def _device(device: str) -> str:
    """`device` as a torch device; "auto" and "cuda" name the rank's own GPU (cuda:LOCAL_RANK under
    torchrun): the model loads in a runner thread, and a thread starts on GPU 0 whatever the rank set."""
    import os

    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if device == "cuda" else device


def load(path: str, device: str = "auto", dtype: str = "auto", format: str = "auto",  # noqa: A002
         value_head_prefix: str = "score") -> Loaded:  # fmt: skip
    """The reward model at `path` (model, tokenizer, format), loaded once per process; ValueError naming
    the path when it is not a one-label sequence classifier (or an OpenRLHF reward model) or its tokenizer
    has no pad or end token."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from reasonrl.models.hub import is_hub_id, offline_unless_reachable

    device = _device(device)
    if dtype == "auto":
        dtype = "float32" if device == "cpu" else "bfloat16"
    key = (path, device, dtype, format, value_head_prefix)
    if key in _models:
        return _models[key]
    offline_unless_reachable(path)
    path = path if is_hub_id(path) else str(Path(path).expanduser())
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"reward model {path!r} cannot be loaded: {e}") from None
    openrlhf = _is_openrlhf(config, format)
    _check_config(path, config, openrlhf)
    extra: dict[str, Any] = {}
    if openrlhf:  # one output; the value head under the name the config gives (OpenRLHF reads it first)
        prefix = getattr(config, "value_head_prefix", None) or value_head_prefix
        extra = {"num_labels": 1} | (
            {"key_mapping": {rf"^{re.escape(prefix)}\.": "score."}} if prefix != "score" else {}
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model, info = AutoModelForSequenceClassification.from_pretrained(
            path, dtype=getattr(torch, dtype), output_loading_info=True, **extra)  # fmt: skip
    except (OSError, ValueError) as e:
        raise ValueError(f"reward model {path!r} cannot be loaded as a sequence classifier: {e}") from None
    if info.get("missing_keys"):  # transformers would fill them at random: a random score head scores noise
        raise ValueError(f"reward model {path!r}: its checkpoint lacks {sorted(info['missing_keys'])[:3]} (a "
                         f"trained sequence-classification reward model has them all)")  # fmt: skip
    if openrlhf and not isinstance(getattr(model, "score", None), torch.nn.Linear):
        raise ValueError(f"reward model {path!r}: {type(model).__name__} has no `score` head to hold OpenRLHF's "
                         f"value head")  # fmt: skip
    if tokenizer.pad_token_id is None:  # as TRL: the end token pads
        if tokenizer.eos_token is None:
            raise ValueError(f"reward model {path!r}: its tokenizer has no pad and no end token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
    if openrlhf and tokenizer.eos_token_id is None:
        raise ValueError(
            f"reward model {path!r}: its tokenizer has no end token (OpenRLHF reads the score there)"
        )
    model.config.pad_token_id = tokenizer.pad_token_id  # where the score is read: the last token not padding
    _models[key] = Loaded(model.to(device).eval(), tokenizer, openrlhf)
    return _models[key]


def _is_openrlhf(config, format: str) -> bool:  # noqa: A002
    if format != "auto":
        return format == "openrlhf"
    return hasattr(config, "value_head_prefix") or "RewardModel" in (config.architectures or [])


def model_input(
    tokenizer, response: str, problem: Problem, max_length: int, openrlhf: bool = False
) -> tuple[list[int], list[int] | None, bool]:
    """(token ids, token type ids or None, truncated) of one row for the reward model (module docstring)."""
    if openrlhf:
        ids = _openrlhf_ids(tokenizer, response, problem)
        return ids[-max_length:], None, len(ids) > max_length
    if not tokenizer.chat_template:  # an encoder reward model: (question, answer) as a text pair

        def pair(**cut) -> tuple[list[int], list[int] | None]:
            enc = tokenizer(problem.user_text, response, split_special_tokens=True, **cut)
            return enc["input_ids"], enc.get("token_type_ids")

        ids, types = pair()
        if len(ids) <= max_length:
            return ids, types, False
        return (*pair(truncation="longest_first", max_length=max_length), True)  # cut from the longer side
    before, after = _around_completion(tokenizer, problem)
    ids = (tokenizer(before, add_special_tokens=False)["input_ids"] + _completion(tokenizer, response)
           + tokenizer(after, add_special_tokens=False)["input_ids"])  # fmt: skip
    return ids[-max_length:], None, len(ids) > max_length


def _completion(tokenizer, response: str) -> list[int]:
    """The completion's ids: special tokens spelled in it stay text."""
    return tokenizer(response, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def _around_completion(tokenizer, problem: Problem) -> tuple[str, str]:
    """The chat template's text before and after an assistant turn's content."""
    messages = [dict(m) for m in problem.prompt] + [{"role": "assistant", "content": _SLOT}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, **problem.chat_template_kwargs)
    if text.count(_SLOT) != 1:
        raise ValueError("the reward model's chat template does not show an assistant turn's content as it is; "
                         "it cannot read a completion")  # fmt: skip
    before, after = text.split(_SLOT)
    return before, after


def _openrlhf_ids(tokenizer, response: str, problem: Problem) -> list[int]:
    """The row as OpenRLHF's reward datasets give it to the model: the rendered conversation (or, with no
    template, the prompt's text followed by the completion) without its trailing newlines, ending with
    " " + the end token unless it ends with that token already."""
    from reasonrl.data.prompts import plain_text

    if tokenizer.chat_template:
        before, after = _around_completion(tokenizer, problem)
    else:
        before, after = plain_text(problem), ""
    tail = after.rstrip("\n")
    if not tail:  # the completion ends the text: its trailing newlines go (and the prompt's, if it is empty)
        response = response.rstrip("\n")
        before = before if response else before.rstrip("\n")
    ids = tokenizer(before, add_special_tokens=False)["input_ids"] + _completion(tokenizer, response)
    ids += tokenizer(tail, add_special_tokens=False)["input_ids"] if tail else []
    if ids[-1:] != [tokenizer.eos_token_id]:
        ids += tokenizer(" " + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    return ids


def _scores(loaded: Loaded, ids, mask, extra: dict[str, Any]):
    """One score per row of a right-padded batch: the one logit at the last token not padding (hf), or
    OpenRLHF's value head at the row's last token (its appended end token)."""
    import torch

    model = loaded.model
    if not loaded.openrlhf:
        return model(input_ids=ids, attention_mask=mask, **extra).logits[:, 0]
    hidden = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
    last = mask.sum(dim=1) - 1
    return model.score(hidden[torch.arange(len(ids), device=ids.device), last]).squeeze(-1)


def _normalized(path: str, config, scores: list[float]) -> list[float]:
    mean, std = getattr(config, "mean", None), getattr(config, "std", None)
    if not isinstance(mean, (int, float)) or not isinstance(std, (int, float)) or std <= 0:
        raise ValueError(f"reward model {path!r}: normalize needs the mean and std (> 0) its training saved in "
                         f"its config (OpenRLHF's train_rm saves them); it has mean={mean!r}, std={std!r}")  # fmt: skip
    return [(s - mean) / std for s in scores]


def score_batch(responses: list[str], problems: list[Problem], path: str | None = None, device: str = "auto",
                dtype: str = "auto", batch_size: int = 8, max_length: int = 4096, format: str = "auto",  # noqa: A002
                normalize: bool = False, value_head_prefix: str = "score") -> list[RewardResult]:  # fmt: skip
    """The reward model's score of each (response, problem), `batch_size` rows per forward, rows of
    similar length together (padding changes no score: the model reads each row's last real token)."""
    import torch

    with _lock:
        loaded = load(path, device, dtype, format, value_head_prefix)
        model, tokenizer = loaded.model, loaded.tokenizer
        rows = [
            model_input(tokenizer, r, p, max_length, loaded.openrlhf) for r, p in zip(responses, problems)
        ]
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
                chunk_scores = _scores(loaded, ids.to(model.device), mask.to(model.device), extra)
            for k, i in enumerate(chunk):
                scores[i] = float(chunk_scores[k].float())
        if normalize:
            scores = _normalized(str(path), model.config, scores)
    return [RewardResult(s, {"extracted": None, "reason": "scored", "truncated": row[2], "tokens": len(row[0])})
            for s, row in zip(scores, rows)]  # fmt: skip


@VERIFIERS.register("reward_model")
def reward_model(response: str, problem: Problem, path: str | None = None, device: str = "auto", dtype: str = "auto",
                 batch_size: int = 8, max_length: int = 4096, format: str = "auto", normalize: bool = False,  # noqa: A002
                 value_head_prefix: str = "score") -> RewardResult:  # fmt: skip
    """The reward model's score of one response (the runner calls `score_batch` on a whole batch)."""
    return score_batch([response], [problem], path, device, dtype, batch_size, max_length, format, normalize,
                       value_head_prefix)[0]  # fmt: skip


def _check_options(options: dict[str, Any]) -> None:
    """ValueError naming the first option that cannot work (before any model loads)."""
    import torch

    if options.get("dtype", "auto") not in DTYPES:
        raise ValueError(f"option 'dtype' must be one of {', '.join(DTYPES)}, got {options['dtype']!r}")
    if options.get("format", "auto") not in FORMATS:
        raise ValueError(f"option 'format' must be one of {', '.join(FORMATS)}, got {options['format']!r}")
    if not re.fullmatch(r"[A-Za-z_]\w*", options.get("value_head_prefix", "score")):
        raise ValueError(
            f"option 'value_head_prefix' must be a module name, got {options['value_head_prefix']!r}"
        )
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
    """A path is set; a local one is a model directory whose config is a reward model's (`_check_config`)
    and has a mean and std if `normalize` asks for them."""
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

    config = AutoConfig.from_pretrained(str(Path(path).expanduser()))
    _check_config(path, config, _is_openrlhf(config, str(options.get("format", "auto"))))
    if options.get("normalize"):
        _normalized(path, config, [])


def _check_config(path: str, config, openrlhf: bool = False) -> None:
    """ValueError unless `config` is a sequence classifier's with one label (its score), or, in OpenRLHF's
    format, a reward model's (not a critic's)."""
    archs = config.architectures or []
    if openrlhf:
        if "CriticModel" in archs:
            raise ValueError(
                f"reward model {path!r} is an OpenRLHF critic (a value per token), not a reward model"
            )
        return
    if archs and not any(a.endswith("ForSequenceClassification") for a in archs):
        raise ValueError(f"reward model {path!r} is a {archs[0]}, not a sequence classifier with one label "
                         f"(AutoModelForSequenceClassification, as TRL's RewardTrainer saves; an OpenRLHF reward "
                         f"model: format: openrlhf)")  # fmt: skip
    if config.num_labels != 1:
        raise ValueError(f"reward model {path!r} has {config.num_labels} labels; a reward model has one (its score; "
                         f"an OpenRLHF reward model, whose config names none: format: openrlhf)")  # fmt: skip


def _prepare(options: dict[str, Any]) -> str:
    """Load the model now (`rewards.services.prepare_terms`, before the policy): one line saying what."""
    path, device, dtype = (
        str(options.get("path")),
        str(options.get("device", "auto")),
        str(options.get("dtype", "auto")),
    )
    with _lock:
        loaded = load(path, device, dtype, str(options.get("format", "auto")),
                      str(options.get("value_head_prefix", "score")))  # fmt: skip
    model = loaded.model
    if options.get("normalize"):
        _normalized(path, model.config, [])
    params = sum(p.numel() for p in model.parameters())
    form = ", OpenRLHF's format" if loaded.openrlhf else ""
    return f"reward model {path}: {params / 1e6:.1f}M parameters on {model.device} ({model.dtype}{form})"


def _release() -> None:
    """Let go of every loaded reward model (`rewards.services.prepare_terms` with keep=False)."""
    import gc

    import torch

    with _lock:
        _models.clear()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


reward_model.prepare = _prepare  # type: ignore[attr-defined]
reward_model.release = _release  # type: ignore[attr-defined]
reward_model.score_batch = score_batch  # type: ignore[attr-defined]
reward_model.run_mode = "batch"  # type: ignore[attr-defined]
reward_model.check_options = _check_options  # type: ignore[attr-defined]
reward_model.check_setup = _check_setup  # type: ignore[attr-defined]
