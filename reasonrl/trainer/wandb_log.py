"""Weights & Biases mirror of the metrics (optional: `log.wandb=true`, `pip install reasonrl[wandb]`).

Owns: starting the wandb run (project / entity / mode from the `log` section; its files under
RUN_DIR/wandb), checking before any work that an online run can log (`check_online`: an API key, the
server within reach), keeping one wandb run per run directory across resumes (its id in RUN_DIR/wandb_run_id),
and plotting every metric against our own `step` metric, so a resumed run that re-logs steps after its
last checkpoint shows them again instead of wandb dropping them as out of order. The only module that
imports wandb. Also logs each step's sampled rollouts as a table (`rollouts`). Does not own: the metric
values or names (`trainer.metrics`); jsonl stays the record.
"""

from __future__ import annotations

import os
from pathlib import Path

from reasonrl.data.files import write_text
from reasonrl.errors import InputError

_OFFLINE_HINT = (
    "log.wandb_mode=offline logs to RUN_DIR/wandb without the network (upload later: `wandb sync`)"
)


def check_online(mode: str) -> None:
    """Before any work (rank 0 of a run with log.wandb=true): a run that logs online needs an API key and
    the W&B server within reach, else an InputError naming the way out. Without this check wandb fails
    once the model has loaded, with a traceback; without the network after 90 s of retries."""
    if (mode or os.environ.get("WANDB_MODE") or "online") not in ("online", "run"):
        return
    import wandb

    from reasonrl.network import address_for, reachable

    settings = wandb.Settings()
    if hasattr(settings, "update_from_env_vars"):  # WANDB_BASE_URL, as wandb.init reads it
        settings.update_from_env_vars(dict(os.environ))
    url = settings.base_url  # else wandb's default server
    try:  # where wandb.init looks for credentials (WANDB_API_KEY, .netrc, its settings), without the network
        from wandb.sdk.lib.wbauth import authenticate_session

        auth = authenticate_session(host=url, source="reasonrl", prompt=False, update_session=False)
    except (ImportError, AttributeError, TypeError):  # another wandb version: credentials left to wandb.init
        auth = True
    except wandb.errors.Error as e:  # a malformed key
        raise InputError(f"log.wandb=true: {str(e).splitlines()[0]}") from None
    if not auth:
        raise InputError(f"log.wandb=true logs online to {url}, but wandb has no API key here: run `wandb login`"
                         f" or set WANDB_API_KEY; or {_OFFLINE_HINT}")  # fmt: skip
    host, port = address_for(url)
    if not reachable((host, port)):
        raise InputError(f"log.wandb=true logs online, but the W&B server ({host}:{port}) cannot be reached from "
                         f"here; {_OFFLINE_HINT}")  # fmt: skip


class WandbLog:
    def __init__(self, run_dir: Path, project: str, entity: str | None, mode: str, name: str, config: dict,
                 resume: bool):  # fmt: skip
        import wandb

        id_file = run_dir / "wandb_run_id"
        run_id = id_file.read_text().strip() if resume and id_file.is_file() else None  # None: a new id
        try:
            self.run = wandb.init(project=project, entity=entity, mode=mode or None, name=name, id=run_id,
                                  resume="allow" if run_id else None, dir=str(run_dir), config=config)  # fmt: skip
        except wandb.errors.Error as e:  # one line, not wandb's traceback (`check_online` catches most first)
            raise InputError(f"log.wandb=true: wandb could not start its run ({type(e).__name__}: "
                             f"{str(e).splitlines()[0]}); {_OFFLINE_HINT}") from None  # fmt: skip
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")
        write_text(id_file, self.run.id + "\n")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log({"step": step, **metrics})

    def rollouts(self, step: int, rows: list[dict]) -> None:
        """The step's sampled rollouts (rollouts.jsonl's groups) as a table `rollouts`, one row per
        completion (as TRL's `log_completions`): step, data source, prompt, ground truth, completion,
        reward, reason, tokens, finish reason."""
        import wandb

        columns = ["step", "data_source", "prompt", "ground_truth", "completion", "reward", "reason", "tokens",
                   "finish_reason"]  # fmt: skip
        data = [[step, g["data_source"], g["prompt"], str(g["ground_truth"]), c["text"], c["reward"],
                 str(c["reason"]), c["tokens"], c["finish_reason"]]
                for g in rows for c in g["completions"]]  # fmt: skip
        if data:
            self.run.log({"step": step, "rollouts": wandb.Table(columns=columns, data=data)})

    def close(self) -> None:
        self.run.finish()
