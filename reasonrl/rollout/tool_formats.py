"""How a tool call is written and answered (`TOOL_FORMATS`, a real seam: a plugin can register one): the
pattern that finds a complete call in the model's text, the tool its calls go to (the format's own, or the
one a call names), how a named call's body is read (Hermes JSON, Mistral's `rollout.mistral_calls`, Qwen's
XML `rollout.qwen_calls` with its values read by the tool's schema) and the turn that answers it. Also the
built-in tools' names (`TOOLS`) and the parameters of their calls.

Owns: `ToolFormat`, the registered formats, reading a Hermes call (`hermes_call`), a call's code and search
queries. Does not own: the multi-turn loop that finds, runs and answers calls (`rollout.tools`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from reasonrl.registry import Registry
from reasonrl.rollout import (
    atem,
    deepseek_calls,
    gemma_calls,
    glm_calls,
    harmony,
    mistral_calls,
    pythonic_calls,
    qwen_calls,
)
from reasonrl.rollout.call_arguments import json_arguments

TOOL_FORMATS: Registry = Registry("tool format")


def _plain(body: str) -> str:
    return body


@dataclass(frozen=True)
class ToolFormat:
    """call: a regex whose group 1 is a complete call's body, searched in the model's text; code: the
    program of a body (ValueError, whose text the model sees, when it names none); output: what follows
    a call, `{output}` standing for the program's output. The text around `{output}` is the format's own
    (its special tokens are tokens); the output's special tokens stay text. `special`: the call's markers
    are special tokens, so it is looked for in the text decoded with them (spelled out in plain characters
    they read the same)."""

    call: re.Pattern
    output: str
    code: Callable[[str], str] = _plain
    special: bool = False  # the call is written with special tokens: found in the text that keeps them
    ends_message: bool = False  # the call closes the assistant's message itself (Llama's <|eom_id|>)
    tool: str = "python"  # the tool its calls go to; "": the call names it (hermes)
    # a named call's (name, arguments); None: Hermes JSON
    parse: Callable[[str], tuple[str, dict]] | None = None
    # the turn answering a call, (markers before, output text, markers after), where it depends on the call
    # (Mistral's call ids); None: `output`
    results: Callable[[str, str], tuple[str, str, str]] | None = None
    # a named call's arguments read by the called tool's parameter schemas ({name: schema}, None unknown): a
    # format whose values are text (Qwen's XML); None: the arguments as the call gives them
    typed: Callable[[dict, dict | None], dict] | None = None
    # several calls of one message (`rollout.tools.parallel_calls`): what comes between two outputs of the turn
    # answering them (Hermes: one <tool_response> closed, the next opened); None: one call at a time, but where
    # `results` answers each call with a turn of its own
    between: str | None = None
    # the calls of a message that one match holds (Mistral's [TOOL_CALLS]... up to </s>): their bodies; None:
    # each match is a call
    split: Callable[[str], list[str]] | None = None
    # the tool turn the model's chat template renders after a plain assistant message is this format's (`turn:
    # chat_template`); False where the template closes the calls as part of the message holding them (DeepSeek's)
    template_turn: bool = True
    # a message's several calls can be answered at once (`parallel_calls`); False where each call is a message of
    # its own, answered only after the last (Muse Glimmer's)
    several: bool = True
    # (tokenizer, the prompts' template arguments) -> what the model's template writes after a message's answers
    # for the model to go on (Gemma 4's latest revision opens a thought there with thinking on): asked once, when
    # the engine is built, and written after the format's own turn; None: nothing
    reopen: Callable[[object, dict | None], str] | None = None

    def find(self, text: str) -> re.Match | None:
        return self.call.search(text)


def json_call(body: str, key: str = "arguments") -> tuple[str, dict]:
    """(name, arguments) of a call written as one JSON object, {"name": ..., KEY: {...}}: Hermes's ("arguments"),
    Llama's ("parameters", or "arguments" as some write it); the arguments may be a JSON string of their own, as
    some models write them. ValueError the model reads."""
    try:
        call = json.loads(body)
    except json.JSONDecodeError as e:
        raise ValueError(f"error: the tool call is not valid JSON ({e.msg})") from None
    if not isinstance(call, dict):
        raise ValueError("error: the tool call is not a JSON object")
    return str(call.get("name", "")), json_arguments(call.get(key, call.get("arguments", {})), key)


def hermes_call(body: str) -> tuple[str, dict]:
    """(name, arguments) of a Hermes tool call, {"name": ..., "arguments": {...}}."""
    return json_call(body)


def llama_call(body: str) -> tuple[str, dict]:
    """(name, arguments) of a Llama 3.1 / 3.2 JSON tool call, {"name": ..., "parameters": {...}}."""
    return json_call(body, "parameters")


def code_argument(args: dict) -> str:
    code = args.get("code")
    if not isinstance(code, str):
        raise ValueError('error: the tool call has no "code" argument (a string)')
    return code


def _hermes_code(body: str) -> str:
    """The `code` argument of a Hermes tool call."""
    return code_argument(hermes_call(body)[1])


MAX_QUERIES = 10  # of one search call


def search_queries(args: str | dict) -> list[str]:
    """The queries of a search call: the text of a <search> call, or a Hermes call's `query_list` (verl's
    search tool) or `query`."""
    if isinstance(args, str):
        queries = [args]
    elif isinstance(args.get("query_list"), list):
        queries = args["query_list"]
    else:
        queries = [args.get("query")]
    queries = [q.strip() for q in queries if isinstance(q, str) and q.strip()]
    if not queries:
        raise ValueError('error: the search call has no query (a "query_list" of strings, or a "query")')
    if len(queries) > MAX_QUERIES:
        raise ValueError(f"error: a search call takes at most {MAX_QUERIES} queries, got {len(queries)}")
    return queries


# ToRL / SimpleTIR / Qwen2.5-Math-TIR: a ```python block, answered with an ```output block
TOOL_FORMATS.register("markdown")(ToolFormat(re.compile(r"```python[ \t]*\n(.*?)```", re.S),
                                             "\n```output\n{output}\n```\n"))  # fmt: skip
# plain tags, for models trained to call a code tool that way
TOOL_FORMATS.register("xml")(ToolFormat(re.compile(r"<code>\n?(.*?)</code>", re.S),
                                        "\n<interpreter>\n{output}\n</interpreter>\n"))  # fmt: skip
# Hermes tool calls as Qwen2.5 / Qwen3 chat models write them (verl's multi-turn default): a JSON call
# whose arguments hold the code; the output comes back in a tool turn of the ChatML template, then the
# assistant's turn opens again
TOOL_FORMATS.register("hermes")(ToolFormat(
    re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S),
    "<|im_end|>\n<|im_start|>user\n<tool_response>\n{output}\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    _hermes_code,
    tool="",  # the call names its tool
    between="\n</tool_response>\n<tool_response>\n",  # (Qwen's template: a message's calls in one user turn)
))  # fmt: skip
# Llama 3.1 / 3.2's built-in code interpreter: <|python_tag|>code<|eom_id|> (end of message: a tool is
# to answer), the output in an ipython turn, then the assistant's turn again
TOOL_FORMATS.register("python_tag")(ToolFormat(
    re.compile(r"<\|python_tag\|>(.*?)<\|eom_id\|>", re.S),
    "<|start_header_id|>ipython<|end_header_id|>\n\n{output}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    special=True,
    ends_message=True,
))  # fmt: skip
# Llama 3.1 / 3.2 / 3.3's custom tool calls: the whole message a JSON object, {"name": ..., "parameters": {...}}
# (after <|python_tag|> where the model writes one), ended by <|eot_id|> (or <|eom_id|>), answered as python_tag
# is, in an ipython turn; one call per message, as the template has it
TOOL_FORMATS.register("llama3_json")(replace(
    TOOL_FORMATS.get("python_tag"), call=re.compile(r"\A\s*(?:<\|python_tag\|>)?\s*(\{.*\})\s*<\|e(?:ot|om)_id\|>", re.S),
    tool="", parse=llama_call,
))  # fmt: skip
# Search-R1: a query in <search> tags, the passages the retrieval service returns in <information> tags
TOOL_FORMATS.register("search_r1")(ToolFormat(re.compile(r"<search>(.*?)</search>", re.S),
                                               "\n\n<information>{output}</information>\n\n", tool="search"))  # fmt: skip
# Mistral's [TOOL_CALLS] ... </s>, answered by a [TOOL_RESULTS] turn as its tokenizer's version writes it
# (`rollout.mistral_calls`): `mistral` answers a JSON list of calls as v3 does, `mistral_v7` as v7 does
for _name, _results in (("mistral", mistral_calls.results), ("mistral_v7", mistral_calls.results_v7)):
    TOOL_FORMATS.register(_name)(ToolFormat(mistral_calls.CALL, "[TOOL_RESULTS]{output}[/TOOL_RESULTS]",
                                            special=True, ends_message=True, tool="", parse=mistral_calls.parse,
                                            results=_results, split=mistral_calls.split))  # fmt: skip

# gpt-oss's harmony calls, a message addressed to the tool and ended by <|call|>, answered by the tool's message on
# the call's channel (`rollout.harmony`); functions.NAME with JSON arguments, and the built-in python
TOOL_FORMATS.register("harmony")(ToolFormat(harmony.CALL, "{output}", special=True, ends_message=True, tool="",
                                            parse=harmony.parse, results=harmony.results))  # fmt: skip

# Qwen3-Coder's and Qwen3.5's XML calls in the Hermes markers (`rollout.qwen_calls`), answered as Hermes ones
TOOL_FORMATS.register("qwen3_coder")(replace(TOOL_FORMATS.get("hermes"), parse=qwen_calls.parse,
                                             typed=qwen_calls.typed))  # fmt: skip

# GLM-4.5 / 4.6 / 4.7's <tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value></tool_call> (`rollout.glm_calls`),
# values read by the schema, answered in an observation turn (a <tool_response> per call), then <|assistant|>
TOOL_FORMATS.register("glm4_moe")(replace(
    TOOL_FORMATS.get("hermes"), output="<|observation|>\n<tool_response>\n{output}\n</tool_response><|assistant|>",
    parse=glm_calls.parse, typed=qwen_calls.typed,
    special=True,  # (looked for in the text decoded with the special tokens: GLM may hold its markers as such)
))  # fmt: skip

# Gemma 4's <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|> (`rollout.gemma_calls`), typed as written, each
# answered by a <|tool_response>response:NAME{value:...}<tool_response|> block in the same model turn
TOOL_FORMATS.register("gemma4")(ToolFormat(gemma_calls.CALL, "{output}", special=True, tool="",
                                           parse=gemma_calls.parse, results=gemma_calls.results,
                                           reopen=gemma_calls.reopening))  # fmt: skip

# LiquidAI's LFM2 / LFM2.5: a Python list of calls, <|tool_call_start|>[f(a='x', n=1), g()]<|tool_call_end|>
# (`rollout.pythonic_calls`), answered in a ChatML tool message per call, as LFM2.5's template writes them (LFM2's
# wraps each output in <|tool_response_start|> / <|tool_response_end|>: `turn: chat_template` takes that)
TOOL_FORMATS.register("lfm2")(ToolFormat(
    re.compile(r"<\|tool_call_start\|>(.*?)<\|tool_call_end\|>", re.S),
    "<|im_end|>\n<|im_start|>tool\n{output}<|im_end|>\n<|im_start|>assistant\n",
    special=True, tool="", parse=pythonic_calls.parse, between="<|im_end|>\n<|im_start|>tool\n",
    split=pythonic_calls.split,
))  # fmt: skip

# DeepSeek-V3's <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜> (`rollout.deepseek_calls`),
# the outputs in one <｜tool▁outputs▁begin｜> block after the calls' block and the end of the message
TOOL_FORMATS.register("deepseek_v3")(ToolFormat(
    deepseek_calls.CALL, deepseek_calls.BEFORE + "{output}" + deepseek_calls.AFTER, special=True, tool="",
    parse=deepseek_calls.parse, between=deepseek_calls.BETWEEN, template_turn=False,
))  # fmt: skip

# Muse Glimmer's ATEM messages: `to=NAME<|message|><atem:function_calls>...` (`rollout.atem`), values read by the
# schema, answered by the tool's own message, one call at a time
TOOL_FORMATS.register("muse_glimmer")(ToolFormat(atem.CALL, "{output}", special=True, tool="", parse=atem.parse,
                                                 results=atem.results, typed=qwen_calls.typed, several=False))  # fmt: skip

TOOLS = ("python", "search")  # what rollout.tools.names may hold
AUTO = "auto"  # rollout.tools.format: the one the model's chat template asks for (`resolve_format`)
TOOL_ALIASES = {"code_interpreter": "python"}  # verl's (SandboxFusionTool's) name for the Python tool
# the parameters of the built-in tools' calls, as a schema gives them (a format reading values by schema)
BUILT_IN_PARAMETERS = {
    "python": {"code": {"type": "string"}},
    "search": {"query": {"type": "string"}, "query_list": {"type": "array", "items": {"type": "string"}}},
}


# what a chat template's tool instructions show of the calls it asks the model for, the most specific first
_TEMPLATE_MARKS = (("<|call|>", "harmony"), ("<atem:function_calls>", "muse_glimmer"), ("<|tool_call>call:", "gemma4"),
                   ("<function=", "qwen3_coder"), ("<arg_key>", "glm4_moe"), ("[TOOL_CALLS]", "mistral"),
                   ("<|tool_call_start|>", "lfm2"), ("<|tool_list_start|>", "lfm2"),
                   ("<｜tool▁calls▁begin｜>", "deepseek_v3"), ("<tool_call>", "hermes"),
                   ('"parameters": ', "llama3_json"))  # fmt: skip


def template_format(tokenizer) -> str | None:
    """The format of named calls the tokenizer's chat template asks for (harmony, muse_glimmer, gemma4, qwen3_coder,
    glm4_moe, mistral or mistral_v7, lfm2, deepseek_v3, hermes or llama3_json), or None where it shows none. A
    Mistral template that answers with `[TOOL_CONTENT]` is v7's (or v11's, whose calls say their own turn)."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # (named templates: tool_use among them)
        template = " ".join(str(t) for t in template.values())
    if not isinstance(template, str):
        return None
    found = next((name for mark, name in _TEMPLATE_MARKS if mark in template), None)
    return "mistral_v7" if found == "mistral" and "[TOOL_CONTENT]" in template else found


