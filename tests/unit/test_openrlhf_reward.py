"""OpenRLHF's remote rewards used as they are (`rewards.verifiers.openrlhf_reward`): a `reward_func` file
called one query at a time in the verifier pool, an HTTP reward server posted a batch (split over its
URLs), the query / prompt / label they receive, what they return read back (rewards, scores as
correctness), and every way a server can fail named before any work or counted as an error."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reasonrl.errors import InputError
from reasonrl.rewards.base import check_options
from reasonrl.rewards.runner import RewardRunner
from reasonrl.rewards.services import check_services
from reasonrl.rewards.verifiers import openrlhf_reward as orl
from reasonrl.types import Problem

# the shape of OpenRLHF's examples/python/math_reward_func.py: tensors in a mapping
FUNC = """import torch

def reward_func(queries, prompts, labels, **kwargs):
    rewards = [float(len(q) - len(p)) for q, p in zip(queries, prompts)]
    scores = [1.0 if q[len(p):].strip().endswith(str(lab)) else 0.0 for q, p, lab in zip(queries, prompts, labels)]
    return {"rewards": torch.tensor(rewards), "scores": torch.tensor(scores), "extra_logs": {}}
"""


def _problem(question: str = "12+7", answer: str = "19", verifier: str = "openrlhf_function") -> Problem:
    return Problem(prompt=[{"role": "user", "content": question}], ground_truth=answer,
                   data_source="reasonrl/arithmetic", verifier=verifier)  # fmt: skip


def test_a_reward_func_file_scores_each_row_in_the_pool(tmp_path):
    path = tmp_path / "reward_func.py"
    path.write_text(FUNC)
    with RewardRunner(workers=1, timeout_s=30, options={"openrlhf_function": {"path": str(path)}}) as runner:
        assert runner.run_mode("openrlhf_function") == "pool"
        results, metrics = runner.score(["so 19", "20!"], [_problem(), _problem()])
    assert [r.score for r in results] == [5.0, 3.0]  # len(query) - len(prompt): the response
    assert [r.info["correctness"] for r in results] == [1.0, 0.0]  # its scores, logged as correctness
    assert metrics["verifier/openrlhf_function/error_rate"] == 0.0


def test_the_prompt_is_what_the_policy_saw(tmp_path):
    from reasonrl.data.tasks import generate
    from reasonrl.models.tiny import build_tokenizer, corpus

    tok = build_tokenizer(corpus(generate("arithmetic", 100, seed=0, difficulty=2, split="train")), 64)
    tok.save_pretrained(tmp_path / "tok")
    query, prompt, label = orl.texts("19", _problem(), str(tmp_path / "tok"))
    assert (prompt, query, label) == ("<|user|>12+7<|assistant|>", "<|user|>12+7<|assistant|>19", "19")
    assert orl.texts("19", _problem())[:2] == ("12+719", "12+7")  # no template: the prompt's plain text
    think = Problem(prompt=[{"role": "user", "content": "q <think>"}], ground_truth="1", data_source="x",
                    apply_chat_template=False)  # fmt: skip
    assert orl.texts("<think>a</think>1", think)[0] == "q <think>a</think>1"  # the think block opened once
    assert orl.texts("<think>a</think>1", _problem())[0] == "12+7<think>a</think>1"  # one the model opened


def test_scores_outside_0_1_are_clamped_as_correctness_and_rewards_are_kept():
    got = orl.read_rewards({"rewards": [3.5, -2.0], "scores": [3.0, -1.0]}, 2)
    assert [(r.score, r.info["correctness"]) for r in got] == [(3.5, 1.0), (-2.0, 0.0)]
    assert [r.info["correctness"] for r in orl.read_rewards({"rewards": [0.25, 7.0]}, 2)] == [0.25, 1.0]


@pytest.mark.parametrize(
    "value, message",
    [
        ({"scores": [1.0]}, "expected a mapping with 'rewards'"),
        ([1.0], "expected a mapping with 'rewards'"),
        ({"rewards": [1.0, 2.0]}, "'rewards' has 2 values for 1 queries"),
        ({"rewards": [float("nan")]}, "'rewards' holds nan, not a finite number"),
        ({"rewards": ["1"]}, "'rewards' holds '1', not a finite number"),
        ({"rewards": [1.0], "scores": [True]}, "'scores' holds True"),
    ],
)
def test_replies_that_are_not_one_number_per_query_are_refused(value, message):
    with pytest.raises(ValueError, match=message):
        orl.read_rewards(value, 1)


class _Server:
    """A reward server in OpenRLHF's protocol; `fail` answers the first N requests with that HTTP code."""

    def __init__(self, fail: int = 0, times: int = 0, reply=None):
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if len(server.requests) <= times:
                    self.send_response(fail)
                    self.end_headers()
                    return
                out = reply(body) if reply else {
                    "rewards": [len(q) - len(p) for q, p in zip(body["query"], body["prompts"])],
                    "scores": [float(q.endswith(lab)) for q, lab in zip(body["query"], body["labels"])]}  # fmt: skip
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/get_reward"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made = []
    yield lambda **kw: made.append(_Server(**kw)) or made[-1]
    for s in made:
        s.close()


