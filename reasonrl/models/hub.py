"""Reaching the Hugging Face Hub: one quick probe before the first hub id is loaded, so that a machine
that cannot reach the hub (a cluster's compute node, a laptop on a train) loads from its local cache at
once, or fails at once, instead of after huggingface_hub's retries.

Owns: `offline_unless_reachable(name)`: when `name` is a hub id (not "demo", not a local path) and
offline mode is not already on, it opens one TCP connection to the hub's host (`HF_ENDPOINT`, or the
proxy the environment names for it; `reasonrl.network`), once per process. If that fails within 3 s,
it turns on offline mode for this process and the processes it starts
(`HF_HUB_OFFLINE=1`, read by huggingface_hub, transformers and datasets) and says so in one line;
`online_again_if_reachable()`, before an upload, turns it off again where the hub answers by then.

Why: without it, every file of a hub id is first asked of the hub, and huggingface_hub retries a
failed connection 5 times with back-off (1 + 2 + 4 + 8 + 8 s) before it falls back to the cache.
Measured on this project's offline machine: a cached tiny model took 191 s to load (its config, its
tokenizer's files, its weights, each retried), `reasonrl plan` on an uncached 7B recipe 77 s to say
it cannot read the config; with offline mode 5-7 s each.
Does not own: what is loaded (`models.loading`, `planner.shape`, `data.files`).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from reasonrl.network import address_for, forget, reachable

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_turned_offline: set[str] = set()  # the hub id whose probe turned offline mode on (here, not by the user)


def is_hub_id(name: str) -> bool:
    """Whether transformers / datasets would look `name` up on the hub: ORG/NAME or NAME, not the
    demo model, not an existing local path, not a path-like string (./x, /x, ~/x)."""
    if not name or name == "demo" or name.startswith(("demo:", ".", "/", "~")):
        return False
    return _HUB_ID.fullmatch(name) is not None and not Path(name).exists()


def offline() -> bool:
    import huggingface_hub.constants as hub

    return bool(hub.HF_HUB_OFFLINE)


def hub_address() -> tuple[str, int]:
    """(host, port) that a request to the hub connects to first: its proxy's where one is set for it."""
    import huggingface_hub.constants as hub

    return address_for(hub.ENDPOINT)


def set_offline(on: bool) -> None:
    """Offline mode on or off for this process (already imported libraries too) and the processes it
    starts."""
    import huggingface_hub.constants as hub

    if on:
        os.environ["HF_HUB_OFFLINE"] = "1"
    else:
        os.environ.pop("HF_HUB_OFFLINE", None)
    hub.HF_HUB_OFFLINE = on
    if (config := sys.modules.get("datasets.config")) is not None:  # it copies the flag when imported
        config.HF_HUB_OFFLINE = config.HF_DATASETS_OFFLINE = on


def offline_unless_reachable(name: str) -> None:
    """Before `name` is loaded: offline mode if it is a hub id and the hub cannot be reached (see the
    module's docstring), said once on stderr; nothing otherwise."""
    if not is_hub_id(name) or offline():
        return
    address = hub_address()
    if reachable(address):
        return
    set_offline(True)
    _turned_offline.add(name)
    print(f"reasonrl: the Hugging Face Hub ({address[0]}:{address[1]}) cannot be reached from here: {name} and "
        "every other hub id load from the local cache only (HF_HUB_OFFLINE=1)", file=sys.stderr)  # fmt: skip


def online_again_if_reachable() -> None:
    """Before an upload: offline mode that `offline_unless_reachable` turned on (not the user's) is
    turned off again if the hub answers now, so that a run that started while the hub was down can
    push at its end (`publish.hub`)."""
    if not _turned_offline:
        return
    forget()
    if reachable(hub_address()):
        set_offline(False)
        _turned_offline.clear()
