"""Before any work, each network service the verifiers call is tried with a test call, not only reached: the
LLM judge grades a right and a wrong answer to a trivial question with the run's own endpoint, key, model
and template; each SandboxFusion server runs two right programs. A judge behind a wrong API key, model
name or path answers every call with an error (the verifier watch stopped the run three steps later), and
a judge that gives no verdict line, or says YES to everything, scored every answer 0 or 1 with no error at
all: each is now one line before the model loads."""

from __future__ import annotations

import json
import re

import pytest
from _judge_standin import StandIn

from reasonrl.errors import InputError
from reasonrl.rewards.services import check_services
from reasonrl.types import Problem

RIGHT = [("reply", "Final verdict: YES"), ("reply", "Final verdict: NO")]  # YES to 5, NO to 7


@pytest.fixture
def judge(monkeypatch):
    monkeypatch.delenv("REASONRL_JUDGE_URL", raising=False)
    monkeypatch.delenv("REASONRL_JUDGE_API_KEY", raising=False)
    s = StandIn()
    yield s
    s.close()


def _judged(url: str, **cfg) -> Problem:
    return Problem(prompt=[{"role": "user", "content": "How much energy?"}], ground_truth="42 J",
                   data_source="stem_web", extra_info={"judge": {"base_url": url, **cfg}}, uid="r1")  # fmt: skip


def _fast(**kw) -> dict:
    return {"judge": {"timeout_s": 2.0, "retries": 0, "backoff_s": 0.01, **kw}}


def test_a_judge_that_grades_its_test_right_passes_with_the_runs_own_settings(judge, monkeypatch):
    judge.script = list(RIGHT)
    monkeypatch.setenv("REASONRL_JUDGE_API_KEY", "sk-test")
    template = "Q: {question}\nRef: {reference}\nStudent: {answer}\nEnd with Final verdict: YES or NO."
    logs = []
    check_services([_judged(judge.url, model="grader-7b")], _fast(template=template), 5, logs.append)
    assert [r["path"] for r in judge.requests] == ["/v1/chat/completions"] * 2
    assert [r["auth"] for r in judge.requests] == ["Bearer sk-test"] * 2
    assert [r["body"]["model"] for r in judge.requests] == ["grader-7b"] * 2
    sent = [r["body"]["messages"][0]["content"] for r in judge.requests]
    assert sent == [template.format(question="What is 2 + 3?", reference="5", answer=a) for a in ("5", "7")]
    assert len(logs) == 1 and re.fullmatch(
        rf"the LLM judge at {judge.url} \(model 'grader-7b'\) graded two test answers right \(\d+\.\d s\)",
        logs[0],
    )


@pytest.mark.parametrize(
    "script, says",
    [
        ([("status", 401)], "could not grade a test answer: error: http 401: the endpoint refused the API key "
                            "(REASONRL_JUDGE_API_KEY)"),
        ([("status", 403)], "could not grade a test answer: error: http 403: the endpoint refused the API key "
                            "(REASONRL_JUDGE_API_KEY)"),
        ([("status", 404)], "could not grade a test answer: error: http 404: no chat-completions route, or no such "
                            "model (the URL must be the API's base, usually ending in /v1, and the model one it serves)"),
        ([("status", 400)], "could not grade a test answer: error: http 400"),
        ([("raw", b"<html>gateway</html>")], "could not grade a test answer: error: bad response body: "
                                             "b'<html>gateway</html>'"),
        ([("reply", "The student is right.")], "gave no 'Final verdict: YES' or 'NO' line grading a test answer "
                                               "(its reply ends 'The student is right.'): check the model and the "
                                               "judge's template; reward.options.judge.probe=false skips this test"),
        ([("reply", "Final verdict: YES")], "graded a test answer wrongly: asked 'What is 2 + 3?' (reference 5), it "
                                            "said YES to '7'; it would score answers at random: use another judge "
                                            "model or check its template; reward.options.judge.probe=false skips "
                                            "this test"),
        ([("reply", "Final verdict: NO")], "graded a test answer wrongly: asked 'What is 2 + 3?' (reference 5), it "
                                           "said NO to '5'"),
        ([("cut", "Let me think about whether 5 equals")], "was cut at max_tokens=1024 before its verdict on a "
                                                           "test answer: raise reward.options.judge.max_tokens"),
        ([("status", 503)], "could not grade a test answer: error: http 503"),
    ],
)  # fmt: skip
def test_a_judge_that_cannot_grade_is_one_line_before_any_work(judge, script, says):
    judge.script = script
    with pytest.raises(InputError) as e:
        check_services([_judged(judge.url)], _fast(), 5, print)
    assert str(e.value).startswith(f"the LLM judge at {judge.url} (model 'default') {says}")
    assert str(e.value).endswith("; nothing was generated or scored")
    # a judge that fails on the right answer is not asked the wrong one
    assert len(judge.requests) == (2 if script == [("reply", "Final verdict: YES")] else 1)


