"""End to end on CPU with a tiny random model: the loop runs, writes its artefacts, changes the policy,
and a run interrupted at step k and resumed reproduces the uninterrupted run's later metrics exactly."""

from __future__ import annotations

import json

import pytest
import torch

from reasonrl.config import load_config
from reasonrl.engines.checkpoint import list_checkpoints
from reasonrl.trainer.loop import train


def _overrides(model_dir, run_dir, steps, *extra) -> list[str]:
    return [
        f"model.path={model_dir}",
        "model.device=cpu",
        f"log.run_dir={run_dir}",
        f"train.steps={steps}",
        "train.global_batch=16",
        "rollout.n=4",
        "train.mini_batch=8",
        "train.micro_batch=4",
        "train.epochs=2",
        "train.lr=1e-3",
        "rollout.max_new_tokens=12",
        "data.train_size=64",
        "val.size=8",
        "val.n=2",
        "log.progress=false",
        "log.tensorboard=false",
        "checkpoint.every=2",
        "checkpoint.keep_last=5",
        *extra,
    ]


def _cfg(model_dir, run_dir, steps, *extra):
    return load_config(None, _overrides(model_dir, run_dir, steps, *extra))


def _stable(row):
    """Everything but wall-clock timings (perf/*, verifier latencies), which no rerun can reproduce."""
    return {k: v for k, v in row.items() if not (k.startswith("perf/") or "latency" in k or "seconds" in k)}


