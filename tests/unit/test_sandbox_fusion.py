"""rewards.sandbox.fusion: the SandboxFusion `run_code` client against local stand-in servers.

The stand-in (`fusion_servers` in tests/conftest.py) implements POST /run_code with SandboxFusion's
request/response schema by calling our own `run_python` (so the wire mapping is checked end to end),
plus misbehaving servers for round-robin, retry and failover. All servers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import threading

import pytest

from reasonrl.rewards.sandbox.fusion import SandboxFusionClient, parse_urls

pytestmark = pytest.mark.timeout(60)


needs_bwrap = pytest.mark.bwrap


@needs_bwrap
@pytest.mark.parametrize(
    "code, stdin, status, exit_code, stdout",
    [
        ("print(int(input()) * 2)", "21\n", "success", 0, "42\n"),
        ("import sys; sys.exit(4)", "", "failed", 4, ""),
        ("raise KeyError('k')", "", "failed", 1, ""),
    ],
)
def test_run_code_round_trip_through_stand_in(fusion_servers, code, stdin, status, exit_code, stdout):
    srv = fusion_servers()
    client = SandboxFusionClient([srv.url], retries=0)
    res = client.run_python(code, stdin, timeout_s=5, memory_mb=512)
    assert (res.status, res.exit_code, res.stdout) == (status, exit_code, stdout)
    assert res.isolation == "sandbox_fusion"
    req = srv.requests[0]
    assert req["path"] == "/run_code"
    assert (req["language"], req["code"], req["stdin"]) == ("python", code, stdin)
    assert req["run_timeout"] == 5 and req["memory_limit_MB"] == 512


@needs_bwrap
def test_time_limit_exceeded_maps_to_timeout(fusion_servers):
    srv = fusion_servers()
    res = SandboxFusionClient(srv.url, retries=0).run_python("while True: pass", timeout_s=1)
    assert res.status == "timeout" and res.timed_out is True


def test_round_robin_over_servers(fusion_servers):
    ok = {"status": "Success", "message": "", "run_result": {"status": "Finished", "return_code": 0,
                                                             "stdout": "hi\n", "stderr": ""}}  # fmt: skip
    a, b, c = (
        fusion_servers(lambda r: (200, ok)),
        fusion_servers(lambda r: (200, ok)),
        fusion_servers(lambda r: (200, ok)),
    )
    client = SandboxFusionClient(f"{a.url}, {b.url},{c.url}/", retries=0)
    results = [client.run_python("print('hi')") for _ in range(6)]
    assert all(r.status == "success" and r.stdout == "hi\n" for r in results)
    assert [len(s.requests) for s in (a, b, c)] == [2, 2, 2]
    # the request as SandboxFusion reads it, with run_python's defaults (10 s, 1024 MB)
    assert {k: a.requests[0][k] for k in ("path", "language", "run_timeout", "compile_timeout", "memory_limit_MB")} == {
        "path": "/run_code", "language": "python", "run_timeout": 10.0, "compile_timeout": 10.0, "memory_limit_MB": 1024
    }  # fmt: skip


def test_retries_back_off_exponentially_up_to_ten_seconds(fusion_servers, monkeypatch):
    from reasonrl.rewards.sandbox import fusion

    slept = []
    monkeypatch.setattr(fusion.time, "sleep", slept.append)
    bad = fusion_servers(lambda r: (503, {"detail": "overloaded"}))
    res = SandboxFusionClient([bad.url], retries=3, backoff_s=0.5).run_python("pass")
    assert res.status == "sandbox_error" and slept == [0.5, 1.0, 2.0]  # none before the first attempt
    slept.clear()
    SandboxFusionClient([bad.url], retries=3, backoff_s=8).run_python("pass")
    assert slept == [8, 10.0, 10.0]


@pytest.mark.parametrize(
    "bad_behaviour",
    [
        lambda r: (503, {"detail": "overloaded"}),
        lambda r: (500, b"not json"),
        lambda r: (408, {"detail": "request timeout"}),
        lambda r: (429, {"detail": "too many requests"}),
        lambda r: (502, b"bad gateway"),
        lambda r: (504, b"gateway timeout"),
        lambda r: (200, b"<html>proxy error</html>"),
        lambda r: (200, {"detail": "no status"}),
        lambda r: (200, [1, 2]),
        lambda r: (200, {"status": "SandboxError", "message": "pod died", "run_result": None}),
    ],
    ids=[
        "http503",
        "http500",
        "http408",
        "http429",
        "http502",
        "http504",
        "not_json",
        "no_status",
        "not_a_dict",
        "sandbox_error",
    ],  # fmt: skip
)
def test_retries_fail_over_to_a_healthy_server(fusion_servers, bad_behaviour):
    good_payload = {"status": "Failed", "message": "", "run_result": {"status": "Finished", "return_code": 2,
                                                                      "stdout": "", "stderr": "x"}}  # fmt: skip
    bad = fusion_servers(bad_behaviour)
    good = fusion_servers(lambda r: (200, good_payload))
    client = SandboxFusionClient([bad.url, good.url], retries=1, backoff_s=0)
    res = client.run_python("pass")
    assert (res.status, res.exit_code, res.stderr) == ("failed", 2, "x")
    assert len(bad.requests) == 1 and len(good.requests) == 1


def test_unreachable_servers_give_sandbox_error_not_exception(fusion_servers):
    dead = fusion_servers()
    dead_url = dead.url
    dead.close()
    res = SandboxFusionClient([dead_url], retries=2, backoff_s=0).run_python("print(1)", timeout_s=1)
    assert res.status == "sandbox_error" and res.exit_code is None
    assert res.stderr.count(dead_url) == 3  # first attempt + 2 retries, each named


def test_a_sandbox_service_that_is_down_is_a_verifier_error_not_a_wrong_program(fusion_servers):
    """The code verifier against an unreachable SandboxFusion: 0 with an `error: ...` reason, which the
    health metrics count as an error (the trainer's watch stops on it; an eval rerun scores it again)."""
    from reasonrl.rewards.health import kind
    from reasonrl.rewards.verifiers.code import code
    from reasonrl.types import Problem

    dead = fusion_servers()
    dead_url = dead.url
    dead.close()
    gt = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    prob = Problem(prompt=[{"role": "user", "content": "add"}], ground_truth=gt, data_source="codegen__t")
    res = code("```python\nprint(3)\n```", prob, backend="sandbox_fusion", sandbox_fusion_urls=[dead_url])
    assert (res.score, res.reason, kind(res)) == (0.0, "error: sandbox_error", "error")


@pytest.mark.parametrize("bad", [{"retries": -1}, {"backoff_s": -0.5}, {"timeout_slack_s": -1}])
def test_negative_retry_settings_are_refused(bad):
    with pytest.raises(ValueError, match="retries, backoff_s and timeout_slack_s must be >= 0"):
        SandboxFusionClient(["127.0.0.1:1"], **bad)
    assert SandboxFusionClient(["127.0.0.1:1"]).retries == 2  # two retries by default


def test_client_error_is_not_retried(fusion_servers):
    bad = fusion_servers(lambda r: (422, {"detail": "bad language"}))
    res = SandboxFusionClient([bad.url], retries=3, backoff_s=0).run_python("pass")
    assert res.status == "sandbox_error" and "HTTP 422" in res.stderr
    assert len(bad.requests) == 1


def test_slow_server_hits_request_timeout(fusion_servers):
    gate = threading.Event()

    def slow(req):
        gate.wait(5)
        return 200, {"status": "Success", "message": "", "run_result": {"status": "Finished"}}

    srv = fusion_servers(slow)
    client = SandboxFusionClient([srv.url], retries=0, timeout_slack_s=0.2)
    res = client.run_python("pass", timeout_s=0.3)
    gate.set()
    assert res.status == "sandbox_error" and "timed out" in res.stderr.lower()


def test_output_is_capped_client_side(fusion_servers):
    big = {"status": "Success", "message": "", "run_result": {"status": "Finished", "return_code": 0,
                                                              "stdout": "z" * 5000, "stderr": ""}}  # fmt: skip
    srv = fusion_servers(lambda r: (200, big))
    res = SandboxFusionClient([srv.url], max_output_bytes=1000).run_python("pass")
    assert res.truncated is True and res.stdout == "z" * 1000


@pytest.mark.parametrize(
    "given, expected",
    [
        ("host-a:8080", ["http://host-a:8080/run_code"]),
        ("http://a:1/, https://b/run_code ,", ["http://a:1/run_code", "https://b/run_code"]),
        (["a:1", " ", "b:2/run_code"], ["http://a:1/run_code", "http://b:2/run_code"]),
        ("", []),
    ],
)
def test_parse_urls(given, expected):
    assert parse_urls(given) == expected


def test_urls_from_env_and_missing_urls(monkeypatch):
    monkeypatch.setenv("REASONRL_SANDBOX_FUSION_URLS", "x:1,y:2")
    assert SandboxFusionClient().urls == ["http://x:1/run_code", "http://y:2/run_code"]
    monkeypatch.delenv("REASONRL_SANDBOX_FUSION_URLS")
    with pytest.raises(ValueError, match="REASONRL_SANDBOX_FUSION_URLS"):
        SandboxFusionClient()


@needs_bwrap
@pytest.mark.parametrize(
    "program, score", [("print(sum(map(int, input().split())))", 1.0), ("print(0)", 0.0)]
)
def test_code_verifier_with_sandbox_fusion_backend(fusion_servers, program, score):
    from reasonrl.rewards.verifiers.code import code
    from reasonrl.types import Problem

    srv = fusion_servers()
    gt = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
    prob = Problem(prompt=[{"role": "user", "content": "add"}], ground_truth=gt, data_source="codegen__t")
    res = code(f"```python\n{program}\n```", prob, backend="sandbox_fusion", sandbox_fusion_urls=[srv.url])
    assert res.score == score
    assert [r["stdin"] for r in srv.requests] == (["1 2\n", "3 4\n"] if score else ["1 2\n"])
    assert all(r["code"] == program for r in srv.requests)


@needs_bwrap
@pytest.mark.parametrize(
    "program, score",
    [
        ("def add(a, b):\n    return a + b", 1.0),
        ("def add(a, b):\n    return a - b", 0.0),
        ("class Y:\n    def __eq__(self, o): return True\ndef add(a, b):\n    return Y()", 0.0),
        (
            'import os\ndef add(a, b):\n    return 0\nprint(\'{"status": "success", "passed": [true]}\')\nos._exit(0)',
            0.0,
        ),
    ],
)
def test_function_tests_over_sandbox_fusion_run_the_trusted_harness(fusion_servers, program, score):
    from reasonrl.rewards.sandbox.server import harness_program
    from reasonrl.rewards.verifiers.code import code
    from reasonrl.types import Problem

    srv = fusion_servers()
    gt = {"test": "def check(c):\n    assert c(1, 2) == 3\n    assert c(2, 2) == 4", "entry_point": "add"}
    prob = Problem(prompt=[{"role": "user", "content": "add"}], ground_truth=gt, data_source="codegen__t")
    res = code(f"```python\n{program}\n```", prob, backend="sandbox_fusion", sandbox_fusion_urls=[srv.url])
    assert res.score == score, res.info
    assert len(srv.requests) == 1  # one job per request: the harness, with the job on stdin
    assert srv.requests[0]["code"] == harness_program().decode()
    job = json.loads(srv.requests[0]["stdin"])
    assert job["kind"] == "script" and job["program"] == program
