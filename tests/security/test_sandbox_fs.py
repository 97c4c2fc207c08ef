"""Containment: filesystem, environment, identity. Each row is a hostile program and what it must
observe inside the sandbox; host-side checks follow where the attack could leave a trace."""

from __future__ import annotations

import glob
import os
import secrets
import sys

import pytest
from _hostile import REPO_ROOT, SECRET_NAME, SECRET_VALUE, outcome_program

from reasonrl.rewards.sandbox import run_python

HOST_FILE = os.path.realpath(__file__)

# (id, program, expected stdout). Each program prints one line describing what it could do.
READS = [
    ("etc_shadow", "print(open('/etc/shadow').read())", "FileNotFoundError"),
    ("etc_passwd", "print(open('/etc/passwd').read())", "FileNotFoundError"),
    ("etc_listing", "import os; print(sorted(os.listdir('/etc')))", "['ld.so.cache']"),
    ("host_test_file", f"print(open({HOST_FILE!r}).read())", "FileNotFoundError"),
    ("repo_dir", f"import os; print(os.listdir({str(REPO_ROOT)!r}))", "FileNotFoundError"),
    ("root_ssh", "print(open('/root/.ssh/id_rsa').read())", "FileNotFoundError"),
    ("home", "import os; print(os.listdir('/home'))", "FileNotFoundError"),
    ("sys", "import os; print(os.listdir('/sys'))", "FileNotFoundError"),
    ("proc_root_escape", "print(open('/proc/1/root/etc/shadow').read())", "PermissionError"),
    ("dotdot_escape", "print(open('/proc/self/root/../../../../etc/shadow').read())", "FileNotFoundError"),
    ("proc_cwd_of_pid1", "import os; print(os.listdir('/proc/1/cwd'))", "PermissionError"),
    ("block_devices", "import os; print(open('/dev/sda','rb').read(1))", "FileNotFoundError"),
    ("dev_mem", "print(open('/dev/mem','rb').read(1))", "FileNotFoundError"),
    ("symlink_to_shadow", "import os; os.symlink('/etc/shadow','/tmp/s'); print(open('/tmp/s').read())",
     "FileNotFoundError"),
    ("symlink_to_host_file", f"import os; os.symlink({HOST_FILE!r},'l'); print(open('l').read())",
     "FileNotFoundError"),
]  # fmt: skip

WRITES = [
    ("usr", "/usr/reasonrl-evil"),
    ("usr_bin", "/usr/bin/reasonrl-evil"),
    ("root_of_fs", "/reasonrl-evil"),
    ("etc", "/etc/reasonrl-evil"),
    ("python_prefix", os.path.join(os.path.realpath(sys.base_prefix), "reasonrl-evil")),
    ("repo", str(REPO_ROOT / "reasonrl-evil")),
    ("dev", "/dev/reasonrl-evil"),
    ("proc_sys", "/proc/sys/kernel/hostname"),
    ("sysrq", "/proc/sysrq-trigger"),
]

ERRORS = ("FileNotFoundError", "PermissionError", "OSError", "IsADirectoryError")


@pytest.mark.parametrize("name, body, expected", READS, ids=[r[0] for r in READS])
def test_host_files_are_invisible(name, body, expected):
    res = run_python(outcome_program(body), timeout_s=10)
    assert res.status == "success", res.stderr
    assert res.stdout.strip() == expected


@pytest.mark.parametrize("name, path", WRITES, ids=[w[0] for w in WRITES])
def test_writes_outside_tmp_fail(name, path):
    tag = secrets.token_hex(6)
    res = run_python(outcome_program(f"open({path!r}, 'w').write({tag!r}); print('WROTE')"))
    assert res.status == "success", res.stderr
    assert res.stdout.strip() in ERRORS
    if os.path.exists(path):  # a pre-existing host file must be unchanged
        with open(path, errors="replace") as f:
            assert tag not in f.read()


def test_tmp_is_private_and_writable():
    name = "reasonrl-sbx-" + secrets.token_hex(6)
    res = run_python(
        f"open('/tmp/{name}', 'w').write('x'); import os; print(os.getcwd(), os.listdir('/tmp'))"
    )
    assert res.stdout.split()[0] == "/tmp" and name in res.stdout
    assert not os.path.exists(f"/tmp/{name}")
    assert glob.glob(f"/tmp/**/{name}", recursive=True) == []


