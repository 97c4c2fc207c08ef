"""Supervised fine-tuning (`algo.objective=sft`) through the RL trainer: the loss is the negative
log-likelihood of the rows' responses (checked against the model run by hand), it falls as the model
learns them, greedy accuracy rises, a run killed with SIGKILL and resumed ends with the weights of one
that was not, and settings or rows SFT cannot honour are refused before the model loads."""

from __future__ import annotations

import json
import math

import pytest
import torch
from test_run_dir import killed_and_resumed
from test_train_loop import _cfg, _stable

from reasonrl.config import ConfigError, load_config
from reasonrl.errors import InputError
from reasonrl.trainer.loop import train

pytestmark = pytest.mark.timeout(600)
SFT = ("algo.objective=sft", "rollout.n=1", "train.global_batch=8", "train.mini_batch=8", "train.micro_batch=4",
       "train.epochs=1", "data.response_key=extra_info.solution", "rollout.max_new_tokens=24")  # fmt: skip


def _rows(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_loss_is_the_responses_nll_and_it_falls(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasonrl.data.prompts import encode_prompt
    from reasonrl.trainer.sft import SftRollouts

    seen = []
    real = SftRollouts.get
    SftRollouts.get = lambda self, step: seen.append(out := real(self, step)) or out
    try:
        out = train(_cfg(tiny_model_dir, tmp_path / "run", 60, *SFT, "train.lr=3e-3", "val.every=60",
                         "checkpoint.every=60"))  # fmt: skip
    finally:
        SftRollouts.get = real
    hist = [r for r in out["history"] if r["step"] > 0]
    # step 1's loss, by hand: the token mean of -log p(response + EOS | prompt) under the model as saved
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    total, count = 0.0, 0
    for g in seen[0][0].groups:
        prompt = encode_prompt(tok, g.problem)
        target = tok(g.problem.extra_info["solution"], add_special_tokens=False)["input_ids"] + [
            tok.eos_token_id
        ]
        assert g.completions[0].token_ids == target[:24]
        ids = torch.tensor([prompt + target[:24]])
        with torch.no_grad():
            logp = model(ids).logits[0, len(prompt) - 1 : -1].log_softmax(-1)
        total -= logp.gather(-1, ids[0, len(prompt) :, None]).sum().item()
        count += len(target[:24])
    assert hist[0]["loss/nll"] == pytest.approx(total / count, rel=1e-4)
    assert hist[0]["actor/perplexity"] == pytest.approx(math.exp(hist[0]["loss/nll"]), rel=1e-5)
    assert "reward/mean" not in hist[0] and "loss/policy" not in hist[0]
    first, last = sum(r["loss/nll"] for r in hist[:3]) / 3, sum(r["loss/nll"] for r in hist[-3:]) / 3
    assert last < 0.5 * first, (first, last)
    # validation: greedy accuracy with the verifiers, and the held-out responses' NLL
    evals = [r for r in out["history"] if "eval/accuracy" in r]
    assert [r["step"] for r in evals] == [0, 60]
    assert evals[-1]["eval/nll"] < 0.6 * evals[0]["eval/nll"] and evals[0]["eval/nll_tokens"] > 0
    # rollouts.jsonl shows the targets trained on, unscored
    logged = json.loads((tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()[0])
    c = logged["completions"][0]
    assert c["text"] and c["reward"] is None and c["finish_reason"] in ("stop", "length")


def test_a_long_response_is_cut_at_max_new_tokens(tiny_model_dir, tmp_path):
    out = train(_cfg(tiny_model_dir, tmp_path / "run", 1, *SFT, "rollout.max_new_tokens=5", "val.size=4"))
    row = out["history"][-1]
    assert row["rollout/response_length_max"] == 5 and row["rollout/truncated_frac"] == 1.0


def test_sigkill_and_resume_end_with_the_uninterrupted_runs_metrics(tiny_model_dir, tmp_path):
    args = lambda run: [f"model.path={tiny_model_dir}", "model.device=cpu", f"log.run_dir={run}",  # noqa: E731
                        "train.steps=8", *SFT, "train.lr=1e-3", "data.train_size=64", "val.size=8",
                        "log.progress=false", "checkpoint.every=2", "checkpoint.keep_last=5"]  # fmt: skip
    full, resumed = killed_and_resumed(args, tmp_path, kill_after=4, steps=8)
    assert [r["step"] for r in resumed] == list(range(9))
    for r in resumed:
        assert _stable(r) == full[r["step"]], r["step"]


@pytest.mark.parametrize(("extra", "message"), [
    (("algo.kl.coef=0.01",), "algo.kl.coef=0.01 is an RL setting; algo.objective=sft trains on the data's responses"),
    (("algo.policy_loss=gspo",), "algo.policy_loss='gspo' is an RL setting"),
    (("rollout.n=4", "train.global_batch=16"), "rollout.n=4 with algo.objective=sft"),
    (("rollout.max_staleness=1",), "rollout.max_staleness > 0 with algo.objective=sft"),
    (("algo.objective=dpo",), "algo.objective"),
])  # fmt: skip
def test_settings_sft_cannot_honour_are_refused_naming_the_key(tiny_model_dir, tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(None, [f"model.path={tiny_model_dir}", f"log.run_dir={tmp_path}", *SFT, *extra])


def test_a_row_without_a_response_is_named_before_the_model_loads(tiny_model_dir, tmp_path, monkeypatch):
    import reasonrl.trainer.setup as setup

    monkeypatch.setattr(setup, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    with pytest.raises(InputError, match=r"train data: row 0 \(uid arith-2-0\): no response text at "
                                         r"extra_info.answer \(data.response_key"):  # fmt: skip
        train(_cfg(tiny_model_dir, tmp_path / "run", 1, *SFT, "data.response_key=extra_info.answer"))


def test_two_ranks_train_as_one_process(tiny_model_dir, tmp_path):
    """FSDP2 on 2 ranks (gloo): each rank trains its share of a step's rows, the NLL normalised by the whole
    step's tokens, so both the training and the validation NLL equal one process's, step by step."""
    from test_fsdp2_train import _launch, _metrics, _ok

    args = lambda run: [f"model.path={tiny_model_dir}", "model.device=cpu", f"log.run_dir={run}",  # noqa: E731
                        "train.steps=3", *SFT, "train.micro_batch=2", "train.lr=1e-3", "data.train_size=64",
                        "val.size=4", "log.progress=false", "checkpoint.every=0"]  # fmt: skip
    _ok(_launch(2, args(tmp_path / "two")))
    _ok(_launch(1, args(tmp_path / "one")))
    two, one = _metrics(tmp_path / "two"), _metrics(tmp_path / "one")
    assert [r["step"] for r in two] == [r["step"] for r in one] == [0, 1, 2, 3]
    for a, b in zip(two, one):
        for key in ("loss/nll", "eval/nll", "eval/accuracy"):
            if key in b:
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), (a["step"], key)
    assert one[1]["loss/nll"] > one[3]["loss/nll"]


def test_rows_prepared_by_the_sft_converter_train_with_the_default_response_key(tiny_model_dir, tmp_path):
    from reasonrl.data.prepare import prepare
    from reasonrl.data.tasks import generate

    rows = [{"messages": [{"role": "user", "content": p.user_text},
                          {"role": "assistant", "content": p.extra_info["solution"]}], "answer": p.ground_truth}
            for p in generate("arithmetic", 24, seed=3, difficulty=2, split="train")]  # fmt: skip
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prepare("sft", [str(src)], tmp_path / "sft.parquet", {"data_source": "reasonrl/arithmetic"})
    files = [f"data.train_files=[{tmp_path / 'sft.parquet'}]", f"data.val_files=[{tmp_path / 'sft.parquet'}]"]
    sft = [x for x in SFT if not x.startswith("data.response_key")]  # the default: extra_info.response
    out = train(_cfg(tiny_model_dir, tmp_path / "run", 4, *sft, *files, "train.lr=3e-3"))
    hist = out["history"]
    assert hist[-1]["eval/nll_tokens"] > 24 and hist[-1]["eval/nll"] < hist[0]["eval/nll"]
    assert "eval/accuracy" in hist[-1] and all(
        r["loss/nll"] > 0 for r in hist[1:]
    )  # scored by the verifier too


@pytest.mark.parametrize("extra", [("model.lora.rank=4",), ("model.pack_tokens=64",)], ids=["lora", "packed"])
def test_lora_and_packed_forwards_train_the_same_nll(tiny_model_dir, tmp_path, extra):
    """LoRA starts as the model itself (B = 0) and packing changes how rows are laid out, not what they
    compute: the first step's loss is the plain run's, and the run trains."""
    plain = train(_cfg(tiny_model_dir, tmp_path / "plain", 1, *SFT, "val.size=4"))["history"]
    other = train(_cfg(tiny_model_dir, tmp_path / "other", 3, *SFT, "val.size=4", *extra))["history"]
    assert other[1]["loss/nll"] == pytest.approx(plain[1]["loss/nll"], rel=1e-4)
    assert other[0]["eval/nll"] == pytest.approx(plain[0]["eval/nll"], rel=1e-4)
    assert other[-1]["eval/nll"] < other[0]["eval/nll"]


def test_every_assistant_turn_of_a_conversation_is_trained_and_only_those(tiny_model_dir, tmp_path):
    """turns=all: the prompt ends before the first assistant turn; the loss covers both assistant turns
    (and the end token), not the user turn between them (checked against the model run by hand)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasonrl.data.prepare import prepare
    from reasonrl.data.prompts import encode_prompt
    from reasonrl.data.tasks import generate
    from reasonrl.trainer.sft import SftRollouts

    ps = generate("arithmetic", 16, seed=5, difficulty=2, split="train")
    rows = [{"messages": [{"role": "user", "content": a.user_text}, {"role": "assistant", "content": a.extra_info["solution"]},
                          {"role": "user", "content": b.user_text}, {"role": "assistant", "content": b.extra_info["solution"]}],
             "answer": b.ground_truth} for a, b in zip(ps[::2], ps[1::2])]  # fmt: skip
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prepare(
        "sft", [str(src)], tmp_path / "sft.parquet", {"data_source": "reasonrl/arithmetic", "turns": "all"}
    )
    seen = []
    real = SftRollouts.get
    SftRollouts.get = lambda self, step: seen.append(out := real(self, step)) or out
    try:
        files = [
            f"data.train_files=[{tmp_path / 'sft.parquet'}]",
            f"data.val_files=[{tmp_path / 'sft.parquet'}]",
        ]
        sft = [x for x in SFT if not x.startswith(("data.response_key", "rollout.max_new_tokens"))]
        out = train(_cfg(tiny_model_dir, tmp_path / "run", 1, *sft, *files, "rollout.max_new_tokens=96"))
    finally:
        SftRollouts.get = real
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    total, count = 0.0, 0
    for g in seen[0][0].groups:
        c, (first, user, second) = g.completions[0], g.problem.extra_info["response"]
        trained = [t for t, frozen in zip(c.token_ids, c.tool_mask) if not frozen]
        frozen = [t for t, frozen in zip(c.token_ids, c.tool_mask) if frozen]
        bare = lambda text: text.replace(" ", "")  # noqa: E731  (the tiny tokenizer has no space token)
        assert tok.decode(trained) == bare(first["content"] + second["content"]) + tok.eos_token
        assert tok.decode(frozen) == bare(f"<|user|>{user['content']}<|assistant|>")
        assert g.problem.prompt == [{"role": "user", "content": g.problem.user_text}]
        prompt = encode_prompt(tok, g.problem)
        ids = torch.tensor([prompt + c.token_ids])
        with torch.no_grad():
            logp = (
                model(ids)
                .logits[0, len(prompt) - 1 : -1]
                .log_softmax(-1)
                .gather(-1, ids[0, len(prompt) :, None])[:, 0]
            )
        keep = ~torch.tensor(c.tool_mask)
        total -= logp[keep].sum().item()
        count += int(keep.sum())
    assert out["history"][1]["loss/nll"] == pytest.approx(total / count, rel=1e-4)


def test_keep_best_may_name_the_validation_nll(tiny_model_dir, tmp_path):
    base = [f"model.path={tiny_model_dir}", f"log.run_dir={tmp_path}", "checkpoint.keep_best=eval/nll"]
    cfg = load_config(None, [*base, *SFT, "checkpoint.best_mode=min"])
    assert (cfg.checkpoint.keep_best, cfg.checkpoint.best_mode) == ("eval/nll", "min")
    with pytest.raises(
        ConfigError, match="checkpoint.keep_best='eval/nll' is not a metric this run's validation"
    ):
        load_config(None, base)  # an RL run logs no NLL


def test_a_mixtures_rows_without_a_response_are_named_before_the_model_loads(
    tiny_model_dir, tmp_path, monkeypatch
):
    import reasonrl.trainer.setup as setup
    from reasonrl.data.schema import write_problems
    from reasonrl.data.tasks import generate

    write_problems(tmp_path / "a.parquet", generate("arithmetic", 8, seed=1, difficulty=2, split="train"))
    monkeypatch.setattr(setup, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    mixture = f"data.mixture=[{{name: a, weight: 1, files: [{tmp_path / 'a.parquet'}]}}]"
    with pytest.raises(
        InputError, match=r"data.mixture: row 0 \(uid arith-2-0\): no response text at extra_info.answer"
    ):
        train(_cfg(tiny_model_dir, tmp_path / "run", 1, *SFT, mixture, "data.response_key=extra_info.answer"))


def test_the_prompt_may_come_from_another_field_of_the_row(tiny_model_dir, tmp_path, monkeypatch):
    """data.prompt_key (verl SFT's prompt_key): the text there, as the user's message, is the prompt of
    training and validation; a row without it is named before the model loads; generated rows refuse it."""
    from dataclasses import replace

    from transformers import AutoTokenizer

    import reasonrl.trainer.setup as setup
    from reasonrl.data.prompts import encode_prompt
    from reasonrl.data.schema import write_problems
    from reasonrl.data.tasks import generate
    from reasonrl.trainer.sft import SftRollouts

    rows = generate("arithmetic", 16, seed=3, difficulty=2, split="train")
    rows = [replace(p, extra_info={**p.extra_info, "question": f"{p.user_text} ="}) for p in rows]
    write_problems(tmp_path / "t.parquet", rows)
    files = (f"data.train_files=[{tmp_path / 't.parquet'}]", f"data.val_files=[{tmp_path / 't.parquet'}]")
    seen, real = [], SftRollouts.get
    monkeypatch.setattr(SftRollouts, "get", lambda self, step: seen.append(out := real(self, step)) or out)
    out = train(
        _cfg(tiny_model_dir, tmp_path / "run", 2, *SFT, *files, "data.prompt_key=extra_info.question")
    )
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    by_uid = {p.uid: p for p in rows}
    for g in seen[0][0].groups:
        question = by_uid[g.problem.uid].extra_info["question"]
        assert g.problem.prompt == [{"role": "user", "content": question}]
        assert g.prompt_ids == encode_prompt(tok, g.problem)
    assert out["history"][-1]["eval/nll"] > 0
    monkeypatch.setattr(setup, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    with pytest.raises(
        InputError, match=r"train data: row 0 \(uid arith-2-0\): no prompt text at extra_info.nope"
    ):
        train(_cfg(tiny_model_dir, tmp_path / "r2", 1, *SFT, *files, "data.prompt_key=extra_info.nope"))
    with pytest.raises(ConfigError, match=r"data.prompt_key with data.mixture\[0\].task: only data files"):
        _cfg(tiny_model_dir, tmp_path / "r3", 1, *SFT, "data.prompt_key=extra_info.question",
             "data.mixture=[{name: t, weight: 1, task: arithmetic}]")  # fmt: skip
