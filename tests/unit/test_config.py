"""Run configuration: YAML recipe + dotted overrides, validation errors that name the key, round trips."""

from __future__ import annotations

import pytest

from reasonrl.config import ConfigError, RunConfig, from_dict, load_config, to_dict, to_yaml

RECIPE = """\
name: unit
rollout:
  n: 4
  temperature: 0.7
train:
  global_batch: 32
  mini_batch: 16
  micro_batch: 8
  lr: 3.0e-4
algo:
  adv_estimator: rloo
  loss_agg: seq_mean_token_mean
data:
  task: countdown
"""


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE)
    return path


def test_defaults_without_recipe():
    cfg = load_config()
    assert isinstance(cfg, RunConfig)
    assert (cfg.rollout.n, cfg.train.global_batch, cfg.train.mini_batch, cfg.train.micro_batch) == (
        8,
        128,
        128,
        64,
    )
    assert (cfg.algo.adv_estimator, cfg.algo.policy_loss, cfg.algo.loss_agg) == (
        "grpo",
        "ppo_clip",
        "token_mean",
    )


def test_recipe_then_overrides(recipe):
    cfg = load_config(recipe, ["train.lr=1e-3", "algo.clip_high=0.28", "rollout.n=8", "name=over"])
    # from the recipe
    assert cfg.rollout.temperature == 0.7
    assert (cfg.train.global_batch, cfg.train.mini_batch, cfg.train.micro_batch) == (32, 16, 8)
    assert cfg.algo.adv_estimator == "rloo"
    assert cfg.algo.loss_agg == "seq_mean_token_mean"
    assert cfg.data.task == "countdown"
    # overrides win over the recipe
    assert cfg.train.lr == 1e-3
    assert cfg.algo.clip_high == 0.28
    assert cfg.rollout.n == 8
    assert cfg.name == "over"
    # untouched keys keep their defaults
    assert cfg.algo.clip_low is None  # unset: the policy loss keeps its own default
    assert cfg.train.betas == [0.9, 0.999]


def test_override_types_are_converted():
    cfg = load_config(None, ["train.steps=7", "train.lr=0.5", "model.gradient_checkpointing=true"])
    assert cfg.train.steps == 7 and type(cfg.train.steps) is int
    assert cfg.train.lr == 0.5 and type(cfg.train.lr) is float
    assert cfg.model.gradient_checkpointing is True


def test_adv_kwargs_override_reaches_the_dict():
    cfg = load_config(None, ["algo.adv_kwargs.scale_by_std=false"])
    assert cfg.algo.adv_kwargs == {"scale_by_std": False}


def test_missing_recipe_file(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "nope.yaml")
    assert str(e.value).startswith(f"recipe file not found: {tmp_path / 'nope.yaml'} (built-in recipes, by name: "
                                   "cispo, clip_cov, dapo, demo, distributed/gpu1_qwen05b, distributed/gpu1_search_r1, distributed/gpu1_sft_qwen05b, distributed/gpu1_tir_math, distributed/gpu8_qwen7b, ")  # fmt: skip


def test_unknown_key_in_recipe_names_file_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  stepz: 3\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "train.stepz" in str(e.value)
    assert str(path) in str(e.value)


