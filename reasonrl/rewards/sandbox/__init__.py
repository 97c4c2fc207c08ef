"""The ONLY place where untrusted (model-written) code runs.

Owns, by module:
  process.py  one program in a throw-away bubblewrap sandbox (`run_python`), the isolation itself
  launch.py   running one launched command to its end: stdin, capped output, deadline, group kill
  harness.py  the trusted test driver that runs INSIDE the sandbox: the candidate's code runs in a
              forked child, the tests run in the driver, and the verdict never passes through the child
  server.py   host side of the harness: a pool of long-lived sandboxed drivers (`run_tests`)
Does not own: what a program is or what its tests mean (`rewards.verifiers.code`, `rewards.verifiers.cruxeval`), or
remote execution (`rewards.sandbox.fusion`).
"""

from reasonrl.rewards.sandbox.process import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    ENV_VAR,
    ISOLATIONS,
    SANDBOX_ENV,
    SandboxResult,
    SandboxUnavailable,
    bwrap_problem,
    run_python,
)

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "ENV_VAR",
    "ISOLATIONS",
    "SANDBOX_ENV",
    "SandboxResult",
    "SandboxUnavailable",
    "bwrap_problem",
    "run_python",
]
