"""Hugging Face transformers rollout engine (CPU or one GPU) with KV cache.

Owns: batching prompts (left padding), sampling n per prompt, cutting completions at EOS, and the
sampler's per-token log-probabilities, taken from the processed scores (after temperature / top-k /
top-p), i.e. the distribution the token was really drawn from. Deterministic under `params.seed`.
Whole models decode with `rollout.decode` (finished rows leave the batch; the same samples as
`generate`); a model sharded over ranks, or a cache whose rows cannot be selected, uses `generate`.
Memory: the sampling filters run as our own logits processors; one step's log-softmax [rows, V] is
kept at a time (in `decode`, or in a recorder after `generate`'s processors that gathers the chosen
token's log-prob when the next step shows which token was drawn), so memory is O(rows x V + rows x T),
never the [rows, T, V] of `output_scores` (over 300 GB for 512 rows x 1024 tokens x a 150k vocabulary).
On a single device the engine samples from the training model itself, so `sync_weights` is a no-op.
Does not own: prompt encoding (`data.prompts`), the decode loop (`rollout.decode`), the KV cache
layers (`rollout.kv_cache`), recomputing log-probs for training (`engines`, with `algorithms.logprobs`),
or scoring.
"""

from __future__ import annotations

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from reasonrl.engines.compiled import eager
from reasonrl.rollout.base import SamplingParams, completion_text, cut_at_stop, stop_token_ids
from reasonrl.rollout.decode import can_shrink, decode
from reasonrl.rollout.kv_cache import kv_cache
from reasonrl.types import Completion


def _sharded(model) -> bool:
    """A model sharded over ranks (FSDP2) runs every forward as a collective: each rank keeps stepping
    until all ranks' sequences are done (transformers' synced_gpus). A whole model (a rollout worker's,
    even inside the workers' own group) does not."""
    from reasonrl import distributed as dist
    from reasonrl.engines.fsdp2 import is_sharded

    return dist.world_size() > 1 and is_sharded(model)


class _ChosenTokenLogprobs(LogitsProcessor):
    """Last in the processor list: sees the final (processed) scores of each step; at the next step
    the newest input token is the one drawn from them, so its log-prob is gathered then."""

    def __init__(self):
        self.prev: torch.Tensor | None = None  # log-softmax [rows, V] of the last step
        self.steps: list[torch.Tensor] = []  # per step: [rows] log-prob of the drawn token

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.collect(input_ids[:, -1])
        self.prev = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def collect(self, drawn: torch.Tensor) -> None:
        if self.prev is not None:
            self.steps.append(self.prev.gather(-1, drawn.to(self.prev.device)[:, None]).squeeze(-1))
            self.prev = None

    def logprobs(self) -> torch.Tensor:
        return torch.stack(self.steps, dim=1).cpu() if self.steps else torch.zeros(0, 0)  # one device sync


def _sampling_processors(params: SamplingParams) -> list[LogitsProcessor]:
    """The filters transformers would add for sampling, in its order (temperature, top-k, top-p, min-p)."""
    if params.temperature <= 0:
        return []
    procs: list[LogitsProcessor] = []
    if params.temperature != 1.0:
        procs.append(TemperatureLogitsWarper(params.temperature))
    if params.top_k:
        procs.append(TopKLogitsWarper(top_k=params.top_k, min_tokens_to_keep=1))
    if params.top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p=params.top_p, min_tokens_to_keep=1))
    if params.min_p > 0:
        procs.append(MinPLogitsWarper(min_p=params.min_p, min_tokens_to_keep=1))
    return procs


