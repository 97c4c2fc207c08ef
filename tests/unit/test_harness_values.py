"""What crosses from the candidate's child to the trusted driver (rewards/sandbox/child.py, harness.py):
honest results of plain-type subclasses arrive as their plain value (a Counter is a dict, a namedtuple
a tuple, an IntEnum an int), anything else as an opaque handle whose attributes and methods the child
answers; a name the program never defined, a call that exits, a call that hangs and a forged RPC
message all fail the test instead of passing it or hanging the driver. The hostile programs that
try to make a wrong answer pass are in tests/security/test_reward_hacking.py."""

from __future__ import annotations

import json

import pytest

from reasonrl.rewards.verifiers.code import code
from reasonrl.types import Problem

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.bwrap,
]


def _score(program: str, gt: dict, prefix: str = "", **kw):
    problem = Problem(prompt=[{"role": "user", "content": "solve"}], ground_truth=json.dumps(gt),
                      data_source="codegen__test", ability="codegen", extra_info={"prefix": prefix})  # fmt: skip
    return code(f"```python\n{program}\n```", problem, **kw)


def _call(body: str, output) -> dict:
    return {"inputs": [[]], "outputs": [output], "fn_name": "f"}, f"def f():\n{body}"


@pytest.mark.parametrize(
    "body, output",
    [
        ("    from collections import Counter\n    return Counter('aab')", {"a": 2, "b": 1}),
        ("    from collections import defaultdict\n    d = defaultdict(list)\n    d['k'].append(1)\n    return d",
         {"k": [1]}),
        ("    from collections import OrderedDict\n    return OrderedDict(x=1)", {"x": 1}),
        ("    from collections import namedtuple\n    P = namedtuple('P', 'x y')\n    return P(1, 2)", [1, 2]),
        ("    from enum import IntEnum\n    class C(IntEnum):\n        RED = 3\n    return C.RED", 3),
        ("    class S(str):\n        pass\n    return S('abc')", "abc"),
        ("    class F(float):\n        pass\n    return F(0.5)", 0.5),
        ("    from collections import Counter\n    return [Counter('a'), (Counter('bb'),)]", [{"a": 1}, [{"b": 2}]]),
    ],
)  # fmt: skip
def test_honest_subclasses_of_plain_types_arrive_as_their_value(body, output):
    gt, program = _call(body, output)
    res = _score(program, gt, timeout_s=5)
    assert (res.score, res.reason) == (1.0, "correct"), res.info


@pytest.mark.parametrize(
    "body",
    [
        # cannot say what it is: stays a handle, which equals nothing but itself
        "    class L(list):\n        def __iter__(self):\n            raise RuntimeError('no')\n    return L()",
        # says it is something that is not its plain type
        "    class S(str):\n        def __str__(self):\n            return S2('abc')\n"
        "    class S2(str):\n        pass\n    return S('abc')",
        "    return object()",
    ],
)
def test_values_that_cannot_be_made_plain_stay_opaque_and_do_not_match(body):
    gt, program = _call(body, "abc")
    res = _score(program, gt, timeout_s=5)
    assert (res.score, res.reason) == (0.0, "wrong"), res.info


def test_objects_are_handles_whose_attributes_and_methods_the_child_answers():
    program = "class Box:\n    def __init__(self, v):\n        self.value = v\n    def double(self, k):\n" \
              "        return Box(self.value * k)\ndef make(v):\n    return Box(v)\n" \
              "def unbox(b):\n    return b.value"  # fmt: skip
    tests = ["assert make(3).value == 3", "assert make(3).double(2).value == 6", "assert make(1) != make(1)",
             "assert unbox(make(5)) == 5"]  # a handle passed back to the child is its own object there  # fmt: skip
    res = _score(program, {"test_list": tests}, score_mode="fraction", timeout_s=5)
    assert (res.score, res.info["passed"], res.info["total"]) == (1.0, 4, 4), res.info


