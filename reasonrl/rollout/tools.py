"""Tool-integrated reasoning: the model writes code, the code runs in the sandbox (or a query, which a
retrieval service answers), its output goes back into the completion and generation goes on (ToRL,
SimpleTIR, ZeroTIR, Search-R1; verl's multi-turn code and search tools, TRL's `tools`).

Owns: `ToolRolloutEngine`, which wraps any `RolloutEngine` and runs the multi-turn loop for every sample
(generate -> first complete tool call (or, with `rollout.tools.parallel_calls` > 1, the message's first
calls) -> cut there -> run them in turn -> append the turn answering them -> generate the rest), which tool a
call goes to (the format's own, or the one a call names among `rollout.tools.names`, the functions, the MCP
tools and the rollout's environment), the program a call runs as (`cell_program`: earlier cells replayed,
their output hidden). Does not own: how a call is written and answered (`rollout.tool_formats`,
`TOOL_FORMATS`), the answering turn's text and tokens (`rollout.tool_turns`), the checks of the recipe's `rollout.tools`
(`rollout.tool_checks`), running code (`rewards.sandbox`, the only place model code runs), the retrieval service's API (`rollout.search_tool`),
the user's Python functions called as tools (`rollout.function_tools`), MCP servers' tools
(`rollout.mcp_tools`), TRL's environments and verl's tool classes (`rollout.environments`, `rollout.
verl_tools`: this loop sends a call naming a method to its rollout's instance, and starts their episodes,
`generate_groups`), the engines, or the loss mask built from `Completion.tool_mask` (`trainer.batching`).

What the trainer gets: one `Completion` per sample whose `token_ids` hold the model's tokens and the tool
outputs' tokens in order; `tool_mask` marks the output tokens (no loss, no KL, no entropy on them; their
`sampler_logprobs` are 0); `model_text` is the completion without the tool outputs (its segments joined
by newlines), which is what the verifiers score, so a program that prints an answer does not answer for
the model. The whole completion, outputs included, counts against `rollout.max_new_tokens` (verl's
response length).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from reasonrl.rollout.base import SamplingParams, completion_text, within_budget
from reasonrl.rollout.tool_formats import (
    AUTO,
    BUILT_IN_PARAMETERS,
    TOOL_ALIASES,
    TOOL_FORMATS,
    check_template_format,
    code_argument,
    hermes_call,
    resolve_format,
    search_queries,
)
from reasonrl.rollout.tool_turns import answer_tokens, template_turn, turn_tokens, warn_unlike_template
from reasonrl.types import Completion

_CELL_RUNNER = """import contextlib as _cl, io as _io
_g = {"__name__": "__main__"}
for _i, _c in enumerate(_CELLS):
    if _i < len(_CELLS) - 1:
        with _cl.redirect_stdout(_io.StringIO()), _cl.redirect_stderr(_io.StringIO()):
            exec(compile(_c, "<cell %d>" % (_i + 1), "exec"), _g)
    else:
        exec(compile(_c, "<cell %d>" % (_i + 1), "exec"), _g)
"""


def cell_program(cells: list[str]) -> str:
    """One program running `cells` in one namespace; only the last cell's output shows (earlier cells are
    replayed so their variables and functions exist: a notebook's state without a long-lived process)."""
    return f"_CELLS = {cells!r}\n{_CELL_RUNNER}"


def _cut(text: str, max_chars: int, force: bool = False) -> str:
    """`text` cut to `max_chars`, with a marker where it was (or where `force` says it was cut already)."""
    return text[:max_chars] + "...[truncated]" if len(text) > max_chars or force else text


def render_output(reply: dict, max_chars: int) -> tuple[str, str]:
    """(the text the model sees, the call's status: "success", "error", "timeout", "output_limit",
    "sandbox_error") for a sandbox reply (`rewards.sandbox.server.run_job`'s: status, stdout, stderr,
    exit_code): its stdout, then the exception's line of a traceback, cut to `max_chars`."""
    status = reply["status"]
    if status == "timeout":
        return "timed out", "timeout"
    text = reply.get("stdout") or ""
    if status not in (
        "success",
        "output_limit",
    ):  # the traceback's last line (the exception), or the exit status
        lines = [ln for ln in (reply.get("stderr") or "").strip().splitlines() if ln.strip()]
        text += lines[-1] if lines else f"exit status {reply.get('exit_code')}"
    text = text.rstrip("\n")
    # (a program killed for printing too much is cut as well)
    text = _cut(text, max_chars, force=status == "output_limit")
    return text, "error" if status == "failed" else status


