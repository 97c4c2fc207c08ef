"""Single-device train engine on a random tiny Qwen2: micro-batch invariance of the gradient and the
update (token_mean with global normalisers), log-probs, the reference model, clipping, warm-up."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from reasonrl.algorithms.losses import ppo_clip
from reasonrl.algorithms.masked import aggregate, masked_mean, normalisers
from reasonrl.data.prompts import encode_prompt
from reasonrl.data.tasks import generate
from reasonrl.engines.single import SingleDeviceEngine, completion_logprobs
from reasonrl.trainer.batching import build_batch
from reasonrl.trainer.metrics import mean_metrics
from reasonrl.types import Completion, RolloutGroup

pytestmark = pytest.mark.timeout(120)

LENGTHS = [[5, 2], [7, 3]]  # completion lengths of 2 groups x 2 samples: ragged on purpose


@pytest.fixture(scope="module")
def batch(tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    problems = generate("arithmetic", 1, seed=0, difficulty=1) + generate(
        "countdown", 1, seed=0, difficulty=2
    )
    g = torch.Generator().manual_seed(0)
    groups = []
    for prob, lens in zip(problems, LENGTHS):
        comps = []
        for n in lens:
            ids = torch.randint(5, len(tok), (n,), generator=g).tolist()  # ordinary (non-special) tokens
            comps.append(Completion(ids, "", [0.0] * n, "length"))
        groups.append(RolloutGroup(prob, encode_prompt(tok, prob), comps, rewards=[1.0, 0.0]))
    b = build_batch(groups, pad_id=tok.pad_token_id)
    assert b.attention_mask[:, 0].tolist().count(0) == 2  # the shorter prompt is left-padded
    with torch.no_grad():
        lp, _ = completion_logprobs(model, b)
    # old policy = current one shifted a little, so ratios differ from 1 and some tokens clip
    b.old_logprobs = (lp + 0.3 * torch.randn(lp.shape, generator=g)) * b.mask
    b.advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])[:, None] * b.mask
    return b


def _loss_fn(total_tokens):
    """ppo_clip + a small entropy bonus, both token_mean over `total_tokens` (None = local counts)."""

    def loss_fn(micro, logprobs, entropy):
        tok_loss, m = ppo_clip(logprobs, micro.old_logprobs, micro.advantages, micro.mask)
        pg = aggregate(tok_loss, micro.mask, "token_mean", total_tokens=total_tokens)
        ent = aggregate(entropy, micro.mask, "token_mean", total_tokens=total_tokens)
        loss = pg - 0.01 * ent
        clipped = m["clipfrac_low"] + m["clipfrac_high"]
        return loss, {"loss/total": loss.detach(), "actor/clipfrac": clipped}

    return loss_fn


def _train(model, batch, micro, loss_fn, **engine_kwargs):
    """One train_step; returns (gradients as the optimizer saw them, new weights, metrics)."""
    model = copy.deepcopy(model)
    kwargs = {"lr": 1e-3, "grad_clip": 1e9, **engine_kwargs}
    engine = SingleDeviceEngine(model, **kwargs)
    grads: dict[str, torch.Tensor] = {}

    def record(optimizer, args, kwargs):
        grads.update({n: p.grad.detach().clone() for n, p in model.named_parameters()})

    engine.optimizer.register_step_pre_hook(record)
    metrics = engine.train_step(batch, loss_fn, micro_batch=micro)
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    assert all(p.grad is None for p in model.parameters())  # zeroed after the step
    return grads, weights, metrics


def _close(a: dict, b: dict, rtol=1e-5, atol=1e-8, scaled=0.0):
    """Every tensor of `a` close to `b`'s; `scaled` adds that fraction of the tensor's largest entry to
    atol (gradients summed in another order: 3e-8 to 9e-8 apart in entries up to 0.42 on an AMD EPYC,
    which elementwise rtol cannot take for the entries near 0)."""
    assert a.keys() == b.keys()
    for k in a:
        tol = max(atol, scaled * b[k].abs().max().item())
        torch.testing.assert_close(a[k], b[k], rtol=rtol, atol=tol, msg=k)


def test_micro_batch_split_gives_the_same_gradient_and_update(tiny_model_and_tokenizer, batch):
    model, _ = tiny_model_and_tokenizer
    loss_fn = _loss_fn(normalisers(batch.mask)["total_tokens"])
    g4, w4, m4 = _train(model, batch, 4, loss_fn)
    g2, w2, m2 = _train(model, batch, 2, loss_fn)
    g1, w1, m1 = _train(model, batch, 1, loss_fn)
    assert max(g.abs().max().item() for g in g4.values()) > 1e-3  # a real gradient
    _close(g2, g4, scaled=1e-6)
    _close(g1, g4, scaled=1e-6)
    _close(w2, w4, atol=1e-7)
    _close(w1, w4, atol=1e-7)
    # loss terms add up over micro-batches; the weights moved
    torch.testing.assert_close(m2["loss/total"], m4["loss/total"], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(m2["grad_norm"], m4["grad_norm"], rtol=1e-5, atol=0)
    assert any(not torch.equal(w4[k], p) for k, p in model.named_parameters())


def test_local_normalisers_break_the_invariance(tiny_model_and_tokenizer, batch):
    """Negative control: with each micro-batch normalised by its own token count the gradients differ."""
    model, _ = tiny_model_and_tokenizer
    g4, _, _ = _train(model, batch, 4, _loss_fn(None))
    g2, _, _ = _train(model, batch, 2, _loss_fn(None))
    rel = max(((g2[k] - g4[k]).norm() / g4[k].norm().clamp_min(1e-12)).item() for k in g4)
    assert rel > 1e-2


def test_grad_norm_is_reported_before_clipping(tiny_model_and_tokenizer, batch):
    model, _ = tiny_model_and_tokenizer
    loss_fn = _loss_fn(normalisers(batch.mask)["total_tokens"])
    grads, _, metrics = _train(model, batch, 2, loss_fn, grad_clip=1e9)
    full = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads.values()]))
    torch.testing.assert_close(metrics["grad_norm"], full, rtol=1e-5, atol=0)
    assert metrics["nonfinite_grad_frac"].item() == 0.0
    clip = 0.5 * full.item()
    clipped, _, metrics_c = _train(model, batch, 2, loss_fn, grad_clip=clip)
    torch.testing.assert_close(metrics_c["grad_norm"], full, rtol=1e-5, atol=0)
    got = torch.linalg.vector_norm(torch.stack([g.norm() for g in clipped.values()]))
    torch.testing.assert_close(got, torch.tensor(clip), rtol=1e-4, atol=0)


@pytest.mark.filterwarnings("ignore:Detected call of .lr_scheduler.step")
def test_non_finite_gradient_skips_the_update(tiny_model_and_tokenizer, batch):
    model, _ = tiny_model_and_tokenizer

    def nan_loss(micro, logprobs, entropy):
        loss = (logprobs * micro.mask).sum() * float("nan")
        return loss, {"loss/total": loss.detach()}

    _, weights, metrics = _train(model, batch, 2, nan_loss)
    assert torch.isnan(metrics["grad_norm"]) and metrics["nonfinite_grad_frac"].item() == 1.0
    for k, p in model.named_parameters():
        assert torch.equal(weights[k], p), k


def test_warmup_scales_the_first_update(tiny_model_and_tokenizer, batch):
    """AdamW's first step moves every weight with a clearly non-zero gradient by exactly lr."""
    model, _ = tiny_model_and_tokenizer
    loss_fn = _loss_fn(normalisers(batch.mask)["total_tokens"])
    name = "model.layers.0.mlp.down_proj.weight"
    grads, weights, _ = _train(model, batch, 4, loss_fn, lr=1e-2, warmup_steps=4)
    before = dict(model.named_parameters())[name].detach()
    step = (weights[name] - before).abs()
    big = grads[name].abs() > 1e-5
    assert big.sum() > 100
    torch.testing.assert_close(step[big], torch.full_like(step[big], 1e-2 / 4), rtol=1e-3, atol=0)