def check_template_format(tokenizer, name: str) -> None:
    """ConfigError where `rollout.tools.format` (`name`, a format whose calls name their tool) is not the one
    the model's chat template teaches it: Qwen3.5's XML calls read as Hermes JSON would all be errors."""
    from reasonrl.config import ConfigError

    wanted = template_format(tokenizer)

    def family(fmt: str | None) -> str | None:  # (mistral and mistral_v7 write the same calls)
        return "mistral" if fmt is not None and fmt.startswith("mistral") else fmt

    if TOOL_FORMATS.get(name).tool == "" and wanted is not None and family(wanted) != family(name):
        raise ConfigError(f"rollout.tools.format={name}: the model's chat template asks for {wanted}'s tool calls "
                          f"(it shows them); set rollout.tools.format={wanted}")  # fmt: skip


def answers_several(fmt: ToolFormat, turn: str) -> bool:
    """Whether the format's (or, `turn: chat_template`, the template's) turn can answer several calls at once."""
    if not fmt.several:
        return False
    return not fmt.tool and (fmt.between is not None or fmt.results is not None or turn == "chat_template")


def resolve_format(tokenizer, name: str) -> str:
    """`rollout.tools.format` itself, or, where it is `auto`, the format of calls the model's chat template asks
    for (`template_format`: TRL reads a model's tool calls by its template too); ConfigError where it shows none."""
    from reasonrl.config import ConfigError

    if name != AUTO:
        return name
    found = template_format(tokenizer)
    if found is None:
        marks = ", ".join(f"{m} ({n})" for m, n in _TEMPLATE_MARKS)
        raise ConfigError(f"rollout.tools.format=auto: the model's chat template shows no tool calls reasonrl reads "
                          f"({marks}); name the format")  # fmt: skip
    return found


def check_named_calls(key: str, fmt: str) -> None:
    """ConfigError where `rollout.tools.<key>` (tools called by name) is set with a format whose calls go to
    its one tool."""
    from reasonrl.config import ConfigError

    if fmt != AUTO and TOOL_FORMATS.get(fmt).tool:
        named = [n for n in TOOL_FORMATS.names() if not TOOL_FORMATS.get(n).tool]
        raise ConfigError(f"rollout.tools.{key} needs calls that name their tool: format {', '.join(named)}, "
                          f"not {fmt}")  # fmt: skip