def test_wrong_type_in_recipe_names_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("rollout:\n  n: many\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "rollout.n" in str(e.value)


# (override, text the error must contain: the key, and the valid choices where there are any)
BAD_OVERRIDES = [
    (["train.stepz=3"], ["train.stepz"]),
    (["nosection.x=1"], ["nosection"]),
    (["train.steps=abc"], ["train.steps"]),
    (["train.lr=fast"], ["train.lr"]),
    (["model.gradient_checkpointing=maybe"], ["model.gradient_checkpointing"]),
    (["rollout.n=3"], ["train.global_batch=128", "rollout.n=3"]),
    (["train.global_batch=12", "rollout.n=8"], ["train.global_batch=12", "rollout.n=8"]),
    (["train.micro_batch=256"], ["train.micro_batch=256", "train.mini_batch=128"]),
    (["train.mini_batch=48"], ["train.mini_batch=48", "train.global_batch=128"]),
    (["train.mini_batch=256"], ["train.mini_batch=256", "train.global_batch=128"]),
    (["train.micro_batch=48"], ["train.micro_batch=48", "train.mini_batch=128"]),
    (
        ["algo.adv_estimator=foo"],
        ["algo.adv_estimator", "'foo'", "grpo", "rloo", "reinforce_pp", "remax", "gae"],
    ),
    (["algo.policy_loss=bar"], ["algo.policy_loss", "'bar'", "ppo_clip", "gspo", "cispo", "reinforce"]),
    (
        ["algo.loss_agg=baz"],
        ["algo.loss_agg", "'baz'", "token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"],
    ),
    (["algo.kl.estimator=k9"], ["algo.kl.estimator", "k3"]),
    (["algo.adv_kwargs.bogus=1"], ["algo.adv_kwargs", "'bogus'", "grpo", "scale_by_std", "eps"]),
    (["algo.adv_estimator=rloo", "algo.adv_kwargs.eps=1e-6"], ["algo.adv_kwargs", "'eps'", "rloo"]),
    (["algo.loss_kwargs.clip_z=3"], ["algo.loss_kwargs", "'clip_z'", "ppo_clip", "clip_c"]),
    (["data.task=chess"], ["data.task", "'chess'", "arithmetic", "countdown"]),
    (["rollout.engine=sglang"], ["rollout.engine", "'sglang'", "hf"]),
    (["model.dtype=int8"], ["model.dtype", "float32", "bfloat16"]),
    (["rollout.n=0"], ["rollout.n", "> 0"]),
    (["train.lr=0"], ["train.lr"]),
    (["rollout.temperature=-1"], ["rollout.temperature"]),
    (["rollout.top_p=0"], ["rollout.top_p"]),
    (["rollout.top_p=1.5"], ["rollout.top_p"]),
    (["train.betas=[0.9]"], ["train.betas"]),
    (["algo.kl.coef=-0.1"], ["algo.kl.coef"]),
    (["algo.clip_low=-0.1"], ["algo.clip_low"]),
    (["checkpoint.keep_last=0"], ["checkpoint.keep_last"]),
    (["train.steps"], ["train.steps", "section.key=value"]),
    (["rollout.temperature=0"], ["rollout.temperature must be > 0 for training rollouts"]),
    (
        ["rollout.n=1", "train.global_batch=8", "train.mini_batch=8", "train.micro_batch=8"],
        ["rollout.n=1", "algo.adv_estimator=grpo"],
    ),
    (
        [
            "rollout.n=1",
            "algo.adv_estimator=rloo",
            "train.global_batch=8",
            "train.mini_batch=8",
            "train.micro_batch=8",
        ],
        ["rollout.n=1", "algo.adv_estimator=rloo"],
    ),
    (
        [
            "rollout.n=1",
            "algo.adv_estimator=reinforce_pp_baseline",
            "train.global_batch=8",
            "train.mini_batch=8",
            "train.micro_batch=8",
        ],
        ["rollout.n=1", "algo.adv_estimator=reinforce_pp_baseline"],
    ),  # fmt: skip
    (["train.grad_clip=-1"], ["train.grad_clip must be > 0"]),
    (["train.grad_clip=0"], ["train.grad_clip must be > 0"]),
    (["train.betas=[1.5,0.9]"], ["train.betas must be two numbers in [0, 1)"]),
    (["train.betas=[0.9]"], ["train.betas must be two numbers in [0, 1)"]),
    (["train.lr=nan"], ["train.lr=nan is not a finite number"]),
    (["algo.clip_high=inf"], ["algo.clip_high=inf is not a finite number"]),
    (["reward.timeout_s=-inf"], ["reward.timeout_s=-inf is not a finite number"]),
    # inside lists too (a mixture's infinite weight made every draw a ValueError of random.choices)
    (
        ["data.mixture=[{name: a, task: addsub, weight: .inf}]"],
        ["data.mixture[0].weight=inf is not a finite number"],
    ),
    (["train.betas=[0.9,.nan]"], ["train.betas[1]=nan is not a finite number"]),
    (["rollout.max_new_tokens=0"], ["rollout.max_new_tokens must be > 0"]),
    (["data.max_prompt_tokens=-5"], ["data.max_prompt_tokens must be > 0"]),
    (["train.warmup_steps=-1"], ["train.warmup_steps must be >= 0"]),
    (["checkpoint.every=-2"], ["checkpoint.every must be >= 0"]),
    (["val.every=-1"], ["val.every must be >= 0"]),
    (["log.rollouts_per_step=-1"], ["log.rollouts_per_step must be >= 0"]),
    (["rollout.top_k=-3"], ["rollout.top_k must be >= 0"]),
    (["rollout.min_p=1"], ["rollout.min_p must be in [0, 1), got 1"]),
    (["rollout.min_p=-0.1"], ["rollout.min_p must be in [0, 1), got -0.1"]),
    # before: accepted, then a ValueError traceback when the first prompt was generated
    (["data.difficulty=0"], ["data.difficulty must be >= 1, got 0"]),
    (
        ["data.mixture=[{name: a, task: addsub}, {name: a, task: countdown}]"],
        ["data.mixture[1].name must be a unique non-empty string"],
    ),
    (["data.mixture=[{name: '', task: addsub}]"], ["data.mixture[0].name must be a unique non-empty string"]),
    (
        ["data.mixture=[{name: a, task: arithmetic, difficulty: 0}]"],
        ["data.mixture[0].difficulty must be a whole number >= 1, got 0"],
    ),
    (
        ["data.mixture=[{name: a, task: countdown, difficulty: hard}]"],
        ["data.mixture[0].difficulty must be a whole number >= 1, got 'hard'"],
    ),
    (
        ["data.mixture=[{name: a, reasoning_gym: 'basic_arithmetic:1', difficulty: 3}]"],
        ["data.mixture[0].difficulty applies to a built-in task only"],
    ),
    # a reward option's value is checked here too, not first when the reward runner is built
    (["reward.options.zebra=5"], ["reward.options.zebra must be a mapping of option: value, got 5"]),
    (["reward.weights.correctness=0"], ["reward.weights are all 0", "nothing is learned"]),
    (
        ["reward.options.zebra.partial=maybe"],
        ["reward.options.zebra: option 'partial' of 'zebra' must be true or false"],
    ),
    (
        ["reward.options.overlong.unit=tokens"],
        ["reward.options.overlong: overlong: unit must be chars or words"],
    ),
    (
        ["reward.options.table.rel_tol=-0.1"],
        ["reward.options.table: option 'rel_tol' of 'table' must be a number >= 0"],
    ),
    (["train.epochs=0"], ["train.epochs must be > 0"]),
    # a generated validation set has data.val_size problems: asking to validate on more is an error,
    # not a silent cut to 200
    (["val.size=500"], ["val.size=500", "200 validation problems", "data.val_size"]),
]


@pytest.mark.parametrize("overrides,needles", BAD_OVERRIDES, ids=[" ".join(o) for o, _ in BAD_OVERRIDES])
def test_bad_override_names_the_key(overrides, needles):
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    msg = str(e.value)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


def test_val_size_up_to_the_generated_or_any_with_files():
    assert load_config(None, ["val.size=500", "data.val_size=500"]).val.size == 500
    assert load_config(None, ["val.size=500", "data.train_files=[a.parquet]"]).val.size == 500  # at most


def test_data_task_is_free_when_train_files_are_given():
    cfg = load_config(None, ["data.task=anything", "data.train_files=[a.parquet]"])
    assert cfg.data.train_files == ["a.parquet"]


def test_scalar_for_a_section_names_the_section():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["train=3"])
    assert "'train'" in str(e.value)