def test_the_logged_learning_rate_is_the_one_each_update_used(tiny_model_and_tokenizer, batch):
    """Warm-up over 4 updates, then a linear decay to 0 at update 8 (before: the metric was the next
    update's rate, one step ahead of the update it was logged with)."""
    model = copy.deepcopy(tiny_model_and_tokenizer[0])
    engine = SingleDeviceEngine(model, lr=1e-2, warmup_steps=4, lr_schedule="linear", total_steps=8)
    loss_fn = _loss_fn(normalisers(batch.mask)["total_tokens"])
    lrs = []
    for _ in range(6):
        used = engine.optimizer.param_groups[0]["lr"]
        lrs.append(engine.train_step(batch, loss_fn, micro_batch=4)["lr"].item())
        assert lrs[-1] == pytest.approx(used, rel=1e-6)
    assert lrs == pytest.approx([2.5e-3, 5e-3, 7.5e-3, 1e-2, 1e-2, 7.5e-3])


def test_logprobs_equal_completion_logprobs(tiny_model_and_tokenizer, batch):
    model = copy.deepcopy(tiny_model_and_tokenizer[0]).train()
    engine = SingleDeviceEngine(model, lr=1e-3)
    got = engine.logprobs(batch, micro_batch=3)  # uneven split: 3 + 1 rows
    with torch.no_grad():
        want, _ = completion_logprobs(model, batch)
    assert got.shape == batch.mask.shape and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert model.training  # mode restored
    assert got[batch.mask].max() < 0