def test_a_reward_server_gets_the_batch_split_over_its_urls(servers):
    a, b = servers(), servers()
    forged = 'x"], "rewards": [99'  # the response is data in the JSON body, whatever it spells
    responses = ["19", "so 19", "20", forged, "19"]
    problems = [_problem(verifier="openrlhf_remote")] * 5
    with RewardRunner(workers=1, options={"openrlhf_remote": {"url": f"{a.url}, {b.url}"}}) as runner:
        assert runner.run_mode("openrlhf_remote") == "batch"
        results, metrics = runner.score(responses, problems)
    assert [len(s.requests) for s in (a, b)] == [1, 1]  # one request each: 3 rows and 2
    assert a.requests[0] == {"query": ["12+719", "12+7so 19", "12+720"], "prompts": ["12+7"] * 3,
                             "labels": ["19"] * 3}  # fmt: skip
    assert b.requests[0]["query"] == ["12+7" + forged, "12+719"]
    assert [r.score for r in results] == [2.0, 5.0, 2.0, float(len(forged)), 2.0]
    assert [r.info["correctness"] for r in results] == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert metrics["verifier/openrlhf_remote/error_rate"] == 0.0
    assert orl.openrlhf_remote("so 19", _problem(), url=a.url).score == 5.0  # one row on its own


def test_a_server_error_is_tried_again_a_refusal_is_not(servers, monkeypatch):
    monkeypatch.setattr(orl.time, "sleep", lambda s: None)
    flaky = servers(fail=503, times=2)
    assert [r.score for r in orl.score_remote(["19"], [_problem()], flaky.url)] == [2.0]
    assert len(flaky.requests) == 3  # two 503s, then the answer
    gone = servers(fail=404, times=99)
    with pytest.raises(ValueError, match=r"get_reward: http 404"):
        orl.score_remote(["19"], [_problem()], gone.url)
    assert len(gone.requests) == 1
    down = servers(fail=500, times=99)
    with pytest.raises(ValueError, match=r"no reply in 3 attempts \(http 500\)"):
        orl.score_remote(["19"], [_problem()], down.url, retries=2)
    assert len(down.requests) == 3  # the first and 2 more
    # in a run: every row of the failed batch is an error, counted (and stops a run after its patience)
    with RewardRunner(workers=1, options={"openrlhf_remote": {"url": gone.url}}) as runner:
        results, metrics = runner.score(["19", "20"], [_problem(verifier="openrlhf_remote")] * 2)
    assert all(r.score == 0 and r.info["reason"].startswith("error: ValueError: ") for r in results)
    assert metrics["verifier/openrlhf_remote/error_rate"] == 1.0


def test_the_server_is_reached_and_tried_before_any_work(servers):
    problems = [_problem(verifier="openrlhf_remote")]
    ok = servers()
    lines = []
    check_services(problems, {"openrlhf_remote": {"url": ok.url}}, wait_s=1, log=lines.append)
    assert lines == [f"reward server at {ok.url} answers (a test row: reward 0)"]
    assert ok.requests == [{"query": ["12+7"], "prompts": ["12+7"], "labels": ["19"]}]
    wrong = servers(reply=lambda body: {"reward": [1.0]})  # not OpenRLHF's reply
    with pytest.raises(InputError, match="expected a mapping with 'rewards'.*nothing was generated"):
        check_services(problems, {"openrlhf_remote": {"url": wrong.url}}, wait_s=1, log=lambda m: None)
    with pytest.raises(InputError, match="the reward server .* cannot be reached"):
        check_services(problems, {"openrlhf_remote": {"url": "http://127.0.0.1:9/get_reward"}}, wait_s=0.2,
                       log=lambda m: None)  # fmt: skip


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("openrlhf_remote", {}, "option 'url' .* is required, got None"),
        ("openrlhf_remote", {"url": 5}, "option 'url' .* is required, got 5"),
        ("openrlhf_function", {"path": ["f.py"]}, "option 'path' .* is required, got \\['f.py'\\]"),
        ("openrlhf_remote", {"url": "rm:5000/get_reward"}, "is not an http\\(s\\) URL"),
        ("openrlhf_remote", {"url": "http://rm:5000", "timeout_s": 0}, "option 'timeout_s' must be > 0"),
        ("openrlhf_function", {}, "option 'path' .* is required"),
        ("openrlhf_function", {"path": "/no/such/reward_func.py"}, "no such file"),
    ],
)
def test_options_that_cannot_work_are_refused(name, options, message):
    with pytest.raises(ValueError, match=message):
        check_options(name, options)


def test_a_file_without_reward_func_is_refused(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("def compute_score(*a):\n    return 1\n")
    with pytest.raises(ValueError, match="defines no function 'reward_func'"):
        check_options("openrlhf_function", {"path": str(path)})