def test_yaml_round_trip(recipe, tmp_path):
    cfg = load_config(
        recipe,
        ["algo.adv_estimator=grpo", "algo.adv_kwargs.scale_by_std=false", "data.train_files=[x.parquet]"],
    )
    text = to_yaml(cfg)
    assert "adv_estimator: grpo" in text and "scale_by_std: false" in text
    again_path = tmp_path / "again.yaml"
    again_path.write_text(text)
    again = load_config(again_path)
    assert again == cfg
    assert again.algo.adv_kwargs == {"scale_by_std": False}
    assert again.data.train_files == ["x.parquet"]


def test_dict_round_trip(recipe):
    cfg = load_config(recipe, ["train.betas=[0.8,0.95]"])
    d = to_dict(cfg)
    assert d["train"]["betas"] == [0.8, 0.95]
    assert d["rollout"]["n"] == 4
    assert from_dict(d) == cfg
    # a partial dict fills in the defaults
    partial = from_dict({"rollout": {"n": 2}})
    assert partial.rollout.n == 2 and partial.train.global_batch == 128


@pytest.mark.parametrize(
    "text, needle",
    [
        ("train:\n  lr: [1, 2\n", "line 3: not valid YAML"),
        ("- a\n- b\n", "a recipe must be a mapping of sections (model:, train:, ...), got list"),
        ("just a string\n", "a recipe must be a mapping of sections (model:, train:, ...), got str"),
        ("train: {lr: 1e-4}\n\tbad: tab\n", "not valid YAML"),
    ],
)
def test_recipe_that_is_not_a_yaml_mapping_is_named(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(str(path)) and needle in str(e.value), str(e.value)


def test_rollout_engine_choice_and_settings_come_from_the_registry():
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    assert "hf" in ROLLOUT_ENGINES.names()
    cfg = load_config(None, ["rollout.engine_kwargs.max_batch=64"])
    assert cfg.rollout.engine_kwargs == {"max_batch": 64}
    with pytest.raises(ConfigError, match="rollout.engine_kwargs.*'max_batchz'.*max_batch"):
        load_config(None, ["rollout.engine_kwargs.max_batchz=64"])
    with pytest.raises(ConfigError, match="rollout.engine='sglang' is not a valid choice; valid: hf, vllm"):
        load_config(None, ["rollout.engine=sglang"])
    # vLLM's own settings are checked the same way, without importing vllm
    assert (
        load_config(None, ["rollout.engine=vllm", "rollout.engine_kwargs.kv_cache_gb=0.5"]).rollout.engine
        == "vllm"
    )
    with pytest.raises(ConfigError, match="rollout.engine_kwargs.*'max_batch'"):
        load_config(None, ["rollout.engine=vllm", "rollout.engine_kwargs.max_batch=64"])


def test_plugins_are_imported_and_a_missing_one_is_named(tmp_path, monkeypatch):
    (tmp_path / "my_engines.py").write_text(
        "from reasonrl.rollout.factory import ROLLOUT_ENGINES\n"
        "@ROLLOUT_ENGINES.register('mine')\n"
        "def mine(model, tokenizer, speed: int = 1):\n    return None\n"
    )
    from reasonrl.rollout.factory import ROLLOUT_ENGINES

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ROLLOUT_ENGINES, "_entries", dict(ROLLOUT_ENGINES._entries))  # undone afterwards
    cfg = load_config(None, ["plugins=[my_engines]", "rollout.engine=mine", "rollout.engine_kwargs.speed=2"])
    assert cfg.rollout.engine == "mine"
    with pytest.raises(ConfigError, match="plugins: cannot import 'no_such_plugin_mod'"):
        load_config(None, ["plugins=[no_such_plugin_mod]"])