def test_loop_writes_artefacts_and_changes_policy(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    run = tmp_path / "run"
    # a random model earns no reward (zero advantages), so the entropy bonus is what moves it here
    out = train(_cfg(tiny_model_dir, run, 3, "algo.kl.coef=0.01", "algo.entropy_coef=0.01", "val.every=2"))
    steps = [r["step"] for r in out["history"]]
    assert steps == [0, 1, 2, 3]
    # validated before training, every val.every steps, and after the last step
    assert [r["step"] for r in out["history"] if "eval/accuracy" in r] == [0, 2, 3]
    last = out["history"][-1]
    for key in ("reward/mean", "loss/policy", "loss/kl", "actor/entropy", "eval/accuracy", "eval/mean@2"):
        assert key in last and last[key] is not None, key
    assert [r["eval/verifier_errors"] for r in out["history"] if "eval/accuracy" in r] == [0.0, 0.0, 0.0]
    assert all(torch.isfinite(torch.tensor(r["loss/total"])) for r in out["history"][1:])
    for r in out["history"][1:]:  # where each step's time went: generating + training = the step
        gen, upd, whole = r["perf/generate_seconds"], r["perf/train_seconds"], r["perf/step_seconds"]
        assert gen > 0 and upd > 0 and whole == pytest.approx(gen + upd, abs=1e-6)
        # the step's tokens (prompts + completions of its 16 rows) per second of the whole step
        tokens = r["perf/tokens_per_second"] * whole
        prompt_tokens = tokens - 16 * r["rollout/response_length"]
        assert prompt_tokens == pytest.approx(round(prompt_tokens), abs=1e-6 * tokens)
        assert 16 <= prompt_tokens <= 16 * 64  # at least one token per prompt
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [0, 1, 2, 3]
    rollouts = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert {r["step"] for r in rollouts} == {1, 2, 3}
    # one line per prompt group: all of its n completions with reward, verifier reason and answer
    assert all(
        len(r["completions"]) == 4 and r["rewards"] == [c["reward"] for c in r["completions"]]
        for r in rollouts
    )
    assert all(
        {"text", "reward", "reason", "extracted", "tokens", "finish_reason"} <= set(c)
        for c in rollouts[0]["completions"]
    )
    assert len(rollouts) == 3 * 4 and len({(r["step"], r["uid"]) for r in rollouts}) == len(rollouts)
    assert (run / "training.png").stat().st_size > 10_000
    ckpts = list_checkpoints(run)
    assert [c.name for c in ckpts] == ["step_000002", "step_000003"]
    before = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(ckpts[-1]).state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2


def test_resume_reproduces_uninterrupted_run(tiny_model_dir, tmp_path):
    # the entropy bonus makes the random policy move, so a resume that lost the weights would differ
    ent = "algo.entropy_coef=0.05"
    full = train(_cfg(tiny_model_dir, tmp_path / "a", 4, ent))["history"]
    logs = []  # --resume on a fresh run directory starts from scratch, saying so
    train(_cfg(tiny_model_dir, tmp_path / "b", 2, ent), resume=True, log=logs.append)  # "interrupted" at 2
    assert f"no usable checkpoint in {tmp_path / 'b'}; starting from scratch" in logs
    logs = []
    resumed = train(_cfg(tiny_model_dir, tmp_path / "b", 4, ent), resume=True, log=logs.append)["history"]
    assert f"resumed from {tmp_path / 'b' / 'checkpoints' / 'step_000002'} (step 2)" in logs
    full_by_step = {r["step"]: _stable(r) for r in full}
    resumed_by_step = {r["step"]: _stable(r) for r in resumed}
    for step in (3, 4):
        assert resumed_by_step[step] == full_by_step[step], step
    # the resumed run's metrics file holds steps 0..4 exactly once
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [0, 1, 2, 3, 4]
    logs = []  # resuming the finished run: says there is nothing to train, changes nothing
    again = train(_cfg(tiny_model_dir, tmp_path / "b", 4, ent), resume=True, log=logs.append)["history"]
    assert "nothing to train: the checkpoint is at step 4, train.steps=4" in logs[-1]
    assert [r["step"] for r in again] == [0, 1, 2, 3, 4]
    assert (tmp_path / "b" / "metrics.jsonl").read_text().splitlines() == lines


def test_chunked_logprobs_train_like_the_full_logits(tiny_model_dir, tmp_path):
    plain = train(_cfg(tiny_model_dir, tmp_path / "a", 2, "algo.entropy_coef=0.01"), log=lambda *a: None)[
        "history"
    ]
    chunked = train(_cfg(tiny_model_dir, tmp_path / "b", 2, "algo.entropy_coef=0.01", "model.logprob_chunk=3"),
                    log=lambda *a: None)["history"]  # fmt: skip
    for a, b in zip(plain[1:], chunked[1:]):
        for k in ("loss/total", "grad_norm", "actor/entropy", "reward/mean"):
            assert b[k] == pytest.approx(a[k], rel=1e-4, abs=1e-6), k


def test_a_head_the_chunked_logprobs_would_get_wrong_is_refused_before_any_step(tiny_model_dir, tmp_path,
                                                                              monkeypatch):  # fmt: skip
    """With model.logprob_chunk, training checks the head path against the model's own logits first
    (here the head path is made to scale the logits, as a model with an unknown transform would)."""
    from reasonrl.config import ConfigError
    from reasonrl.engines import output_head

    monkeypatch.setattr(output_head, "logit_transform", lambda m: (1.0, 2.0, None, None))
    with pytest.raises(
        ConfigError, match=r"model\.logprob_chunk: Qwen2ForCausalLM's forward .* of the largest"
    ):
        train(_cfg(tiny_model_dir, tmp_path / "a", 1, "model.logprob_chunk=3"), log=lambda *a: None)
    assert not (tmp_path / "a" / "metrics.jsonl").exists()


def test_a_model_packs_cannot_keep_apart_is_refused_before_any_step(tiny_model_dir, tmp_path, monkeypatch):
    """With model.pack_tokens, setup runs one two-sequence pack first; attention that never reaches
    segment attention (here: the switch to it left out) is a one-line error before any generation."""
    from reasonrl.config import ConfigError
    from reasonrl.engines import packing

    monkeypatch.setattr(packing, "use_segment_attention", lambda model: None)
    with pytest.raises(ConfigError, match="model.pack_tokens: this model's attention does not go through"):
        train(_cfg(tiny_model_dir, tmp_path / "a", 1, "model.pack_tokens=64"), log=lambda *a: None)
    assert not (tmp_path / "a" / "metrics.jsonl").exists()


def _hybrid_dir(path, kind: str, tok_dir: str) -> str:
    """A tiny random LFM2 (a convolution beside attention), Qwen3.5 (Gated DeltaNet beside attention) or
    Mamba (no attention), saved with the tiny model's tokenizer."""
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tok_dir)
    common = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)  # fmt: skip
    if kind == "lfm2":
        cfg = transformers.Lfm2Config(**common, num_attention_heads=4, num_key_value_heads=2, block_ff_dim=64,
                                      layer_types=["conv", "full_attention"], max_position_embeddings=256)  # fmt: skip
    elif kind == "qwen3_5":
        cfg = transformers.Qwen3_5TextConfig(**common, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                             layer_types=["linear_attention", "full_attention"],
                                             linear_num_value_heads=2, linear_num_key_heads=2, linear_key_head_dim=8,
                                             linear_value_head_dim=8, max_position_embeddings=256)  # fmt: skip
    else:
        cfg = transformers.MambaConfig(**common, state_size=8)
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_a_convolution_hybrid_trains_packed(tiny_model_dir, tmp_path):
    """LFM2, whose convolution is kept within each sequence of a pack (it was refused before), trains
    packed on the log-probs it sampled."""
    lfm2 = _hybrid_dir(tmp_path / "lfm2", "lfm2", tiny_model_dir)
    hist = train(
        _cfg(lfm2, tmp_path / "l", 2, "checkpoint.every=0", "model.pack_tokens=64"), log=lambda *a: None
    )["history"]
    steps = [h for h in hist if "rollout/logprob_gap_max" in h]
    assert len(steps) == 2 and max(h["rollout/logprob_gap_max"] for h in steps) < 1e-4


