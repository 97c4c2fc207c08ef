"""The rollout engine protocol and sampling parameters.

Owns: `SamplingParams`, `RolloutEngine` (the protocol every engine implements: generate, weight sync,
and the wake / sleep / close lifecycle the trainer drives), `stop_token_ids` (where every engine ends a
completion), `completion_text` (what a completion's tokens read as), `cut_at_stop` and `within_budget` (a
completion cut at a token budget). Does not own: the engines themselves
(`rollout.hf`, `rollout.vllm`), choosing one (`rollout.factory`) or prompt formatting (`data.prompts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from reasonrl.types import Completion


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 means greedy. top_k 0, top_p 1 and min_p 0 disable those filters (min_p: tokens
    less likely than min_p x the most likely one's probability are left out, after temperature)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 64
    min_p: float = 0.0
    seed: int | None = None

    @classmethod
    def greedy(cls, max_new_tokens: int) -> SamplingParams:
        return cls(n=1, temperature=0.0, max_new_tokens=max_new_tokens)

    @classmethod
    def of_rollout(cls, rollout, seed: int | None, **changes) -> SamplingParams:
        """The recipe's sampling (`rollout.n / temperature / top_p / top_k / min_p / max_new_tokens`), with
        `changes` (e.g. validation's n and temperature)."""
        base = dict(n=rollout.n, temperature=rollout.temperature, top_p=rollout.top_p, top_k=rollout.top_k,
                    min_p=rollout.min_p, max_new_tokens=rollout.max_new_tokens, seed=seed)  # fmt: skip
        return cls(**{**base, **changes})


def stop_token_ids(model, tokenizer) -> tuple[int, ...]:
    """The tokens a completion ends at: the tokenizer's EOS, then every EOS the model's generation config
    names (chat models end a turn with a token of their own: Gemma's <end_of_turn>, Llama 3's
    <|eot_id|> / <|eom_id|>, Qwen's <|im_end|> beside <|endoftext|>; without them a completion runs on
    past the end of its turn), those inside the vocabulary, in that order."""
    from reasonrl.models.loading import text_config

    extra = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [tokenizer.eos_token_id, *(extra if isinstance(extra, (list, tuple)) else [extra])]
    vocab = text_config(model.config).vocab_size
    return tuple(dict.fromkeys(int(i) for i in ids if i is not None and 0 <= int(i) < vocab))


def cut_at_stop(tokens: list[int], stop_ids) -> tuple[list[int], str]:
    """(the tokens up to and including the first stop token, "stop"), or (all of them, "length")."""
    for i, t in enumerate(tokens):
        if t in stop_ids:
            return tokens[: i + 1], "stop"
    return tokens, "length"


def _family(tokenizer) -> str:
    """Whose channels a tokenizer's special tokens write: "harmony" (gpt-oss: `<|start|>`, `<|channel|>`,
    `<|message|>`), "gemma4" (`<|channel>`, `<channel|>`), "atem" (Muse Glimmer: `<|start|>`, `<|message|>`,
    `<|eom|>`, `<|eot|>`) or "" (asked once per tokenizer)."""
    family = getattr(tokenizer, "_reasonrl_family", None)
    if family is None:
        added = (getattr(tokenizer, "added_tokens_decoder", None) or {}).values()
        special = {t.content for t in added if getattr(t, "special", False)}
        special |= set(getattr(tokenizer, "all_special_tokens", None) or ())
        marks = {
            "harmony": ("<|start|>", "<|channel|>", "<|message|>"),
            "gemma4": ("<|channel>", "<channel|>"),
            "atem": ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>"),
        }
        family = next((name for name, ms in marks.items() if all(m in special for m in ms)), "")
        try:
            tokenizer._reasonrl_family = family
        except AttributeError:  # (a tokenizer that takes no attribute asks again)
            pass
    return family


def completion_text(tokenizer, ids: list[int]) -> str:
    """A completion's text: its tokens decoded without the special tokens; a harmony model's (gpt-oss) as
    `rollout.harmony.reading` gives it, its analysis a think block and its final message as it is; a Gemma 4
    model's with its thought channel a think block (`rollout.gemma_calls.reading`); a Muse Glimmer model's with its
    messages to the user as they are, the others think blocks (`rollout.atem.reading`): so the verifiers read the
    answer and not the reasoning."""
    family = _family(tokenizer)
    if family == "harmony":
        from reasonrl.rollout.harmony import reading

        return reading(tokenizer.decode(ids, skip_special_tokens=False))
    if family == "atem":
        from reasonrl.rollout.atem import reading

        return reading(tokenizer.decode(ids, skip_special_tokens=False))
    if family == "gemma4":
        from reasonrl.rollout.gemma_calls import reading

        return reading(tokenizer, ids)
    return tokenizer.decode(ids, skip_special_tokens=True)


def within_budget(c: Completion, budget: int, tokenizer) -> Completion:
    """`c` cut at `budget` tokens (then it ended for lack of room: "length"). Continuations of different
    budgets generate in one engine call at the largest and are cut so (the tool loop, `rollout.interaction`):
    sampling goes left to right, so a completion cut at its budget is a sample of the policy as one
    generated with that budget is."""
    if len(c.token_ids) <= budget:
        return c
    ids = c.token_ids[:budget]
    return Completion(ids, completion_text(tokenizer, ids), c.sampler_logprobs[:budget], "length")


class RolloutEngine(Protocol):
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]:
        """For each prompt (token ids), `params.n` completions, in prompt order."""
        ...

    def sync_weights(self, model, version: int | None = None) -> None:
        """Make the engine sample from `model`'s current weights (no copy when they share memory);
        `version`: the policy version they are (optimizer updates applied; default: previous + 1)."""
        ...

    def stats(self) -> dict[str, float]:
        """Per-step metrics of the engine itself (weight-sync time and size, the version it holds)."""
        ...

    def wake(self) -> None:
        """Before generating: take back what `sleep` released (KV cache, weights on the device)."""
        ...

    def sleep(self) -> None:
        """After generating, before the update: release generation memory where the engine can."""
        ...

    def close(self) -> None:
        """Release everything; the engine is not used again."""
        ...