@pytest.mark.parametrize("old, new", [("algo.kl_coef=0.1", "algo.kl.coef"), ("algo.tis_cap=2", "algo.off_policy.tis_cap"),
                                      ("algo.dynamic_sampling=true", "algo.dynamic_sampling.enabled"),
                                      ("algo.critic_lr=0.001", "algo.critic.lr")])  # fmt: skip
def test_flat_algo_keys_of_earlier_releases_name_their_new_place(old, new, tmp_path):
    with pytest.raises(ConfigError, match=f"'{old.split('=')[0]}' is now '{new}'"):
        load_config(None, [old])
    key, value = old.split("=")
    recipe = tmp_path / "old.yaml"
    recipe.write_text(f"algo:\n  {key.split('.')[1]}: {value}\n")
    with pytest.raises(ConfigError, match=f"old.yaml: config key '{key}' is now '{new}'"):
        load_config(recipe)


def test_configs_stored_by_earlier_releases_are_migrated():
    from reasonrl.config import migrate

    old = to_dict(load_config(None, []))
    algo = old["algo"]
    for section in ("kl", "shaping", "dynamic_sampling", "off_policy", "critic"):
        del algo[section]
    algo.update({"kl_coef": 0.05, "kl_in_reward": True, "reward_map": [-1.0, 1.0], "dynamic_sampling": True,
                 "dynamic_sampling_max_rounds": 5, "tis_cap": 2.0, "value_clip": None})  # fmt: skip
    cfg = from_dict(old)
    a = cfg.algo
    assert (a.kl.coef, a.kl.in_reward, a.kl.estimator) == (0.05, True, "k3")
    assert a.shaping.reward_map == [-1.0, 1.0] and (
        a.dynamic_sampling.enabled,
        a.dynamic_sampling.max_rounds,
    ) == (True, 5)
    assert a.off_policy.tis_cap == 2.0 and a.critic.value_clip is None
    current = to_dict(load_config(None, ["algo.kl.coef=0.05"]))
    assert migrate(current) == current  # a current config passes through unchanged


