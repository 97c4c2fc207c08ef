"""The rollout section's schema (`rollout.*`): the engine and sampling, the tools, the feedback between
attempts, the OpenRLHF agent. Composed into `RunConfig` by `reasonrl.config.sections`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SearchToolConfig:
    """The search tool (rollout.tools.names: [search]): a retrieval service answering Search-R1's API
    (POST {"queries": [...], "topk": k, "return_scores": true}; verl's `retrieval_service_url`)."""

    url: str = ""  # e.g. http://127.0.0.1:8000/retrieve
    topk: int = 3  # passages per query
    timeout_s: float = 30.0  # of one request
    retries: int = 3  # more tries of a request the service refused (connection, 5xx, timeout)


@dataclass
class ToolsConfig:
    """Tool-integrated reasoning (rollout.tools; docs/rollouts.md): code the model writes runs in the
    sandbox (or a query it writes goes to a retrieval service) and the output joins the completion, with
    no loss on the output's tokens."""

    enabled: bool = False
    # rollout.tool_formats.TOOL_FORMATS: markdown (```python -> ```output), xml (<code>), hermes (Qwen's <tool_call>),
    # python_tag (Llama 3.1's <|python_tag|>code<|eom_id|>, answered in an ipython turn), search_r1
    # (<search>query</search> answered by <information>...</information>), qwen3_coder (Qwen3.5's XML calls in
    # <tool_call>, values read by the tool's schema), glm4_moe (GLM-4.5's <arg_key> / <arg_value> pairs, read by
    # the schema, answered in an <|observation|> turn), llama3_json (Llama 3.1-3.3's {"name", "parameters"} message,
    # answered in an ipython turn), mistral / mistral_v7 (Mistral's
    # [TOOL_CALLS] ... </s>, answered by [TOOL_RESULTS] as the tokenizer's version writes it), harmony (gpt-oss's
    # to=functions.NAME ... <|call|> and its built-in python, answered by the tool's own message), gemma4 (Gemma 4's
    # <|tool_call>call:NAME{...}<tool_call|>, answered by a <|tool_response> block per call), lfm2 (LFM2's
    # <|tool_call_start|>[f(a=1), g()]<|tool_call_end|>, a ChatML tool message per call), deepseek_v3 (DeepSeek-V3's
    # <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME + a ```json block, one outputs block), muse_glimmer (Muse
    # Glimmer's ATEM to=NAME<|message|><atem:function_calls>..., the tool's own message); auto: the one the
    # model's chat template asks for, read when the engine is built
    format: str = "markdown"
    # the tools calls may use: python (the sandboxed interpreter), search (`search`); hermes / qwen3_coder / glm4_moe /
    # llama3_json / mistral / harmony / gemma4 / lfm2 / deepseek_v3 / muse_glimmer calls name theirs
    names: list[str] = field(default_factory=lambda: ["python"])
    # Python functions as tools (TRL's `tools=[...]`): import paths or path.py:name, called by their names in
    # hermes calls; their schemas join data.chat_template_kwargs.tools (rollout.function_tools)
    functions: list[str] = field(default_factory=list)
    # TRL environments (environment_factory): a class path, or {name: path} picked by each row's `environment`
    # column; an instance per rollout, its methods the tools, its get_reward the `environment` reward term
    environment: Any = None
    # verl's tool config file (multi_turn.tool_config_path: tools: [{class_name, config, tool_schema}]): its
    # classes are tools called by name; their step rewards, summed, the `environment` term (rollout.verl_tools)
    verl_config: str | None = None
    # MCP servers (rollout.mcp_tools): a JSON / YAML file {"mcpServers": {name: {command, args, env}}}; their
    # tools are called by name, their schemas join the prompts' tool list; mcp_tools picks some (empty: all)
    mcp_servers: str | None = None
    mcp_tools: list[str] = field(default_factory=list)
    search: SearchToolConfig = field(default_factory=SearchToolConfig)
    max_calls: int = 4  # calls run per completion; a later call stays plain text
    # calls run from one message of the model (verl's multi_turn.max_parallel_calls; TRL runs them all): its
    # first ones, in turn, answered in one turn; the message is cut after the last that runs (Mistral's, which
    # cannot be cut, answered with an error when it holds more); 1: generation stops at each call's end
    parallel_calls: int = 1
    timeout_s: float = 5.0  # wall-clock limit of one call
    memory_mb: int = 512
    max_output_chars: int = 512  # of one call's output; the rest is cut with a marker
    workers: int = 4  # calls run at once
    # what follows a call: "format", the format's own turn (hermes: ChatML's tool turn); "chat_template", a
    # `tool` message as the tokenizer's chat template renders it (with data.chat_template_kwargs), then the
    # assistant's turn opening again: for templates other than ChatML
    turn: str = "format"


@dataclass
class InteractionConfig:
    """Feedback between attempts (rollout.interaction; verl's multi-turn interactions, "try again"
    feedback): a completion whose answer the verifiers find wrong gets a user turn saying so and another
    attempt, up to max_turns attempts; the feedback's tokens take no loss (docs/rollouts.md)."""

    enabled: bool = False
    max_turns: int = 2  # attempts per completion (the first and max_turns - 1 after feedback)
    # who answers an attempt: a name in rollout.interaction.FEEDBACK; "verifier": `message` after a wrong
    # answer (the routed verifier's correctness < 1), nothing after a right one; a plugin registers others
    feedback: str = "verifier"
    options: dict[str, Any] = field(default_factory=dict)  # the feedback's own settings (a plugin's)
    # the user's turn after a wrong answer (verl's Gsm8kInteraction's words)
    message: str = "Your response is incorrect! You need to reflect on your answer and try again."
    # the reward of a completion that took k attempts is its last answer's x decay ** (k - 1): a correct first
    # answer is worth the most, and cycling through guesses until one is right is not (1.0: verl's, undiscounted)
    decay: float = 0.5
    # how the message joins the completion: "chat_template", a user message as the tokenizer's chat template
    # renders it (the assistant's turn closed, the user's, the assistant's opened again; with
    # data.chat_template_kwargs); or any text holding {message} once, used as written
    turn: str = "chat_template"
    # verl's interaction config file (multi_turn.interaction_config_path: interaction: [{name, class_name,
    # config}]): its classes answer each attempt instead of `feedback` (rollout.verl_interactions); their turn
    # scores, summed, are the `environment` reward term
    verl_config: str | None = None
    workers: int = 2  # processes the classes live in (verl_config)
    timeout_s: float = 30.0  # of one of their calls


@dataclass
class AgentConfig:
    """An OpenRLHF agent (rollout.agent; OpenRLHF's --agent_func_path): a Python file whose AgentInstance
    starts each episode (`reset`) and answers each of the model's turns (`step`: feedback text, a reward,
    done); an instance per episode, in worker processes; the rewards' sum is the `environment` reward term
    (docs/rollouts.md, "OpenRLHF agents")."""

    path: str | None = None  # agent_func.py (its AgentExecutor's AgentInstance), or path.py:Class
    workers: int = 4  # processes holding the episodes' instances (an episode's steps all go to one)
    timeout_s: float = 30.0  # of one reset or step; past it the process is killed and its episodes end


@dataclass
class RolloutConfig:
    engine: str = "hf"  # a name in rollout.factory.ROLLOUT_ENGINES (hf, vllm)
    engine_kwargs: dict[str, Any] = field(
        default_factory=dict
    )  # that engine's settings, e.g. {max_batch: 256}
    n: int = 8  # samples per prompt (group size)
    temperature: float = 1.0  # the trainer's log-probs (ratio, KL, entropy) are at this temperature too
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0  # leave out tokens below min_p x the top token's probability (Qwen3's advice: 0)
    max_new_tokens: int = 64
    # 0: generate, then train (synchronous). k > 0: a rollout worker process with its own engine and
    # weights generates and scores up to k policy versions ahead while the trainer updates (needs
    # algo.tis_cap > 0: the loss corrects for the older sampling policy; see docs/rollouts.md)
    max_staleness: int = 0
    worker_threads: int = 1  # torch threads of the rollout worker (the trainer keeps the rest)
    worker_timeout_s: float = 900.0  # a worker that delivers no batch for this long is reported hung
    # a warning when rollout/logprob_gap_mean (|sampler log-prob - trainer's|) passes this: the engine
    # is not sampling the policy being trained (a sync that did not take, another model); 0 = off
    warn_logprob_gap: float = 0.25
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    interaction: InteractionConfig = field(default_factory=InteractionConfig)