@pytest.mark.parametrize("kind", ["qwen3_5", "mamba"])
def test_recurrent_models_train_packed_with_recomputed_layers(kind, tiny_model_dir, tmp_path):
    """Qwen3.5 (Gated DeltaNet beside attention) and Mamba (no attention at all; before, the planner stopped
    on its missing attention heads and the engine handed it a cache it does not take), both refused
    packing before, train padded and packed, their layers recomputed in the backward (gradient
    checkpointing: the per-sequence rule, convolution and scan must see the pack's bounds there too,
    which Mamba's blocks are never given), on the log-probs they sampled; the packed run's update
    equals the padded one's."""
    path = _hybrid_dir(tmp_path / kind, kind, tiny_model_dir)
    runs = {}
    for name, extra in (
        ("packed", ["model.pack_tokens=64", "model.gradient_checkpointing=true"]),
        ("padded", []),
    ):
        # an entropy bonus: a gradient on every token even when the random model's rewards are all 0
        cfg = _cfg(path, tmp_path / name, 2, "checkpoint.every=0", "algo.entropy_coef=1.0", *extra)
        out = train(cfg, log=lambda *a: None)
        steps = [h for h in out["history"] if "rollout/logprob_gap_max" in h]
        assert len(steps) == 2 and max(h["rollout/logprob_gap_max"] for h in steps) < 1e-4, name
        runs[name] = steps
    for a, b in zip(runs["packed"], runs["padded"]):  # the same samples, the same update
        assert a["grad_norm"] > 1e-3
        assert a["loss/total"] == pytest.approx(b["loss/total"], abs=1e-6)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)


def test_an_engine_off_the_trained_policy_is_warned_about_once(tiny_model_dir, tmp_path, monkeypatch):
    """The sampler's log-probs shifted by 0.5 nats (as from an engine that missed its weight sync): a
    warning naming the gap metric, once; a correct engine (the first run) gives none."""
    from reasonrl.rollout.hf import HFRolloutEngine

    logs = []
    train(_cfg(tiny_model_dir, tmp_path / "a", 2), log=logs.append)
    assert not [x for x in logs if "logprob_gap" in str(x)]
    real = HFRolloutEngine.generate

    def off(self, prompts, params):
        groups = real(self, prompts, params)
        for c in (c for g in groups for c in g):
            c.sampler_logprobs = [x - 0.5 for x in c.sampler_logprobs]
        return groups

    monkeypatch.setattr(HFRolloutEngine, "generate", off)
    logs = []
    hist = train(_cfg(tiny_model_dir, tmp_path / "b", 2), log=logs.append)["history"]
    assert all(r["rollout/logprob_gap_mean"] == pytest.approx(0.5, abs=1e-3) for r in hist[1:])
    warned = [x for x in logs if "rollout/logprob_gap_mean" in str(x)]
    assert len(warned) == 1 and warned[0].startswith("warning: step 1:") and "0.5 per token" in warned[0]
    # at another temperature the trainer's log-probs are the tempered ones: the same warning
    logs = []
    train(_cfg(tiny_model_dir, tmp_path / "t", 1, "rollout.temperature=0.7"), log=logs.append)
    assert len([x for x in logs if "rollout/logprob_gap_mean" in str(x)]) == 1
    # drawn from a truncated distribution, the gap is not comparable: no warning
    for name, other in (("p", "rollout.top_p=0.9"), ("k", "rollout.top_k=5"), ("m", "rollout.min_p=0.1")):
        logs = []
        train(_cfg(tiny_model_dir, tmp_path / name, 1, other), log=logs.append)
        assert not [x for x in logs if "logprob_gap" in str(x)], other
    with pytest.raises(Exception, match="warn_logprob_gap must be >= 0"):
        _cfg(tiny_model_dir, tmp_path / "c", 1, "rollout.warn_logprob_gap=-1")