class HFRolloutEngine:
    def __init__(self, model, tokenizer, max_batch: int = 512, drop_finished: bool = True):
        """drop_finished: decode with `rollout.decode` (finished rows leave the batch; the same
        samples); False: transformers' `generate` for every model."""
        self.model = model
        self.drop_finished = drop_finished
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.version = 0  # the policy version (updates applied) it samples from

    def sync_weights(self, model, version: int | None = None) -> None:
        self.model = model
        self.version = self.version + 1 if version is None else version

    def stats(self) -> dict[str, float]:
        return {}  # shares the policy's weights: no sync to time

    def wake(self) -> None:  # generates with the policy itself: nothing to take back
        pass

    def sleep(self) -> None:  # nothing of its own to release (the KV cache lives inside generate)
        pass

    def close(self) -> None:
        self.model = None

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]:
        rows = [p for p in prompts for _ in range(params.n)]
        gen = None
        if params.seed is not None:
            gen = torch.Generator().manual_seed(params.seed)
        out: list[Completion] = []
        for start in range(0, len(rows), self.max_batch):
            seed = None if gen is None else int(torch.randint(0, 2**62, (1,), generator=gen))
            out.extend(self._generate_chunk(rows[start : start + self.max_batch], params, seed))
        return [out[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    def _generate_chunk(
        self, rows: list[list[int]], params: SamplingParams, seed: int | None
    ) -> list[Completion]:
        device = next(self.model.parameters()).device
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            attn[i, width - len(r) :] = 1
        greedy = params.temperature <= 0
        was_training = self.model.training
        self.model.eval()
        if seed is not None:
            torch.manual_seed(seed)
        cache = kv_cache(self.model, width + params.max_new_tokens)
        sharded = _sharded(self.model)
        try:
            with eager(self.model):  # compiled training layers (model.compile) decode uncompiled
                if self.drop_finished and can_shrink(cache) and not sharded:
                    seqs, logps = decode(
                        self.model, ids.to(device), attn.to(device), cache,
                        LogitsProcessorList(_sampling_processors(params)), params.max_new_tokens, greedy,
                        self.pad_id, self.stop_ids,
                    )  # fmt: skip
                else:
                    seqs, logps = self._hf_generate(
                        ids.to(device), attn.to(device), cache, params, greedy, sharded
                    )
        finally:
            if was_training:
                self.model.train()
        completions = []
        for i in range(len(rows)):
            toks, reason = cut_at_stop(seqs[i].tolist(), self.stop_ids)
            text = completion_text(self.tokenizer, toks)
            completions.append(Completion(toks, text, logps[i, : len(toks)].tolist(), reason))
        return completions

    def _hf_generate(self, ids, attn, cache, params: SamplingParams, greedy: bool, sharded: bool):
        """transformers' `generate` (sharded models, caches `decode` cannot shrink): (tokens, log-probs)."""
        # A fresh generation config, not the model's: a hub model's generation_config.json (top_k=20,
        # repetition_penalty, ...) would otherwise reshape the sampling distribution, and RL needs
        # samples from the policy exactly as configured. top_k=0 / top_p=1 disable those filters.
        gen_cfg = GenerationConfig(
            max_new_tokens=params.max_new_tokens,
            do_sample=not greedy,
            # the sampling filters are our own processors (below), so that the recorder sees their output
            temperature=None if greedy else 1.0,
            top_p=None if greedy else 1.0,
            top_k=None if greedy else 0,
            pad_token_id=self.pad_id,
            eos_token_id=list(self.stop_ids) or None,
            bos_token_id=self.tokenizer.bos_token_id,
            return_dict_in_generate=True,
            use_cache=True,
        )
        recorder = _ChosenTokenLogprobs()
        processors = LogitsProcessorList([*_sampling_processors(params), recorder])
        # transformers fills every field left unset from the model's own generation config, so that
        # config is swapped for the library defaults while this call runs
        saved, self.model.generation_config = self.model.generation_config, GenerationConfig()
        try:
            res = self.model.generate(
                input_ids=ids, attention_mask=attn, generation_config=gen_cfg, logits_processor=processors,
                synced_gpus=sharded, **({} if cache is None else {"past_key_values": cache}),
            )  # fmt: skip
        finally:
            self.model.generation_config = saved
        recorder.collect(res.sequences[:, -1])  # the last step's token is only in the output
        # [B, T] tokens and log-probs of the drawn tokens under the processed scores
        return res.sequences[:, ids.shape[1] :].cpu(), recorder.logprobs()