def test_chmod_and_hardlink_of_system_files_fail():
    prog = outcome_program("import os, sys; os.link(sys.executable, '/tmp/py'); print('LINKED')")
    prog += outcome_program("import os; os.chmod('/usr/bin', 0o777); print('CHMODDED')")
    res = run_python(prog)
    link, chmod = res.stdout.split()
    assert link == "OSError"  # EXDEV: /tmp is another filesystem
    assert chmod in ("OSError", "PermissionError")  # EROFS or EPERM
    assert oct(os.stat("/usr/bin").st_mode & 0o777) != "0o777"


def test_environment_has_no_host_variables(host_secret):
    prog = (
        "import os, glob\n"
        f"leaks = [k for k, v in os.environ.items() if 'REASONRL_SECURITY' in k or v == {host_secret!r}]\n"
        "for p in glob.glob('/proc/*/environ'):\n"
        "    try:\n"
        f"        if {host_secret!r}.encode() in open(p, 'rb').read(): leaks.append(p)\n"
        "    except OSError: pass\n"
        "print(sorted(os.environ), leaks)\n"
    )
    res = run_python(prog)
    assert os.environ[SECRET_NAME] == SECRET_VALUE  # the host really has it
    assert res.status == "success", res.stderr
    keys, leaks = res.stdout.rsplit("] ", 1)
    assert leaks.strip() == "[]"
    assert SECRET_NAME not in keys and "HOSTNAME" not in keys and "USER" not in keys


def test_secret_not_in_any_sandbox_process_cmdline(host_secret):
    prog = f"import glob\nprint(any({host_secret!r}.encode() in open(p,'rb').read() for p in glob.glob('/proc/*/cmdline')))"
    res = run_python(prog)
    assert res.stdout.strip() == "False"


def test_identity_is_unprivileged():
    prog = (
        "import os\n"
        "st = open('/proc/self/status').read().split('\\n')\n"
        "caps = {l.split(':')[0]: int(l.split()[1], 16) for l in st if l.startswith('Cap')}\n"
        "nnp = [l.split()[1] for l in st if l.startswith('NoNewPrivs')][0]\n"
        "try:\n    os.setuid(0); r = 'SETUID_OK'\nexcept PermissionError: r = 'denied'\n"
        "print(caps['CapEff'], caps['CapPrm'], nnp, r, os.getuid() != 0)\n"
    )
    res = run_python(prog)
    assert res.stdout.split() == ["0", "0", "1", "denied", "True"]


def test_cannot_raise_own_rlimits():
    prog = outcome_program(
        "import resource as R; R.setrlimit(R.RLIMIT_AS, (R.RLIM_INFINITY, R.RLIM_INFINITY)); print('RAISED')"
    )
    res = run_python(prog)
    assert res.stdout.strip() in ("ValueError", "PermissionError")


def test_nested_user_namespace_does_not_reveal_host_files():
    # util-linux `unshare` may create a user namespace; mounts stay locked and host files absent
    prog = (
        "import subprocess\n"
        "r = subprocess.run(['unshare', '-r', 'sh', '-c', 'cat /etc/shadow; echo hi > /usr/evil'],"
        " capture_output=True, text=True)\n"
        "print(r.returncode != 0, 'root:' in r.stdout)\n"
    )
    res = run_python(prog)
    assert res.stdout.split() == ["True", "False"]
    assert not os.path.exists("/usr/evil")


def test_file_size_limit_and_tmpfs_quota():
    big = run_python(outcome_program("open('big','wb').write(b'0' * (200 << 20)); print('WROTE')"),
                     fsize_mb=8, memory_mb=1024)  # fmt: skip
    assert big.stdout.strip() in ("OSError", "MemoryError")
    fill = run_python(
        outcome_program("for i in range(100):\n    open(f'f{i}','wb').write(b'0' * (4 << 20))\nprint('FILLED')"),
        tmp_mb=16, fsize_mb=8,
    )  # fmt: skip
    assert fill.stdout.strip() == "OSError"  # ENOSPC from the size-capped tmpfs
    shm = run_python(
        outcome_program(
            "for i in range(100):\n    open(f'/dev/shm/f{i}','wb').write(b'0' * (4 << 20))\nprint('FILLED')"
        ),
        tmp_mb=16, fsize_mb=8,
    )  # fmt: skip
    assert shm.stdout.strip() == "OSError"


def test_host_process_invisible_and_unkillable():
    prog = outcome_program(f"import os; os.kill({os.getpid()}, 9); print('SENT')")
    prog += "import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
    res = run_python(prog)
    lines = res.stdout.split()
    assert lines[0] == "ProcessLookupError"
    assert int(lines[1]) <= 3  # bwrap's init, the program, nothing of the host