@dataclass
class _Sample:
    prompt: list[int]
    tokens: list[int]
    logprobs: list[float]
    tool_mask: list[bool]
    segments: list[str]  # the model's own text, segment by segment
    cells: list[str]  # the code of the calls that ran without error (replayed before the next)
    calls: list[str]  # each call's status
    finish: str = "stop"
    episode: tuple[int, str] | None = None  # (key, environment) of its instance (rollout.tools.environment)


class ToolRolloutEngine:
    """`engine` with a code tool: each sample generates until its first complete call, the call runs in
    the sandbox and its output is appended, and generation resumes, until the sample stops, reaches
    `max_calls` (later calls stay plain text) or the token budget."""

    runs_tools = True  # read by the rollout metrics (`trainer.rollouts.tool_metrics`)

    def __init__(self, engine, tokenizer, tools, template_kwargs: dict | None = None) -> None:
        if tools.format == AUTO:  # the format the model's chat template asks for
            from reasonrl.rollout.tool_checks import check_format

            tools = replace(tools, format=resolve_format(tokenizer, tools.format))
            check_format(tools)
        self.engine, self.tokenizer, self.cfg = engine, tokenizer, tools
        self.format = TOOL_FORMATS.get(tools.format)
        check_template_format(tokenizer, tools.format)  # (calls the template does not teach would all fail)
        self.functions = None  # rollout.tools.functions: Python functions called by name
        if tools.functions:
            from reasonrl.rollout.function_tools import FunctionTools

            self.functions = FunctionTools(list(tools.functions), tools.workers, tools.timeout_s)
        self.environments = None  # rollout.tools.environment: TRL's environments, an instance per rollout
        if tools.environment is not None:
            from reasonrl.rollout.environments import Environments

            self.environments = Environments(tools.environment, tools.workers, tools.timeout_s)
        elif tools.verl_config is not None:  # verl's tool classes: run as an environment every row uses
            from reasonrl.rollout.verl_tools import VerlTools

            self.environments = VerlTools(tools.verl_config, tools.workers, tools.timeout_s)
        self._schemas = None  # the functions' and MCP tools' schemas, where a format reads values by them
        self.mcp = None  # rollout.tools.mcp_servers: MCP servers' tools, called by name
        if tools.mcp_servers is not None:
            from reasonrl.rollout.mcp_tools import McpTools

            self.mcp = McpTools(tools.mcp_servers, list(tools.mcp_tools), tools.workers, tools.timeout_s)
        self._template_kwargs, self._turns = template_kwargs, {}  # (the turn answering k calls: its pieces)
        # what the template writes after the answers for the model to go on, where the format asks it (Gemma 4's)
        self._reopen = (
            self.format.reopen(tokenizer, template_kwargs) if self.format.reopen is not None else ""
        )
        if tools.turn == "chat_template":  # the output in a tool turn of the model's own chat template
            turn = template_turn(tokenizer, template_kwargs, self.format.ends_message)
            self.format = replace(self.format, output=turn)
        elif (
            not self.format.tool and self.format.results is None and self.format.template_turn
        ):  # the template's?
            warn_unlike_template(
                tokenizer, template_kwargs, tools.format, self.format.output, self.format.ends_message
            )

    def __getattr__(self, name):  # anything else an engine offers (stats, wake, sleep, ...)
        return getattr(self.engine, name)

    @property
    def episodic(self) -> bool:  # its rollouts start from their rows (`rollout.scored.generate_groups`)
        return self.environments is not None

    def sync_weights(self, model, version: int | None = None) -> None:
        self.engine.sync_weights(model, version)

    def close(self) -> None:
        for own in (self.functions, self.environments, self.mcp):
            if own is not None:
                own.close()
        if self.engine is not None:
            self.engine.close()

    def generate_groups(self, problems: list, params: SamplingParams, max_prompt_tokens: int | None = None,
                        scoring=None):  # fmt: skip
        """RolloutGroups of `problems`, each rollout an episode of its environment (`rollout.environments`)."""
        from reasonrl.rollout.environments import generate_episodes

        return generate_episodes(self, problems, params, max_prompt_tokens, scoring)

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 episodes: list[tuple[int, str]] | None = None) -> list[list[Completion]]:  # fmt: skip
        """`episodes`: each sample's (key, environment), with rollout.tools.environment (`generate_groups`)."""
        if self.environments is not None and episodes is None:
            raise ValueError("rollout.tools.environment: rollouts start from their rows (generate_groups)")
        first = self.engine.generate(prompts, params)
        samples = [_Sample(p, [], [], [], [], [], []) for p in prompts for _ in range(params.n)]
        for s, episode in zip(samples, episodes or ()):
            s.episode = episode
        pending = [(s, c) for s, c in zip(samples, (c for cs in first for c in cs))]
        round_ = 0
        while pending:
            calls = [self._take(s, c, params.max_new_tokens) for s, c in pending]
            todo = [(s, bodies) for (s, _), bodies in zip(pending, calls) if bodies]
            if not todo:
                break
            resumed = [s for s, answers in self._in_turn(todo)
                       if self._append_outputs(s, answers, params.max_new_tokens)]  # fmt: skip
            if not resumed:
                break
            round_ += 1
            seed = None if params.seed is None else params.seed + 7919 * round_
            budget = [params.max_new_tokens - len(s.tokens) for s in resumed]
            # one call at the largest budget, each continuation cut at its own (rollout.base.within_budget)
            step = replace(params, n=1, max_new_tokens=max(budget), seed=seed)
            outs = self.engine.generate([s.prompt + s.tokens for s in resumed], step)
            pending = [
                (s, within_budget(cs[0], b, self.tokenizer)) for s, cs, b in zip(resumed, outs, budget)
            ]
        return [[self._completion(s) for s in samples[i * params.n : (i + 1) * params.n]]
                for i in range(len(prompts))]  # fmt: skip

    def _take(self, s: _Sample, c: Completion, budget: int) -> list[str]:
        """Add the segment `c` to `s`, cut after the calls that run when any may (its first complete ones, at
        most `rollout.tools.parallel_calls` and the calls the completion has left): their bodies; else whole
        ([])."""
        toks, logps, text = list(c.token_ids), list(c.sampler_logprobs), c.text
        seen = self.tokenizer.decode(toks, skip_special_tokens=False) if self.format.special else text
        room = min(self.cfg.parallel_calls, self.cfg.max_calls - len(s.calls))
        found = [m.group(1) for m in self.format.call.finditer(seen)][:room] if room > 0 else []
        if found:
            cut = self._cut(toks, len(found))
            toks, logps = toks[:cut], logps[:cut]
            text = completion_text(self.tokenizer, toks)
            if len(s.tokens) + cut >= budget:  # the calls end the budget: no room for their output
                found = []
        s.tokens += toks
        s.logprobs += logps
        s.tool_mask += [False] * len(toks)
        s.segments.append(text)
        s.finish = "stop" if found else c.finish_reason
        if found and self.format.split is not None and self.cfg.parallel_calls > 1:
            # (one match, the message's calls: Mistral's; more than may run: answered as one, with an error)
            calls = self.format.split(found[0])
            found = calls if len(calls) <= room else found
        return found

    def _cut(self, toks: list[int], count: int = 1) -> int:
        """The fewest leading tokens whose text holds `count` complete calls (binary search over prefixes)."""
        lo, hi = 1, len(toks)
        while lo < hi:
            mid = (lo + hi) // 2
            seen = self.tokenizer.decode(toks[:mid], skip_special_tokens=not self.format.special)
            if sum(1 for _ in self.format.call.finditer(seen)) >= count:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _in_turn(self, todo: list[tuple[_Sample, list[str]]]) -> list[tuple[_Sample, list[tuple[str, str]]]]:
        """Run each sample's calls (bodies) in turn, its k-th after its (k-1)-th (a program sees the cells run
        before it), the samples' side by side: each sample with its (body, output) pairs."""
        answers: list[list[tuple[str, str]]] = [[] for _ in todo]
        for k in range(max(len(bodies) for _, bodies in todo)):
            wave = [(i, s, bodies[k]) for i, (s, bodies) in enumerate(todo) if len(bodies) > k]
            for (i, s, body), (code, text, status) in zip(wave, self._calls([(s, b) for _, s, b in wave])):
                s.calls.append(status)
                if status == "success" and code is not None:  # a program that ran: replayed before the next
                    s.cells.append(code)
                answers[i].append((body, text))
        return [(s, a) for (s, _), a in zip(todo, answers)]

    def _pieces(self, count: int) -> list[str]:
        """The turn answering `count` calls, split around their outputs (count + 1 pieces)."""
        if count not in self._turns:
            if count > 1 and self.cfg.turn == "chat_template":  # the template's count tool messages in a row
                turn = template_turn(
                    self.tokenizer, self._template_kwargs, self.format.ends_message, count=count
                )
                self._turns[count] = turn.split("{output}")
            else:
                before, after = self.format.output.split("{output}")
                self._turns[count] = [before, *[self.format.between] * (count - 1), after]
        return self._turns[count]

    def _append_outputs(self, s: _Sample, answers: list[tuple[str, str]], budget: int) -> bool:
        """Append the turn (masked) answering the calls of one message, (body, output) each; False when the
        budget ends inside it."""
        if self.format.results is not None:  # a turn per call, depending on it (Mistral's call ids)
            ids = [
                t
                for body, out in answers
                for t in turn_tokens(self.tokenizer, *self.format.results(body, out))
            ] + answer_tokens(self.tokenizer, [self._reopen], [])
        else:
            ids = answer_tokens(self.tokenizer, self._pieces(len(answers)), [out for _, out in answers])
        room = budget - len(s.tokens)
        ids = ids[:room]
        s.tokens += ids
        s.logprobs += [0.0] * len(ids)
        s.tool_mask += [True] * len(ids)
        if len(s.tokens) >= budget:
            s.finish = "length"
            return False
        return True

    def _calls(self, todo: list[tuple[_Sample, str]]) -> list[tuple[str | None, str, str]]:
        """(code, output, status) of each (sample, call body): the programs run side by side in the sandbox,
        the searches go in one request; a body that names no program or query gets the error as its output
        (status "invalid"); code is None but for programs."""
        from reasonrl.rollout.search_tool import search

        jobs = [self._job(s, body) for s, body in todo]
        out: list[tuple[str | None, str, str]] = [(None, str(arg), "invalid") for _, arg in jobs]
        python = [i for i, (tool, _) in enumerate(jobs) if tool == "python"]
        for i, result in zip(python, self._run([cells_with(todo[i][0], jobs[i][1]) for i in python])):
            out[i] = (jobs[i][1], *result)
        called = [i for i, (tool, _) in enumerate(jobs) if tool == "function"]
        if called:  # rollout.tools.functions, in their worker pool
            for i, (text, status) in zip(called, self.functions.run([jobs[i][1] for i in called])):
                out[i] = (None, _cut(text, self.cfg.max_output_chars), status)
        served = [i for i, (tool, _) in enumerate(jobs) if tool == "mcp"]
        if served:  # rollout.tools.mcp_servers: each call in a worker process's session with its server
            for i, (text, status) in zip(served, self.mcp.run([jobs[i][1] for i in served])):
                out[i] = (None, _cut(text, self.cfg.max_output_chars), status)
        acted = [i for i, (tool, _) in enumerate(jobs) if tool == "environment"]
        replies = self.environments.ask([("call", *jobs[i][1]) for i in acted]) if acted else []
        # rollout.tools.environment: each call in its rollout's instance
        for i, (status, text) in zip(acted, replies):
            shown = text if status == "ok" else self.environments.shown_error(text)  # (TRL's, verl's words)
            out[i] = (None, _cut(shown, self.cfg.max_output_chars), "success" if status == "ok" else status)
        found = [i for i, (tool, _) in enumerate(jobs) if tool == "search"]
        style = "search_r1" if self.format.tool == "search" else "verl"  # Search-R1's text, or verl's JSON
        for i, (text, status) in zip(found, search(self.cfg.search, [jobs[i][1] for i in found], style)):
            text = _cut(text, self.cfg.max_output_chars)
            out[i] = (
                None,
                text if style == "search_r1" else json.dumps({"result": text}, ensure_ascii=False),
                status,
            )
        return out

    def _job(self, s: _Sample, body: str) -> tuple[str, object]:
        """(tool, its argument) of a call: ("python", code), ("search", queries), ("function", (name,
        arguments)), ("environment", (key, method, arguments)) or ("invalid", error)."""
        names = list(self.cfg.names)
        own = self.environments.described[s.episode[1]]["tools"] if s.episode is not None else []
        try:
            if self.format.tool:  # the format's one tool
                tool, args = self.format.tool, body
            else:  # the call names its tool; with python alone, any name is python (a model's own name for it)
                self._check_count(s, body)
                name, args = (self.format.parse or hermes_call)(body)
                if self.format.typed is not None:  # values written as text (Qwen's XML): read by the schema
                    args = self.format.typed(args, self._parameters(name, s))
                if self.functions is not None and name in self.functions.specs:
                    return "function", (name, args)
                if self.mcp is not None and name in self.mcp.described:
                    return "mcp", (name, args)
                if name in own:
                    return "environment", (s.episode[0], name, args)
                name = TOOL_ALIASES.get(name, name)
                alone = names == ["python"] and self.functions is None and self.mcp is None and not own
                tool = name if name in names else "python" if alone else ""
                if not tool:
                    every = names + (self.functions.names if self.functions is not None else []) + own
                    every += self.mcp.names if self.mcp is not None else []
                    raise ValueError(f"error: there is no tool named {name!r} (tools: {', '.join(every)})")
            if tool == "python":
                return tool, self.format.code(args) if self.format.tool else code_argument(args)
            return tool, search_queries(args)
        except ValueError as e:
            return "invalid", str(e)

    def _check_count(self, s: _Sample, body: str) -> None:
        """ValueError the model reads where `body` is a message's calls, more than may run (`_take`)."""
        if self.format.split is None or self.cfg.parallel_calls == 1:
            return
        held = len(self.format.split(body))
        if held > 1:
            room = min(self.cfg.parallel_calls, self.cfg.max_calls - len(s.calls))
            raise ValueError(
                f"error: the message holds {held} tool calls; at most {room} can run now (none ran)"
            )

    def _parameters(self, name: str, s: _Sample) -> dict | None:
        """{parameter: schema} of the tool a call names (a function's, an MCP tool's, the rollout's
        environment's, a built-in one's), or None."""
        if self._schemas is None:  # (listed once: the functions' and the MCP tools')
            from reasonrl.rollout.function_tools import with_function_schemas

            self._schemas = with_function_schemas({}, self.cfg).get("tools", [])
        own = self.environments.described[s.episode[1]]["schemas"] if s.episode is not None else []
        for schema in [*self._schemas, *own]:
            function = schema.get("function") or {}
            if function.get("name") == name:
                return (function.get("parameters") or {}).get("properties")
        return BUILT_IN_PARAMETERS.get(TOOL_ALIASES.get(name, name))

    def _run(self, programs: list[str]) -> list[tuple[str, str]]:
        from reasonrl.rewards.sandbox.server import run_job

        if not programs:
            return []

        def one(program: str) -> tuple[str, str]:
            # a forked child of a long-lived sandboxed driver (the code verifier's pool): 10-17x the
            # programs per second of a fresh sandbox each (bench/tool_calls.py)
            job = {"kind": "stdio", "program": program, "stdin": "", "timeout_s": self.cfg.timeout_s,
                   "memory_mb": self.cfg.memory_mb, "max_output_bytes": max(4 * self.cfg.max_output_chars, 4096)}  # fmt: skip
            return render_output(run_job(job), self.cfg.max_output_chars)

        with ThreadPoolExecutor(max(1, min(self.cfg.workers, len(programs)))) as pool:
            return list(pool.map(one, programs))

    def _completion(self, s: _Sample) -> Completion:
        text = completion_text(self.tokenizer, s.tokens)
        return Completion(s.tokens, text, s.logprobs, s.finish, tool_mask=s.tool_mask if s.calls else None,
                          model_text="\n".join(s.segments), tool_calls=tuple(s.calls))  # fmt: skip


def cells_with(s: _Sample, code: str) -> str:
    return cell_program([*s.cells, code])