@pytest.mark.parametrize(
    "mixture, error",
    [
        # (OmegaConf's own error named no key: "invalid config key ''")
        (["a"], r"invalid config key 'data.mixture': Cannot assign str to Dict"),
        ([{"name": "a", "task": "addsub", "size": 3}], r"data.mixture\[0\]: unknown key\(s\) \['size'\]"),
        ([{"name": "a", "task": "addsub", "files": ["x.parquet"]}], r"data.mixture\[0\]: give exactly one of"),
        ([{"name": "a", "task": "addsub"}, {"name": "a", "task": "countdown"}],
         r"data.mixture\[1\].name must be a unique non-empty string"),
        ([{"name": "a", "task": "addsub", "weight": 0}], r"data.mixture\[0\].weight must be a finite number > 0, got 0"),
        ([{"name": "a", "task": "addsub", "weight": True}], r"data.mixture\[0\].weight must be a finite number > 0"),
        # before: a mixture's unknown task passed the config and crashed in the data loading with a traceback
        ([{"name": "a", "task": "nope"}], r"data.mixture\[0\].task='nope' is not a valid choice; valid: addsub, "
                                          r"arithmetic, countdown$"),
        ([{"name": "a", "task": "leg_counting"}], r"data.mixture\[0\].task='leg_counting' is not a valid choice; .*; "
                                                  r"'leg_counting' is a reasoning-gym dataset: data.mixture\[0\]."
                                                  r"reasoning_gym: 'leg_counting:1' instead of task$"),
    ],
)  # fmt: skip
def test_a_bad_mixture_entry_is_a_config_error_naming_it(mixture, error):
    import json

    with pytest.raises(ConfigError, match=error):
        load_config(None, [f"data.mixture={json.dumps(mixture)}"])


@pytest.mark.parametrize(
    "settings, ok",
    [
        ({"last_k": 1}, True), ({"last_k": 0}, False),
        ({"failure_threshold": 0.0}, True), ({"failure_threshold": -0.1}, False),
        ({"success_threshold": 1.0}, True), ({"success_threshold": 1.1}, False),
        ({"failure_threshold": 0.5, "success_threshold": 0.5}, False),
        ({"failure_threshold": 0.6, "success_threshold": 0.5}, False),
        ({"skip_solved_after": -1}, False), ({"skip_unsolved_after": -1}, False),
        ({"min_level": 0, "max_level": 0}, True), ({"min_level": -1}, False),
        ({"min_level": 3, "max_level": 2}, False),
    ],
)  # fmt: skip
def test_curriculum_settings_are_checked_at_their_edges(settings, ok):
    overrides = [f"data.curriculum.{k}={v}" for k, v in settings.items()]
    if ok:
        load_config(None, overrides)
    else:
        with pytest.raises(ConfigError, match=r"^data.curriculum: "):
            load_config(None, overrides)


def test_a_reasoning_gym_name_as_data_task_names_the_mixture_that_generates_it():
    with pytest.raises(ConfigError, match=r"'leg_counting' is a reasoning-gym dataset: data.mixture=\[\{name: gym, "
                                          r"weight: 1, reasoning_gym: 'leg_counting:1'\}\]$"):  # fmt: skip
        load_config(None, ["data.task=leg_counting"])
    with pytest.raises(
        ConfigError, match=r"data.task='nope' is not a valid choice; valid: addsub, arithmetic, countdown$"
    ):
        load_config(None, ["data.task=nope"])
    with pytest.raises(ConfigError, match="data.mixture and data.train_files both set"):
        load_config(None, ['data.mixture=[{"name": "a", "task": "addsub"}]', "data.train_files=[x.parquet]"])