def test_entropy_metric_can_be_turned_off_without_changing_training(tiny_model_dir, tmp_path):
    """log.entropy=false skips the entropy metric's pass over the logits; with no entropy bonus the
    run is otherwise the same, and an entropy bonus still gets its entropy."""
    quiet = lambda *a: None  # noqa: E731
    on = train(_cfg(tiny_model_dir, tmp_path / "a", 2), log=quiet)["history"]
    off = train(_cfg(tiny_model_dir, tmp_path / "b", 2, "log.entropy=false"), log=quiet)["history"]
    assert all(r["actor/entropy"] > 0 for r in on[1:]) and not any("actor/entropy" in r for r in off)
    assert [_stable(r) for r in off] == [
        {k: v for k, v in _stable(r).items() if k != "actor/entropy"} for r in on
    ]
    bonus = train(_cfg(tiny_model_dir, tmp_path / "c", 1, "log.entropy=false", "algo.entropy_coef=0.05"),
                  log=quiet)["history"]  # fmt: skip
    assert bonus[1]["actor/entropy"] > 0


@pytest.mark.parametrize("family", ["mistral3", "qwen3_5"])
def test_a_multimodal_model_trains_on_text_and_saves_the_whole_model(family, tiny_model_dir, tmp_path):
    """Mistral 3 (Mistral Small 3.x, Magistral) ships only as an image-text-to-text model, which
    AutoModelForCausalLM refuses; Qwen3.5's causal-LM class is its language model alone, which would
    drop the vision tower from every checkpoint and export. Each loads as the class it was saved from
    and trains on text prompts (Mistral 3 packed) on the log-probs it sampled; its checkpoint is the
    whole multimodal model again, language weights trained, vision tower as it was."""
    import transformers

    from reasonrl.models.loading import load_policy

    tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    text = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=8, max_position_embeddings=256, eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id)  # fmt: skip
    if family == "mistral3":
        vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, head_dim=8,
                      patch_size=4, image_size=16)  # fmt: skip
        cfg = transformers.Mistral3Config(text_config=dict(text, model_type="mistral"), vision_config=vision)
        with pytest.raises(ValueError, match="Unrecognized configuration class"):
            transformers.AutoModelForCausalLM.from_config(cfg)
        packing = ("model.pack_tokens=64",)
    else:  # Gated DeltaNet beside attention: packing refused
        text.update(layer_types=["linear_attention", "full_attention"], linear_num_value_heads=2, linear_num_key_heads=2,
                    linear_key_head_dim=8, linear_value_head_dim=8)  # fmt: skip
        vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32, patch_size=4,
                      num_position_embeddings=16)  # fmt: skip
        cfg = transformers.Qwen3_5Config(text_config=text, vision_config=vision)
        packing = ()
    cls = getattr(transformers, type(cfg).__name__.replace("Config", "ForConditionalGeneration"))
    torch.manual_seed(0)
    cls(cfg).save_pretrained(tmp_path / "mm")
    tok.save_pretrained(tmp_path / "mm")
    run = tmp_path / "run"
    # an entropy bonus: a random model's rewards are all 0, which alone would leave its weights as they were
    hist = train(_cfg(tmp_path / "mm", run, 2, *packing, "algo.entropy_coef=0.01"), log=lambda *a: None)[
        "history"
    ]
    steps = [h for h in hist if "rollout/logprob_gap_max" in h]
    assert len(steps) == 2 and max(h["rollout/logprob_gap_max"] for h in steps) < 1e-4
    before, _ = load_policy(str(tmp_path / "mm"), device="cpu", log=lambda *a: None)
    after, _ = load_policy(str(list_checkpoints(run)[-1]), device="cpu", log=lambda *a: None)
    assert type(after) is cls and type(before) is cls
    a, b = before.state_dict(), after.state_dict()
    assert a.keys() == b.keys()
    vision_keys = [k for k in a if "vision_tower" in k or "multi_modal_projector" in k or ".visual." in k]
    language = [k for k in a if "language_model" in k]
    assert vision_keys and all(torch.equal(a[k], b[k]) for k in vision_keys)
    assert sum(not torch.equal(a[k], b[k]) for k in language) > len(language) // 2