def test_the_probe_is_once_per_judge_setting_and_can_be_switched_off(judge):
    judge.script = list(RIGHT) * 2
    rows = [_judged(judge.url), _judged(judge.url), _judged(judge.url, model="other")]
    logs = []
    check_services(rows, _fast(), 5, logs.append)
    assert len(judge.requests) == 4 and len(logs) == 2  # two settings, two answers each
    assert [r["body"]["model"] for r in judge.requests] == ["default", "default", "other", "other"]
    judge.requests.clear()
    judge.script = [("reply", "Final verdict: YES")]  # would fail the test
    logs.clear()
    check_services(rows, _fast(probe=False), 5, logs.append)
    assert judge.requests == [] and logs == []
    with pytest.raises(InputError, match="said YES to '7'"):  # per row too
        check_services([_judged(judge.url, probe=True)], _fast(), 5, print)
    judge.requests.clear()
    check_services([_judged(judge.url, probe=False)], _fast(), 5, print)
    assert judge.requests == []


def _coded(source: str = "codegen/x") -> Problem:
    tests = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})
    return Problem(
        prompt=[{"role": "user", "content": "echo"}], ground_truth=tests, data_source=source, uid="c1"
    )


def test_each_sandbox_fusion_server_runs_the_test_programs(fusion_servers, require_bwrap):
    good, other = fusion_servers(), fusion_servers()
    logs = []
    opts = {"code": {"backend": "sandbox_fusion", "sandbox_fusion_urls": f"{good.url},{other.url}"}}
    check_services([_coded()], opts, 5, logs.append)
    for srv in (good, other):  # every server, each with a stdin program and a harness job
        assert len(srv.requests) == 2 and srv.requests[0]["code"] == "print(sum(map(int, input().split())))"
        assert srv.requests[0]["stdin"] == "2 3\n" and "def add(a, b)" in json.dumps(srv.requests[1])
    assert [re.sub(r"\(\d+\.\d s\)", "(t)", line) for line in logs] == [
        f"the SandboxFusion server at {good.url}/run_code ran two test programs (t)",
        f"the SandboxFusion server at {other.url}/run_code ran two test programs (t)",
    ]


def test_the_local_sandbox_runs_the_test_programs_or_says_what_to_install(require_bwrap, monkeypatch):
    import reasonrl.rewards.sandbox.process as process

    logs = []
    check_services([_coded(), _coded("simulation__cruxeval-i")], {}, 5, logs.append)
    assert [re.sub(r"\(\d+\.\d s\)", "(t)", line) for line in logs] == [
        "the local code sandbox (bwrap) ran two test programs (t)"]  # once for both verifiers  # fmt: skip
    import reasonrl.rewards.verifiers.code as code

    logs.clear()  # the isolation the options ask for is the one tried (the runner asked for is recorded)
    asked, real = [], code.job_runner
    monkeypatch.setattr(code, "job_runner", lambda *a: asked.append(a) or real("local", None, None))
    check_services([_coded()], {"code": {"isolation": "unisolated"}}, 5, logs.append)
    assert asked == [("local", None, "unisolated")]
    assert logs[0].startswith("the local code sandbox (unisolated) ran two test programs")
    monkeypatch.undo()
    monkeypatch.setattr(process, "bwrap_problem", lambda interp=None: "the `bwrap` executable is not on PATH")
    with pytest.raises(InputError) as e:
        check_services([_coded()], {"code": {"backend": "local"}}, 5, logs.append)
    assert str(e.value) == (
        "the local code sandbox (bwrap) cannot run programs: bubblewrap sandbox unavailable: the `bwrap` "
        "executable is not on PATH; install it (Debian/Ubuntu: `apt-get install bubblewrap`) or run model code "
        "WITHOUT isolation: REASONRL_SANDBOX=unisolated; nothing was generated or scored"
    )


@pytest.mark.parametrize(
    "behave, says",
    [
        (lambda req: (200, {"status": "Failed", "message": "", "run_result": {
            "status": "Finished", "return_code": 1, "stdout": "", "stderr": "python3: not found"}}),
         "runtime_error, stderr 'python3: not found'"),
        (lambda req: (200, {"status": "Success", "message": "", "run_result": {
            "status": "Finished", "return_code": 0, "stdout": "6\n", "stderr": ""}}), "wrong, stdout '6\\n'"),
        (lambda req: (200, {"status": "SandboxError", "message": "no runner for python"}),
         "error: sandbox_error, stderr 'SandboxFusion request failed: http://127.0.0.1:"),
        (lambda req: (404, {"detail": "Not Found"}), "error: sandbox_error, stderr 'SandboxFusion request failed: http://127.0.0.1:"),
    ],
)  # fmt: skip
def test_a_sandbox_fusion_server_that_cannot_run_programs_is_one_line(fusion_servers, behave, says):
    srv = fusion_servers(behave)
    with pytest.raises(InputError) as e:
        check_services([_coded("simulation__cruxeval-o")],
                       {"cruxeval": {"backend": "sandbox_fusion", "sandbox_fusion_urls": srv.url}}, 5, print)  # fmt: skip
    assert str(e.value).startswith(
        f"the SandboxFusion server at {srv.url}/run_code failed a test program that should pass "
        f"('print(sum(map(int, input().split())))'): {says}"
    ), str(e.value)
    assert str(e.value).endswith("; nothing was generated or scored")