def test_reference_model_logprobs(tiny_model_and_tokenizer, batch):
    model = tiny_model_and_tokenizer[0]
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    engine = SingleDeviceEngine(copy.deepcopy(model), lr=1e-3, ref_model=ref)
    got_ref = engine.logprobs(batch, micro_batch=2, reference=True)
    got_pol = engine.logprobs(batch, micro_batch=2)
    with torch.no_grad():
        want_ref, _ = completion_logprobs(ref, batch)
    torch.testing.assert_close(got_ref, want_ref, rtol=1e-5, atol=1e-6)
    assert (got_ref - got_pol)[batch.mask].abs().max() > 1e-2
    # without a reference model, asking for one is an error
    with pytest.raises(ValueError, match="no reference model"):
        SingleDeviceEngine(copy.deepcopy(model), lr=1e-3).logprobs(batch, 2, reference=True)


def test_engine_state_round_trip(tiny_model_and_tokenizer, batch):
    model = tiny_model_and_tokenizer[0]
    loss_fn = _loss_fn(normalisers(batch.mask)["total_tokens"])
    a = SingleDeviceEngine(copy.deepcopy(model), lr=1e-3, warmup_steps=3)
    a.train_step(batch, loss_fn, micro_batch=4)
    b = SingleDeviceEngine(copy.deepcopy(a.model), lr=1e-3, warmup_steps=3)
    buf = io.BytesIO()  # through bytes as in a checkpoint (torch shares tensors loaded in memory)
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b.load_state_dict(torch.load(buf, weights_only=False))
    # the next step of both engines is identical (Adam moments and warm-up position restored)
    ma = a.train_step(batch, loss_fn, micro_batch=2)
    mb = b.train_step(batch, loss_fn, micro_batch=2)
    assert ma["lr"] == mb["lr"]
    for (n, pa), pb in zip(a.model.named_parameters(), b.model.parameters()):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0, msg=n)


def test_dropping_zero_advantage_rows_leaves_the_update_unchanged(tiny_model_and_tokenizer, batch):
    """without_inert_rows: rows whose advantage is 0 everywhere add nothing to a ppo_clip token_mean
    loss with the whole batch's normaliser, so skipping them gives the same gradient and update."""
    from reasonrl.trainer.batching import without_inert_rows

    model, _ = tiny_model_and_tokenizer
    b = batch.select(torch.arange(batch.size))
    b.advantages = torch.tensor([1.0, 0.0, 0.0, -0.5])[:, None] * b.mask  # rows 1 and 2 inert
    total = normalisers(b.mask)["total_tokens"]

    def pg_only(micro, logprobs, entropy):
        tok_loss, _ = ppo_clip(logprobs, micro.old_logprobs, micro.advantages, micro.mask)
        loss = aggregate(tok_loss, micro.mask, "token_mean", total_tokens=total)
        return loss, {"loss/total": loss.detach()}

    slim = without_inert_rows(b)
    assert slim.size == 2 and slim.advantages[:, 0].tolist() == [1.0, -0.5]
    g_full, w_full, m_full = _train(model, b, 4, pg_only)
    g_slim, w_slim, m_slim = _train(model, slim, 4, pg_only)
    assert max(g.abs().max().item() for g in g_full.values()) > 1e-4
    _close(g_slim, g_full, atol=1e-7)
    _close(w_slim, w_full, atol=1e-7)
    torch.testing.assert_close(m_slim["loss/total"], m_full["loss/total"], rtol=1e-5, atol=1e-7)
    # a batch with no active row is kept whole (the optimizer must still step as usual)
    b.advantages = torch.zeros_like(b.advantages)
    assert without_inert_rows(b).size == b.size