def test_updates_dropped_for_a_non_finite_gradient_are_counted_and_warned_about(tiny_model_dir, tmp_path,
                                                                                monkeypatch):  # fmt: skip
    """A NaN loss: the update is not applied (the saved policy is the initial one), the step's
    nonfinite_grad_frac is 1 and the log says so; a healthy run reports 0 and no warning."""
    from transformers import AutoModelForCausalLM

    import reasonrl.trainer.loop as loop

    logs = []
    ok = train(_cfg(tiny_model_dir, tmp_path / "ok", 1, "algo.entropy_coef=0.05"), log=logs.append)["history"]
    assert ok[1]["nonfinite_grad_frac"] == 0.0 and not [x for x in logs if "not finite" in str(x)]
    real = loop.make_loss_fn

    def nan_loss_fn(*a, **k):
        fn = real(*a, **k)

        def nan(*args):
            loss, metrics = fn(*args)
            return loss * float("nan"), metrics

        return nan

    monkeypatch.setattr(loop, "make_loss_fn", nan_loss_fn)
    logs = []
    hist = train(_cfg(tiny_model_dir, tmp_path / "nan", 1, "algo.entropy_coef=0.05"), log=logs.append)[
        "history"
    ]
    assert hist[1]["nonfinite_grad_frac"] == 1.0 and hist[1]["grad_norm"] is None  # logged as null
    warned = [x for x in logs if "not finite" in str(x)]
    assert len(warned) == 1 and warned[0].startswith(
        "warning: step 1: 100% of the policy updates were skipped"
    )
    before = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(list_checkpoints(tmp_path / "nan")[-1]).state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_early_stop_skips_each_drifted_mini_batch_and_goes_on_to_the_next(tiny_model_dir, tmp_path):
    """RLinf's early stop with a threshold every drift exceeds: of a step's 4 mini-batch updates (2 epochs
    x 2), the first trains (nothing has moved yet) and each of the other 3 is skipped, not the rest of
    its epoch after the first skip."""
    row = train(_cfg(tiny_model_dir, tmp_path / "r", 1, "algo.entropy_coef=0.01", "algo.off_policy.early_stop_kl=1e-12",
                     "checkpoint.every=0"), log=lambda *a: None)["history"][1]  # fmt: skip
    assert row["actor/early_stopped_minibatches"] == 3.0


def test_tis_weights_come_from_the_old_logprobs_when_the_step_computes_them(
    tiny_model_dir, tmp_path, monkeypatch
):
    """algo.off_policy.tis_cap: with old log-probs (2 epochs) the loop attaches the step's weights to the
    batch once, before any update; with one update per step the loss takes them from its own forward."""
    import reasonrl.trainer.loop as loop

    attached, real = [], loop.attach_tis_weights

    def spy(batch, op):
        out = real(batch, op)
        attached.append(
            (batch.old_logprobs is not None, batch.is_weights.shape == batch.mask.shape, op.tis_cap)
        )
        return out

    monkeypatch.setattr(loop, "attach_tis_weights", spy)
    tis = ("algo.off_policy.tis_cap=2.0", "checkpoint.every=0")
    row = train(_cfg(tiny_model_dir, tmp_path / "a", 1, *tis), log=lambda *a: None)["history"][1]
    assert attached == [(True, True, 2.0)] and row["actor/is_capped_frac"] is not None
    one = ("train.epochs=1", "train.mini_batch=16")
    row = train(_cfg(tiny_model_dir, tmp_path / "b", 1, *tis, *one), log=lambda *a: None)["history"][1]
    assert len(attached) == 1 and row["actor/is_capped_frac"] is not None  # not attached, still weighted


def test_the_kl_penalty_is_measured_against_the_reference_model_not_the_step_start(tiny_model_dir, tmp_path):
    """One update per step: at step 1 the policy is the reference (KL 0); at step 2 it has moved away
    from it, so its KL is positive (measured against the policy at the step's start, it would be 0)."""
    hist = train(_cfg(tiny_model_dir, tmp_path / "r", 2, "algo.kl.coef=0.01", "algo.entropy_coef=0.05",
                      "train.epochs=1", "train.mini_batch=16", "train.lr=1e-2", "checkpoint.every=0"),
                 log=lambda *a: None)["history"]  # fmt: skip
    assert hist[1]["loss/kl"] < 1e-6 < 1e-3 < hist[2]["loss/kl"]  # 0.0 and 0.013 here