def test_a_list_item_of_the_wrong_type_names_its_key_in_a_recipe_and_an_override(tmp_path):
    """OmegaConf names no key for it (before: "invalid config key ''")."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("train:\n  steps: 3\ndata:\n  task: addsub\n  mixture:\n    - a\n")
    with pytest.raises(ConfigError, match=r"r.yaml: invalid config key 'data.mixture': Cannot assign str"):
        load_config(recipe)
    with pytest.raises(
        ConfigError, match=r"command-line override: invalid config key 'data.mixture': Cannot"
    ):
        load_config(None, ["train.steps=3", 'data.mixture=["a"]'])


def test_a_mapping_without_a_space_after_its_colon_says_so():
    """YAML reads `{format_think_answer:0.1}` as one key, "format_think_answer:0.1" (OmegaConf's error
    alone, "... is not Optional", does not say why)."""
    with pytest.raises(ConfigError, match=r"'reward.weights.format_think_answer:0.1': .* \(in \{key: value\} a "
                                          r"space must follow each colon\)$"):  # fmt: skip
        load_config(None, ["reward.weights={format_think_answer:0.1}"])
    cfg = load_config(None, ["reward.weights={correctness: 1.0, format_think_answer: 0.1}"])
    assert dict(cfg.reward.weights) == {"correctness": 1.0, "format_think_answer": 0.1}
    with pytest.raises(ConfigError) as e:  # no hint where no colon is to blame
        load_config(None, ["train.lrr=1"])
    assert "colon" not in str(e.value)


def test_keep_best_must_name_a_metric_the_validation_logs():
    """A typo would never save a best checkpoint: the name must be one validation logs."""
    assert (
        load_config(overrides=["checkpoint.keep_best=eval/accuracy"]).checkpoint.keep_best == "eval/accuracy"
    )
    load_config(overrides=["checkpoint.keep_best=eval/mean@4", "val.n=4"])
    load_config(overrides=["checkpoint.keep_best=eval/aime24/pass@16", "val.benchmarks=[aime24]"])  # n = 16
    load_config(overrides=["checkpoint.keep_best=eval/gsm8k/verifier_errors", "checkpoint.best_mode=min",
                           "val.benchmarks=[gsm8k]"])  # fmt: skip
    for overrides, bad in [
        (["checkpoint.keep_best=eval/acuracy"], "'eval/acuracy'"),
        (["checkpoint.keep_best=eval/mean@4"], "'eval/mean@4'"),  # val.n = 1: no mean@n
        (["checkpoint.keep_best=eval/aime24/pass@32", "val.benchmarks=[aime24]"], "'eval/aime24/pass@32'"),
        (["checkpoint.keep_best=reward/mean"], "'reward/mean'"),
    ]:
        with pytest.raises(
            ConfigError, match=f"checkpoint.keep_best={bad} is not a metric this run's validation"
        ):
            load_config(overrides=overrides)
    with pytest.raises(
        ConfigError,
        match=r"it logs: eval/accuracy, eval/verifier_errors, eval/aime24/mean@n, eval/aime24/ci95, .*pass@16",
    ):
        load_config(overrides=["checkpoint.keep_best=eval/aime24/pass@3", "val.benchmarks=[aime24]"])


def test_the_lowest_difficulty_and_a_mixture_of_distinct_names_load():
    cfg = load_config(
        None,
        [
            "data.difficulty=1",
            "data.mixture=[{name: a, task: addsub, difficulty: 3}, {name: b, task: countdown}]",
        ],
    )
    assert cfg.data.difficulty == 1 and [m["name"] for m in cfg.data.mixture] == ["a", "b"]
    assert cfg.data.mixture[0]["difficulty"] == 3  # a built-in task's own difficulty is allowed


def test_an_override_whose_value_yaml_cannot_read_is_named():
    """Before: a yaml ParserError traceback from OmegaConf."""
    with pytest.raises(
        ConfigError, match=r"command-line override 'rollout.interaction.message=: a': its value is not YAML"
    ):
        load_config(None, ["train.steps=3", "rollout.interaction.message=: a"])
    assert load_config(None, ["rollout.interaction.message=': a'"]).rollout.interaction.message == ": a"