@pytest.mark.parametrize(
    "schedule,expected",
    [
        # warm-up 2 of 10 optimizer steps, then decay to 0.1 over steps 2..10
        ("constant", [0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
        # linear: 0.1 + 0.9 * (1 - (s - 2) / 8)
        ("linear", [0.5, 1.0, 1.0, 0.8875, 0.775, 0.6625, 0.55, 0.4375, 0.325, 0.2125, 0.1]),
        # cosine: 0.1 + 0.9 * 0.5 * (1 + cos(pi * (s - 2) / 8)); s=6 is the midpoint -> 0.55
        ("cosine", [0.5, 1.0, 1.0, 0.9657, 0.8682, 0.7222, 0.55, 0.3778, 0.2318, 0.1343, 0.1]),
    ],
)
def test_lr_factor_schedules(schedule, expected):
    from reasonrl.engines.single import lr_factor

    got = [lr_factor(s, warmup=2, total=10, schedule=schedule, min_ratio=0.1) for s in range(11)]
    assert got == pytest.approx(expected, abs=1e-4)
    with pytest.raises(ValueError, match="known: constant, linear, cosine"):
        lr_factor(5, warmup=0, total=10, schedule="step")
    # past the total (an extended run): held at the floor, never below it
    assert lr_factor(14, warmup=2, total=10, schedule=schedule, min_ratio=0.1) == pytest.approx(expected[-1])
    # no room to decay (total <= warm-up): constant after the warm-up
    assert [lr_factor(s, warmup=2, total=2, schedule=schedule, min_ratio=0.1) for s in (2, 3, 9)] == [1.0] * 3


def test_training_forward_is_the_forward_the_model_settings_ask_for():
    from reasonrl.config.sections import ModelConfig
    from reasonrl.engines.packing import packed_logprobs
    from reasonrl.engines.single import training_forward

    assert training_forward(ModelConfig()) is None  # the engine's default: completion_logprobs
    chunked = training_forward(ModelConfig(logprob_chunk=1))
    assert chunked.func is completion_logprobs and chunked.keywords == {"chunk": 1}
    packed = training_forward(ModelConfig(pack_tokens=1))  # packing takes the chunk too, also 0
    assert packed.func is packed_logprobs and packed.keywords == {"pack_tokens": 1, "chunk": 0}
    both = training_forward(ModelConfig(pack_tokens=64, logprob_chunk=8))
    assert both.func is packed_logprobs and both.keywords == {"pack_tokens": 64, "chunk": 8}


def test_diagnostics_are_token_means_over_the_update_and_maxima_are_maxed(tiny_model_and_tokenizer, batch):
    """Micro-batches of 3 rows (5 + 2 + 7 trained tokens) and 1 row (3): a token-mean diagnostic of each
    is weighted by its tokens, so the update reports the mean over all its tokens (the mean of the two
    micro-batches' means would give the one row's tokens the weight of the other three rows')."""
    model, _ = tiny_model_and_tokenizer
    with torch.no_grad():
        full, _ = completion_logprobs(model, batch)

    def loss_fn(micro, logprobs, entropy):
        loss = (logprobs * micro.mask).sum() / batch.mask.sum()  # normalised by the whole batch
        top = logprobs.detach().masked_fill(~micro.mask.bool(), -torch.inf).max()
        return loss, {"loss/lp": loss.detach(), "lp_mean": masked_mean(logprobs.detach(), micro.mask),
                      "lp_max": top}  # fmt: skip

    mask = batch.mask.bool()
    _, _, m = _train(model, batch, 3, loss_fn)
    micro_means = [full[:3][mask[:3]].mean(), full[3][mask[3]].mean()]
    assert abs(micro_means[0] - micro_means[1]) > 0.05  # so the two ways of averaging differ
    torch.testing.assert_close(m["lp_mean"], full[mask].mean(), rtol=1e-5, atol=1e-6)  # over all tokens
    torch.testing.assert_close(m["lp_max"], full[mask].max())  # a maximum: the largest of any
    torch.testing.assert_close(m["loss/lp"], full[mask].sum() / mask.sum(), rtol=1e-5, atol=1e-7)  # summed
    assert m.token_means == {"lp_mean"} and m.tokens == float(mask.sum())  # what a step weights it by
    # a micro-batch with no trained token (its row masked out entirely) does not count at all
    masked = copy.copy(batch)
    masked.mask = batch.mask.clone()
    masked.mask[3] = 0
    _, _, m = _train(model, masked, 3, loss_fn)
    torch.testing.assert_close(m["lp_mean"], full[:3][mask[:3]].mean(), rtol=1e-5, atol=1e-6)


def test_a_steps_diagnostics_are_token_means_over_all_its_updates(tiny_model_and_tokenizer, batch):
    """Two updates (mini-batches of 3 rows and of 1, the weights unchanged: lr 0) averaged as the loop
    averages a step's updates: the token mean over both, not the mean of the two updates' means."""
    model, _ = tiny_model_and_tokenizer
    with torch.no_grad():
        full, _ = completion_logprobs(model, batch)

    def loss_fn(micro, logprobs, entropy):
        return (logprobs * micro.mask).sum() * 0.0, {"lp_mean": masked_mean(logprobs.detach(), micro.mask)}

    engine = SingleDeviceEngine(copy.deepcopy(model), lr=0.0)
    updates = [
        engine.train_step(batch.select(rows), loss_fn, micro_batch=4) for rows in (slice(0, 3), slice(3, 4))
    ]
    mask = batch.mask.bool()
    assert abs(updates[0]["lp_mean"] - updates[1]["lp_mean"]) > 0.05  # so the two ways of averaging differ
    step = mean_metrics(updates)
    assert step["lp_mean"] == pytest.approx(float(full[mask].mean()), rel=1e-5)
    assert step["lr"] == 0.0 and step["nonfinite_grad_frac"] == 0.0  # the rest: plain means


def test_log_probs_are_taken_without_dropout_and_updates_with_it(tiny_model_and_tokenizer, batch):
    """outputs() is the policy itself (eval mode, the caller's mode restored); train_step trains with
    the model's dropout on, whatever mode it was left in."""
    model = copy.deepcopy(tiny_model_and_tokenizer[0])
    with torch.no_grad():
        clean, _ = completion_logprobs(model.eval(), batch)
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.5
    engine = SingleDeviceEngine(model, lr=1e-3)
    model.train()
    assert torch.equal(engine.logprobs(batch, 4), clean) and torch.equal(engine.logprobs(batch, 2), clean)
    assert model.training
    seen = []

    def loss_fn(micro, logprobs, entropy):
        seen.append(logprobs.detach())
        return (logprobs * micro.mask).sum() * 0.0, {}

    model.eval()
    engine.train_step(batch, loss_fn, micro_batch=4)
    assert model.training
    assert not torch.allclose(seen[0] * batch.mask, clean * batch.mask, atol=1e-3)


def test_a_warm_up_share_of_the_run_in_optimizer_updates_rounded_up():
    from reasonrl.config import ConfigError, load_config
    from reasonrl.trainer.setup import optimizer_updates, warmup_updates

    def t(*extra):
        return load_config(
            None,
            [
                "train.steps=10",
                "train.global_batch=64",
                "train.mini_batch=32",
                "train.micro_batch=32",
                *extra,
            ],
        ).train

    assert optimizer_updates(t()) == 20 and optimizer_updates(t("train.epochs=3")) == 60
    assert warmup_updates(t()) == 0
    assert warmup_updates(t("train.warmup_steps=7")) == 7
    assert warmup_updates(t("train.warmup_ratio=0.1")) == 2  # 0.1 x 20 updates
    assert warmup_updates(t("train.warmup_ratio=0.1", "train.steps=15")) == 3  # 0.1 x 30, not 4 by rounding
    assert warmup_updates(t("train.warmup_ratio=0.12")) == 3  # 2.4 rounded up
    for bad, msg in (("train.warmup_ratio=1", r"train.warmup_ratio must be in \[0, 1\), got 1"),
                     ("train.warmup_ratio=-0.1", r"must be in \[0, 1\)")):  # fmt: skip
        with pytest.raises(ConfigError, match=msg):
            t(bad)
    with pytest.raises(ConfigError, match="train.warmup_steps and train.warmup_ratio are both set"):
        t("train.warmup_steps=2", "train.warmup_ratio=0.1")