def test_a_verifier_failing_for_steps_on_end_stops_the_run_before_its_update(tiny_model_dir, tmp_path,
                                                                           monkeypatch, capsys):  # fmt: skip
    """The arithmetic verifier raises from step 3 on (after the step-2 checkpoint): step 3 warns, step 4
    stops `reasonrl train` with one line (exit 2) before its update; the checkpoint and the metrics hold
    steps up to 3; once the verifier works, --resume finishes the run from step 2."""
    from reasonrl.cli.main import main
    from reasonrl.rewards.base import VERIFIERS

    run = tmp_path / "run"
    real = VERIFIERS.get("arithmetic")

    def saved() -> list[str]:
        return [p.name for p in list_checkpoints(run)]

    def broken_after_step_2(response, problem):
        if saved():
            raise ConnectionError("the scoring service went away")
        return real(response, problem)

    monkeypatch.setattr(VERIFIERS, "_entries", {**VERIFIERS._entries, "arithmetic": broken_after_step_2})
    args = ["train", *_overrides(tiny_model_dir, run, 5, "reward.error_patience=2")]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert [x for x in err.splitlines() if x.startswith("reasonrl")] == [  # (besides progress bars)
        "reasonrl: error: verifier 'arithmetic' failed on 100% of its calls (e.g. 'error: ConnectionError: the "
        "scoring service went away'), above reward.max_error_rate=0.5 for 2 steps in a row (steps 3-4); stopped "
        "before step 4's update. Fix the verifier or its service and resume from the last checkpoint (--resume), "
        "or set reward.error_patience=0 to train on"
    ]
    warned = [x for x in out.splitlines() if x.startswith("warning:")]
    assert len(warned) == 1 and warned[0].startswith("warning: step 3: verifier 'arithmetic' failed on 100%")
    assert saved() == ["step_000002"]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert (
        rows[3]["verifier/arithmetic/error_rate"] == 1.0 and rows[2]["verifier/arithmetic/error_rate"] == 0.0
    )
    monkeypatch.setattr(VERIFIERS, "_entries", {**VERIFIERS._entries, "arithmetic": real})
    assert main([*args, "--resume"]) == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5]
    assert all(r.get("verifier/arithmetic/error_rate", 0.0) == 0.0 for r in rows)  # step 3 trained anew


def test_validation_counts_and_names_the_samples_its_verifier_never_measured(
    tiny_model_dir, tmp_path, monkeypatch
):
    """The arithmetic verifier raises on problems with an odd index: each validation (before training and
    after the last step) logs eval/verifier_errors = 0.5 and one warning per pass naming how many samples
    and the error, since those samples count as wrong in eval/accuracy and eval/mean@2."""
    from reasonrl.rewards.base import VERIFIERS

    real = VERIFIERS.get("arithmetic")

    def odd_ones_fail(response, problem):
        if problem.extra_info["index"] % 2:
            raise ConnectionError("the scoring service went away")
        return real(response, problem)

    monkeypatch.setattr(VERIFIERS, "_entries", {**VERIFIERS._entries, "arithmetic": odd_ones_fail})
    logs = []
    cfg = _cfg(tiny_model_dir, tmp_path / "r", 1, "reward.error_patience=0", "checkpoint.every=0")
    hist = train(cfg, log=logs.append)["history"]
    assert [r["eval/verifier_errors"] for r in hist] == [0.5, 0.5]
    assert all(r["eval/accuracy"] <= 0.5 and r["eval/mean@2"] <= 0.5 for r in hist)
    assert [x for x in logs if "validation" in str(x)] == [
        f"warning: step {step}: validation (eval/{name}): the verifier failed on {k} of {2 * k} samples (e.g. "
        "'error: ConnectionError: the scoring service went away'); they count as wrong"
        for step in (0, 1) for name, k in (("accuracy", 4), ("mean@2", 8))
    ]  # fmt: skip


def test_training_at_a_rollout_temperature_reads_the_log_probs_it_sampled(tiny_model_dir, tmp_path):
    """rollout.temperature 0.7: the trainer's log-probs are those of the tempered policy the rollouts came
    from, so the sampler-vs-trainer gap stays at rounding (it was ~0.3 nats per token, the trainer
    reading temperature-1 log-probs)."""
    hist = train(
        _cfg(tiny_model_dir, tmp_path / "t", 2, "checkpoint.every=0", "rollout.temperature=0.7"),
        log=lambda *a: None,
    )["history"]
    steps = [h for h in hist if "rollout/logprob_gap_max" in h]
    assert len(steps) == 2 and max(h["rollout/logprob_gap_max"] for h in steps) < 1e-4
