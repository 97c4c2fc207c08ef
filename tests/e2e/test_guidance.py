"""Off-policy guidance (`algo.guidance`, LUFFY) through the trainer: each group is rollout.n - 1 samples and
the row's demonstration, scored with them; the step's reward metrics are the samples', the demonstrations'
are their own; the policy's probability of the demonstrations rises as it trains on them; it runs with
asynchronous rollouts too; settings and rows it cannot work with are refused before the model loads."""

from __future__ import annotations

import json

import pytest
from test_train_loop import _cfg

from reasonrl.config import ConfigError
from reasonrl.errors import InputError
from reasonrl.trainer.loop import train

pytestmark = pytest.mark.timeout(600)
GUIDED = ("algo.guidance.enabled=true", "data.response_key=extra_info.solution", "rollout.max_new_tokens=40",
          "train.epochs=1", "train.lr=3e-3", "checkpoint.every=0", "val.size=4", "val.n=1")  # fmt: skip


def test_groups_hold_the_demonstration_and_the_metrics_describe_the_samples(tiny_model_dir, tmp_path):
    import reasonrl.trainer.rollout_source as source
    from reasonrl.trainer.sampling import StepRollouts
    from reasonrl.trainer.setup import build_run  # noqa: F401  (the trainer's modules, loaded)

    seen: list[StepRollouts] = []
    real = source.SyncRollouts.get
    source.SyncRollouts.get = lambda self, step: (out := real(self, step)) and (seen.append(out[0]) or out)
    try:
        out = train(_cfg(tiny_model_dir, tmp_path / "run", 8, *GUIDED, "log.rollouts_per_step=4"))
    finally:
        source.SyncRollouts.get = real
    hist = out["history"]
    for rollouts, row in zip(seen, hist[1:]):
        for g in rollouts.groups:  # 3 samples, then the row's worked solution
            assert [c.guided for c in g.completions] == [False, False, False, True]
            assert g.completions[-1].text.replace(" ", "") == g.problem.extra_info["solution"].replace(
                " ", ""
            )
        samples = [r for g in rollouts.groups for r in g.rewards[:3]]
        demos = [g.rewards[3] for g in rollouts.groups]
        assert row["reward/mean"] == pytest.approx(sum(samples) / len(samples))
        assert row["rollout/guided_reward"] == pytest.approx(sum(demos) / len(demos))
        lengths = [len(c.token_ids) for g in rollouts.groups for c in g.completions[:3]]
        assert row["rollout/response_length"] == pytest.approx(sum(lengths) / len(lengths))
    assert all(r["rollout/guided_reward"] == 1.0 for r in hist[1:])  # the worked solutions are right
    assert all(r["reward/mean"] < 0.5 for r in hist[1:])  # the tiny random model's samples are not
    # the policy moves toward the demonstrations: their probability rises as it trains on them
    assert hist[-1]["actor/guided_prob"] > 1.2 * hist[1]["actor/guided_prob"], [
        r["actor/guided_prob"] for r in hist[1:]
    ]
    assert all(r["loss/guided"] < 0 for r in hist[1:])  # -A * f(p) with A > 0: they are pushed up
    logged = [json.loads(x) for x in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    assert all([c.get("guided", False) for c in g["completions"]] == [False] * 3 + [True] for g in logged)


def test_sigkill_and_resume_end_with_the_uninterrupted_runs_metrics(tiny_model_dir, tmp_path):
    """The demonstrations come from the rows the sampler draws: a run killed at a checkpoint and resumed
    trains on the same groups and ends with the uninterrupted run's metrics."""
    from test_run_dir import killed_and_resumed
    from test_train_loop import _overrides, _stable

    args = lambda run: [*_overrides(tiny_model_dir, run, 6, *GUIDED), "checkpoint.every=2"]  # noqa: E731
    full, resumed = killed_and_resumed(args, tmp_path, kill_after=2, steps=6)
    assert [r["step"] for r in resumed] == list(range(7)) and "loss/guided" in resumed[-1]
    for r in resumed:
        assert _stable(r) == full[r["step"]], r["step"]


def test_asynchronous_rollouts_carry_the_demonstrations(tiny_model_dir, tmp_path):
    out = train(
        _cfg(
            tiny_model_dir,
            tmp_path / "run",
            3,
            *GUIDED,
            "rollout.max_staleness=1",
            "algo.off_policy.tis_cap=2.0",
        )
    )
    hist = out["history"][1:]
    assert [r["rollout/guided_reward"] for r in hist] == [1.0, 1.0, 1.0] and all(
        "loss/guided" in r for r in hist
    )
    assert all(r["rollout/staleness"] >= 0 for r in hist)


@pytest.mark.parametrize(("extra", "message"), [
    (("rollout.n=1",), "rollout.n=1 with algo.guidance: a group is rollout.n - 1 samples and the demonstration"),
    (("algo.guidance.shaping=p_div_p",), "algo.guidance.shaping must be one of regularized, prob, logprob"),
    (("algo.guidance.gamma=0",), "algo.guidance.gamma must be > 0"),
    (("algo.off_policy.bypass=true",), "algo.guidance with algo.off_policy.bypass"),
    (("rollout.tools.enabled=true", "rollout.tools.names=[python]"), "a demonstration has no tool transcript"),
    (("algo.objective=sft",), "algo.guidance.enabled=True is an RL setting"),
])  # fmt: skip
def test_settings_it_cannot_work_with_are_refused(tiny_model_dir, tmp_path, extra, message):
    with pytest.raises(
        ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
    ):
        _cfg(tiny_model_dir, tmp_path, 1, *GUIDED, *extra)


def test_rows_without_a_text_demonstration_are_named_before_the_model_loads(
    tiny_model_dir, tmp_path, monkeypatch
):
    import reasonrl.trainer.setup as setup

    monkeypatch.setattr(setup, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    with pytest.raises(
        InputError, match=r"train data: row 0 \(uid arith-2-0\): no response text at extra_info.nope"
    ):
        train(_cfg(tiny_model_dir, tmp_path / "run", 1, *GUIDED, "data.response_key=extra_info.nope"))


@pytest.mark.parametrize(
    "extra", [("model.lora.rank=4",), ("model.pack_tokens=128",)], ids=["lora", "packed"]
)
def test_lora_and_packed_forwards_train_the_demonstrations_alike(tiny_model_dir, tmp_path, extra):
    """LoRA starts as the model itself and packing lays rows out differently: the first step's numbers are
    the plain run's, demonstrations included."""
    one = ("train.mini_batch=16",)  # one update: its loss is the first forward's
    plain = train(_cfg(tiny_model_dir, tmp_path / "plain", 1, *GUIDED, *one))["history"][1]
    other = train(_cfg(tiny_model_dir, tmp_path / "other", 1, *GUIDED, *one, *extra))["history"][1]
    for key in ("loss/guided", "loss/policy", "actor/guided_prob", "reward/mean"):
        assert other[key] == pytest.approx(plain[key], rel=1e-4, abs=1e-6), key


def test_two_ranks_put_the_same_demonstrations_in(tiny_model_dir, tmp_path):
    """FSDP2 on 2 ranks (gloo): each rank's groups carry their demonstrations, and the demonstrations'
    numbers are one process's (the samples are not: a rank's batch samples differently)."""
    from test_fsdp2_train import _launch, _metrics, _ok

    args = lambda run: [f"model.path={tiny_model_dir}", "model.device=cpu", f"log.run_dir={run}",  # noqa: E731
                        "train.steps=2", *GUIDED, "train.global_batch=16", "rollout.n=4", "train.mini_batch=16",
                        "train.micro_batch=4", "data.train_size=64", "log.progress=false"]  # fmt: skip
    _ok(_launch(2, args(tmp_path / "two")))
    _ok(_launch(1, args(tmp_path / "one")))
    two, one = _metrics(tmp_path / "two"), _metrics(tmp_path / "one")
    assert [r["step"] for r in two] == [r["step"] for r in one] == [0, 1, 2]
    assert two[1]["actor/guided_prob"] == pytest.approx(
        one[1]["actor/guided_prob"], rel=1e-5
    )  # before updates
    assert [r["rollout/guided_reward"] for r in two[1:]] == [r["rollout/guided_reward"] for r in one[1:]]
    assert all(r["loss/guided"] < 0 for r in two[1:])