def test_objects_the_tests_build_are_rebuilt_in_the_child_from_the_shared_prefix():
    # LeetCode style: the prefix defines ListNode in both places; the tests build lists and pass them
    prefix = (
        "class ListNode:\n    def __init__(self, val=0, nxt=None):\n        self.val, self.next = val, nxt"
    )
    program = "class Solution:\n    def total(self, node):\n        s = 0\n        while node:\n" \
              "            s, node = s + node.val, node.next\n        return s"  # fmt: skip
    tests = [
        "assert Solution().total(ListNode(1, ListNode(2, ListNode(4)))) == 7",
        "assert Solution().total(None) == 0",
    ]
    res = _score(program, {"test_list": tests}, prefix=prefix, score_mode="fraction", timeout_s=5)
    assert (res.score, res.info["passed"]) == (1.0, 2), res.info


def test_a_name_the_program_never_defined_fails_the_test():
    res = _score("def g():\n    return 1", {"test_list": ["assert f() == 1"]}, timeout_s=5)
    assert res.score == 0.0 and "NameError" in res.info["failure"]["error"], res.info


def test_exiting_inside_a_call_fails_it():
    program = "import sys\ndef f(a, b):\n    sys.exit(0)"
    res = _score(program, {"inputs": [[1, 2]], "outputs": [3], "fn_name": "f"}, timeout_s=5)
    assert res.score == 0.0 and res.reason != "correct", res.info


def test_a_call_that_sleeps_past_the_deadline_times_out():
    # no CPU is used, so only the driver's own deadline can end the wait for the reply
    program = "import time\ndef f(a, b):\n    time.sleep(60)\n    return a + b"
    res = _score(program, {"inputs": [[1, 2]], "outputs": [3], "fn_name": "f"}, timeout_s=1)
    assert (res.score, res.reason) == (0.0, "timeout"), res.info


def test_a_forged_message_over_the_size_cap_fails_without_a_wait():
    # the program writes a header claiming a 2 GiB reply on the RPC pipe before the driver asks
    program = "import os, struct\nos.write(4, struct.pack('>I', 2**31))\ndef f(a, b):\n    return a + b"
    res = _score(program, {"inputs": [[1, 2]], "outputs": [3], "fn_name": "f"}, timeout_s=30)
    assert res.score == 0.0 and res.reason != "timeout", res.info
    assert res.info["failure"]["error"].endswith("over the 16777216 cap"), res.info


@pytest.mark.parametrize(
    "ending, passes",
    [
        ("", True),
        ("import sys; sys.exit()", True),  # SystemExit(None) is a clean exit, as in python itself
        ("import sys; sys.exit(0)", True),
        ("import sys; sys.exit('bye')", False),  # a message exits with status 1
        ("import sys; sys.exit(3)", False),
        ("raise ValueError('late')", False),  # the right output, then a crash
    ],
)
def test_a_stdio_program_passes_only_when_it_exits_as_python_would_with_status_0(ending, passes):
    res = _score(f"print(int(input()) * 2)\n{ending}", {"inputs": ["21\n"], "outputs": ["42\n"]}, timeout_s=5)
    assert res.score == (1.0 if passes else 0.0), res.info


def test_the_child_runs_with_its_own_limits_and_only_its_five_pipes():
    body = ("    import os, resource\n    fds = sorted(int(x) for x in os.listdir('/proc/self/fd'))\n"
            "    return [fds, list(resource.getrlimit(resource.RLIMIT_AS)), list(resource.getrlimit(resource.RLIMIT_CPU))]")  # fmt: skip
    # fds 0-4 (stdin, stdout, stderr, RPC in and out) and the one listing the directory; address
    # space as asked; CPU seconds past the wall-clock deadline (timeout + 2), so the deadline decides
    gt, program = _call(body, [[0, 1, 2, 3, 4, 5], [128 << 20, 128 << 20], [7, 8]])
    res = _score(program, gt, timeout_s=5, memory_mb=128)
    assert (res.score, res.reason) == (1.0, "correct"), res.info
