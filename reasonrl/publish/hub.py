"""Upload an exported model directory to the Hugging Face Hub (`reasonrl export ... --push-to-hub REPO`,
or `hub.push: true` at the end of training).

Owns: creating the repository (private unless asked otherwise; an existing one is reused) and one
commit with the whole folder, through `huggingface_hub` (which honours HF_ENDPOINT and HF_TOKEN /
the saved login). The only module that talks to the Hub for writing. Does not own: what is in the
folder (`publish.export`, `publish.card`).
"""

from __future__ import annotations

from pathlib import Path

from reasonrl.errors import InputError


def check_repo_id(repo: str, where: str = "--push-to-hub") -> None:
    parts = repo.split("/")
    if len(parts) != 2 or not all(parts) or any(c in repo for c in " \\:"):
        raise InputError(f"{where}: {repo!r} is not a Hub repository id (expected ORG/NAME)")


def push_folder(folder: str | Path, repo: str, private: bool = True, message: str | None = None,
                token: str | None = None) -> dict:  # fmt: skip
    """Create `repo` if needed and commit every file of `folder` to it; returns the repo and commit URLs."""
    import os

    from huggingface_hub import HfApi

    from reasonrl.models.hub import online_again_if_reachable

    check_repo_id(repo)
    online_again_if_reachable()  # a run that loaded its model while the hub was down
    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=token)  # read now, not at import
    repo_url = api.create_repo(repo, private=private, exist_ok=True, repo_type="model")
    commit = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="model",
                               commit_message=message or f"reasonrl export of {Path(folder).name}")  # fmt: skip
    return {"repo": repo, "url": str(repo_url), "commit": str(commit)}


def upload_failed(e: Exception, setting: str, folder: str | Path, repo: str, kept: str) -> InputError:
    """The one-line error of a failed upload (network, auth, quota): what failed, why, what is kept."""
    why = f"{type(e).__name__}: {str(e).splitlines()[0]}" if str(e) else type(e).__name__
    return InputError(f"{setting}: upload of {folder} to {repo} failed ({why}); {kept}")


def push_run(run_dir: str | Path, repo: str, private: bool, with_optimizer: bool, log=print) -> dict:
    """The end of training with `hub.push`: export the run's newest valid checkpoint to
    RUN_DIR/hub_export/<checkpoint> (kept: it is what was uploaded) and upload it. A failed upload is
    an InputError saying the run is saved and how to retry."""
    import shutil

    from reasonrl.publish.export import export, resolve_checkpoint

    ckpt = resolve_checkpoint(run_dir, log)
    out = Path(run_dir) / "hub_export" / ckpt.name
    if out.exists():
        shutil.rmtree(out)
    export(ckpt, out, log=log, with_optimizer=with_optimizer)
    try:
        result = push_folder(out, repo, private=private, message=f"reasonrl: {ckpt.name}")
    except Exception as e:  # network, auth, quota: the run itself is complete and saved
        raise upload_failed(e, "hub.push", out, repo, "the run and its checkpoints are saved; retry with: "
                            f"reasonrl export {ckpt} NEW_DIR --push-to-hub {repo}") from e  # fmt: skip
    log(f"hub: uploaded {ckpt.name} to {result['url']}")
    return result
