"""Containment: network. The sandbox has its own network namespace (loopback only), so it can
reach neither the host's loopback services nor anything else. Only loopback addresses on this
machine are ever targeted; the one non-loopback connect attempt runs only after the program has
checked that it has no route at all (so even a broken sandbox sends nothing off the machine)."""

from __future__ import annotations

import secrets
import socket
import threading

import pytest
from _hostile import outcome_program

from reasonrl.rewards.sandbox import run_python


@pytest.fixture
def host_tcp_listener():
    """A TCP server on the host's 127.0.0.1; records whether anything connected."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    hits: list[object] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except (TimeoutError, OSError):
                continue
            hits.append(addr)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], hits
    stop.set()
    t.join(timeout=5)
    srv.close()


def test_cannot_reach_host_loopback_tcp(host_tcp_listener):
    port, hits = host_tcp_listener
    probe = socket.create_connection(("127.0.0.1", port), timeout=2)  # the listener works from the host
    probe.close()
    prog = outcome_program(
        f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')"
    )
    prog += outcome_program(
        f"import socket; socket.create_connection(('127.0.0.2', {port}), timeout=2); print('CONNECTED')"
    )
    prog += outcome_program(  # no /etc/hosts inside: the name does not even resolve
        f"import socket; socket.create_connection(('localhost', {port}), timeout=2); print('CONNECTED')"
    )
    res = run_python(prog, timeout_s=10)
    assert res.stdout.split() == ["ConnectionRefusedError", "ConnectionRefusedError", "gaierror"]
    assert len(hits) == 1  # only the host's own probe


def test_cannot_send_udp_to_host_loopback():
    host = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    host.bind(("127.0.0.1", 0))
    host.settimeout(0.5)
    port = host.getsockname()[1]
    try:
        res = run_python(
            f"import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"for _ in range(5): s.sendto(b'leak', ('127.0.0.1', {port}))\nprint('sent')"
        )
        assert res.status == "success"  # sending into the sandbox's own loopback succeeds...
        with pytest.raises(TimeoutError):
            host.recvfrom(64)  # ...but nothing reaches the host
    finally:
        host.close()


def test_host_cannot_reach_a_server_inside_the_sandbox():
    ready = threading.Event()
    result = {}
    port = 20000 + secrets.randbelow(20000)

    def run():
        result["res"] = run_python(
            f"import socket, time\ns = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen()\n"
            "print('listening', flush=True); s.settimeout(2)\n"
            "try:\n    s.accept(); print('ACCEPTED')\nexcept OSError:\n    print('nobody')\n",
            timeout_s=10,
        )
        ready.set()

    t = threading.Thread(target=run)
    t.start()
    try:
        for _ in range(10):
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    finally:
        t.join(timeout=30)
    assert result["res"].stdout.split() == ["listening", "nobody"]


def test_only_loopback_interface_and_no_routes():
    res = run_python(
        "import socket\nprint(sorted(n for _, n in socket.if_nameindex()))\n"
        "print(len(open('/proc/net/route').read().splitlines()) - 1)\n"
        "print(open('/proc/sys/kernel/hostname').read().strip())\n"
    )
    assert res.stdout.split("\n")[:3] == ["['lo']", "0", "sandbox"]


def test_no_route_elsewhere_and_no_dns():
    # 192.0.2.1 is TEST-NET-1 (RFC 5737); connect is attempted only when there is no route at all
    res = run_python(
        "import socket, errno\n"
        "if len(open('/proc/net/route').read().splitlines()) > 1:\n"
        "    print('HAS_ROUTE'); raise SystemExit\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.1', 80), timeout=2); print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print(errno.errorcode.get(e.errno, e))\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 80); print('RESOLVED')\n"
        "except OSError as e:\n"
        "    print('no_dns')\n",
        timeout_s=10,
    )
    assert res.stdout.split() == ["ENETUNREACH", "no_dns"]


def test_raw_and_packet_sockets_are_denied():
    prog = outcome_program("import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1); print('RAW')")
    prog += outcome_program(
        "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print('PACKET')"
    )
    res = run_python(prog)
    assert res.stdout.split() == ["PermissionError", "PermissionError"]


def test_cannot_reach_host_abstract_unix_socket():
    name = "\0reasonrl-test-" + secrets.token_hex(6)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(name)
    srv.listen(1)
    try:
        res = run_python(
            outcome_program(
                f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({name!r}); print('CONNECTED')"
            )
        )
        assert res.stdout.strip() == "ConnectionRefusedError"
    finally:
        srv.close()
