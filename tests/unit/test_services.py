"""The network services the verifiers call (an LLM judge, SandboxFusion servers) are reached before any
work: each endpoint the data routes to, from where its verifier takes it, is waited for (a judge may still
be starting) and one that never accepts a connection is a one-line error naming it. Before, a judge URL
with a typo cost loading the model and a step of rollouts, each answer scored 0 as a verifier error."""

from __future__ import annotations

import json
import re
import socket
import threading
import time

import pytest
from _judge_standin import StandIn

from reasonrl.errors import InputError
from reasonrl.network import wait_for
from reasonrl.rewards.services import check_services, endpoints
from reasonrl.types import Problem


@pytest.fixture
def listening():
    """A TCP listener on 127.0.0.1 (its port), closed after the test."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


def _judged(uid: str, url: str | None = None) -> Problem:
    return Problem(prompt=[{"role": "user", "content": "How much energy?"}], ground_truth="42 J",
                   data_source="stem_web", extra_info={"judge": {"base_url": url}} if url else {}, uid=uid)  # fmt: skip


def _coded(uid: str, source: str = "codegen/x") -> Problem:
    tests = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})
    return Problem(
        prompt=[{"role": "user", "content": "echo"}], ground_truth=tests, data_source=source, uid=uid
    )


def test_wait_for_answers_at_once_waits_for_a_late_server_and_gives_up_with_the_reason(
    listening, refused_port
):
    waited = []
    t0 = time.monotonic()
    assert wait_for(f"http://127.0.0.1:{listening}/v1", 30, waited.append) is None
    assert waited == [] and time.monotonic() - t0 < 5
    port = refused_port
    t0 = time.monotonic()
    assert wait_for(f"http://127.0.0.1:{port}", 0, waited.append) == "Connection refused"
    assert waited == []  # no time to wait: no "waiting" line
    assert wait_for(f"http://127.0.0.1:{port}", 0.6, waited.append, poll_s=0.1) == "Connection refused"
    assert waited == ["Connection refused"] and time.monotonic() - t0 >= 0.6  # said once, asked until the end
    t0 = time.monotonic()  # never past the wait, whatever the poll interval; no one to tell is fine
    assert wait_for(f"http://127.0.0.1:{port}", 0.5, None, poll_s=30) == "Connection refused"
    assert 0.5 <= time.monotonic() - t0 < 3

    late = socket.socket()  # a server that starts listening while it is waited for

    def start():
        time.sleep(0.4)
        late.bind(("127.0.0.1", port))
        late.listen(1)

    threading.Thread(target=start, daemon=True).start()
    try:
        waited.clear()
        assert wait_for(f"http://127.0.0.1:{port}/v1", 20, waited.append, poll_s=0.1) is None
        assert waited == ["Connection refused"]
    finally:
        late.close()


def test_endpoints_are_where_each_verifier_takes_them(monkeypatch):
    monkeypatch.setenv("REASONRL_JUDGE_URL", "http://env-judge:8000/v1")
    monkeypatch.delenv("REASONRL_SANDBOX_FUSION_URLS", raising=False)
    rows = [_judged("a"), _judged("b", "http://row-judge:9000/v1"), _judged("c", "http://row-judge:9000/v1"),
            _coded("d"), _coded("e", "simulation__cruxeval-o")]  # fmt: skip
    assert endpoints(rows) == {  # a row's own judge beats the environment's; the local sandbox needs none
        "http://env-judge:8000/v1": "the LLM judge (REASONRL_JUDGE_URL)",
        "http://row-judge:9000/v1": "the LLM judge (extra_info.judge.base_url of uid b)",
    }
    options = {"judge": {"base_url": "http://opt-judge/v1"},
               "code": {"backend": "sandbox_fusion", "sandbox_fusion_urls": "s1:8080,http://s2:8080/"}}  # fmt: skip
    assert endpoints(rows, options) == {  # the options' judge beats every row's
        "http://opt-judge/v1": "the LLM judge (reward.options.judge.base_url)",
        "http://s1:8080/run_code": "the SandboxFusion server (its sandbox_fusion_urls option)",
        "http://s2:8080/run_code": "the SandboxFusion server (its sandbox_fusion_urls option)",
    }
    monkeypatch.setenv("REASONRL_SANDBOX_FUSION_URLS", "s3:1")
    assert endpoints(
        [_coded("e", "simulation__cruxeval-o")], {"cruxeval": {"backend": "sandbox_fusion"}}
    ) == {"http://s3:1/run_code": "the SandboxFusion server (REASONRL_SANDBOX_FUSION_URLS)"}
    plain = Problem(
        prompt=[{"role": "user", "content": "1+1="}], ground_truth="2", data_source="reasonrl/arithmetic"
    )
    assert endpoints([_coded("d"), plain]) == {} and endpoints([]) == {}  # (arithmetic declares no services)


def test_a_service_that_never_answers_is_one_line_naming_it(refused_port, monkeypatch):
    monkeypatch.delenv("REASONRL_JUDGE_URL", raising=False)
    port = refused_port
    logs = []
    judge = StandIn()
    judge.script = [("reply", "Final verdict: YES"), ("reply", "Final verdict: NO")]  # grades its test right
    try:
        up = [_judged("a", judge.url)]
        check_services(up, {}, 5, logs.append)  # up: no waiting, one line for its test
        assert len(logs) == 1 and re.fullmatch(
            rf"the LLM judge at {judge.url} \(model 'default'\) graded two test answers right \(\d+\.\d s\)",
            logs[0],
        )
        logs.clear()
        down = f"http://127.0.0.1:{port}/v1"
        with pytest.raises(InputError) as e:
            check_services([*up, _judged("b", down)], {}, 0.3, logs.append)
    finally:
        judge.close()
    assert len(judge.requests) == 2  # the judge that is up was not tried again once another was down
    assert str(e.value) == (
        f"the LLM judge (extra_info.judge.base_url of uid b) at {down} cannot be reached (Connection refused, for "
        "0.3 s): start it or fix its URL; nothing was generated or scored"
    )
    assert logs == [f"waiting up to 0.3 s for the LLM judge (extra_info.judge.base_url of uid b) at {down} to accept "
                    "connections (Connection refused; reward.service_wait_s sets the wait)"]  # fmt: skip
    monkeypatch.setenv("REASONRL_SERVICE_WAIT_S", "0")  # the CLIs' wait: from the environment
    with pytest.raises(InputError, match=r"cannot be reached \(Connection refused, for 0 s\)"):
        check_services([_judged("b", down)], {}, None, logs.append)
    monkeypatch.setenv("REASONRL_SERVICE_WAIT_S", "soon")
    with pytest.raises(InputError, match="REASONRL_SERVICE_WAIT_S must be a number of seconds, got 'soon'"):
        check_services([_judged("b", down)], {}, None, logs.append)
