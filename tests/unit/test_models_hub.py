"""A hub the machine cannot reach: hub ids load from the local cache (or fail) at once, without
huggingface_hub's retries (measured: 191 s to load a cached tiny model, 77 s for `reasonrl plan` to say
it cannot read an uncached model's config); a reachable hub, local paths and the demo model are left
alone (`reasonrl.models.hub`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from reasonrl.models import hub


@pytest.fixture
def closed_port():
    """A port on 127.0.0.1 that refuses connections (bound, never listening), held for the test."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    yield s.getsockname()[1]
    s.close()


def test_what_is_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "local" / "model").mkdir(parents=True)
    for name in ("Qwen/Qwen2.5-0.5B-Instruct", "gpt2", "org/name.v1_2"):
        assert hub.is_hub_id(name), name
    for name in ("demo", "demo:addsub", "/abs/path", "./rel", "../up", "~/home", "local/model", "a/b/c", "",
                 "org/"):  # fmt: skip
        assert not hub.is_hub_id(name), name


def test_the_probe_goes_to_the_endpoint_or_its_proxy(monkeypatch):
    import huggingface_hub.constants as constants

    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
                "NO_PROXY", "no_proxy"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "https://huggingface.co")
    assert hub.hub_address() == ("huggingface.co", 443)
    monkeypatch.setattr(constants, "ENDPOINT", "http://mirror.example:8080")  # HF_ENDPOINT
    assert hub.hub_address() == ("mirror.example", 8080)
    monkeypatch.setattr(constants, "ENDPOINT", "https://huggingface.co")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert hub.hub_address() == ("proxy.example", 3128)
    monkeypatch.setenv("NO_PROXY", "huggingface.co")
    assert hub.hub_address() == ("huggingface.co", 443)
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("ALL_PROXY", "proxy2.example:8000")
    assert hub.hub_address() == ("proxy2.example", 8000)


def test_a_hub_that_answers_is_left_online_and_one_that_refuses_turns_offline(monkeypatch, closed_port):
    import huggingface_hub.constants as constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        hub.offline_unless_reachable("org/model")
        assert not constants.HF_HUB_OFFLINE and "HF_HUB_OFFLINE" not in os.environ
    calls = []
    real = socket.create_connection
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: calls.append(a) or real(*a, **k))
    hub.offline_unless_reachable("/a/local/path")  # local paths and the demo model: no probe
    hub.offline_unless_reachable("demo:addsub")
    assert calls == []
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{closed_port}")
    hub.offline_unless_reachable("org/model")
    assert constants.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1" and len(calls) == 1
    hub.offline_unless_reachable("org/other")  # offline now: no second probe
    assert len(calls) == 1
    hub.online_again_if_reachable()  # before an upload: still down, so still offline
    assert constants.HF_HUB_OFFLINE and len(calls) == 2
    with socket.socket() as server:  # the hub is back by the end of the run
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        hub.online_again_if_reachable()
        assert not constants.HF_HUB_OFFLINE and "HF_HUB_OFFLINE" not in os.environ
        hub.set_offline(True)  # the user's own offline mode is theirs: an upload does not undo it
        hub.online_again_if_reachable()
        assert constants.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1" and len(calls) == 3


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    # the timeout only bounds a regression (retries take minutes); the assertions are on what happened
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240)


def test_an_unreachable_hub_loads_cached_models_and_fails_the_rest_without_retrying(
    tiny_model_and_tokenizer, tmp_path, closed_port
):
    model, tok = tiny_model_and_tokenizer
    snapshot = tmp_path / "cache" / "models--acme--tiny" / "snapshots" / "abc123"
    model.save_pretrained(snapshot)
    tok.save_pretrained(snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc123")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_ENDPOINT": f"http://127.0.0.1:{closed_port}",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    code = """
import json
from reasonrl.errors import InputError
from reasonrl.models.loading import load_policy
model, tok = load_policy("acme/tiny", device="cpu", log=lambda *a: None)
out = {"params": sum(p.numel() for p in model.parameters())}
try:
    load_policy("acme/missing", device="cpu", log=lambda *a: None)
except InputError as e:
    out["missing"] = str(e)
from reasonrl.data.files import read_rows
try:
    read_rows("hf:acme/data")
except InputError as e:
    out["data"] = str(e)
print(json.dumps(out))
"""
    res = _run(code, env)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["params"] == sum(p.numel() for p in model.parameters())  # the cached snapshot, loaded
    assert out["missing"].startswith("model acme/missing: cannot load its tokenizer and config")
    assert out["data"].startswith("hf:acme/data: could not load from the hub")
    assert "Retrying" not in res.stderr  # huggingface_hub's back-off never started
    said = [line for line in res.stderr.splitlines() if "cannot be reached" in line]
    assert said == [f"reasonrl: the Hugging Face Hub (127.0.0.1:{closed_port}) cannot be reached from here: "
                    "acme/tiny and every other hub id load from the local cache only (HF_HUB_OFFLINE=1)"]  # fmt: skip
