"""`reasonrl export RUN_DIR_OR_CHECKPOINT OUT_DIR [--best] [--with-optimizer] [--push-to-hub ORG/NAME [--public]]`:
a consolidated Hugging Face model with its model card, optionally uploaded to the Hub.

Owns: the command's arguments and checking them before any work. Does not own: the export, the card
or the upload (`reasonrl.publish`).
"""

from __future__ import annotations

import json
import sys


def _export(args) -> int:
    from reasonrl.publish.export import export

    if args.push_to_hub:
        from reasonrl.publish.hub import check_repo_id

        check_repo_id(args.push_to_hub)
    source = args.source
    if args.best:
        from reasonrl.engines.checkpoint import best_checkpoint

        source = best_checkpoint(source)
    out = export(
        source, args.out, log=lambda m: print(m, file=sys.stderr), with_optimizer=args.with_optimizer
    )
    if args.push_to_hub:
        from reasonrl.publish.hub import push_folder, upload_failed

        try:
            out["hub"] = push_folder(args.out, args.push_to_hub, private=not args.public)
        except Exception as e:  # (before: the network's traceback, the export written)
            raise upload_failed(e, "--push-to-hub", args.out, args.push_to_hub, f"the export is in {args.out}; "
                                f"retry with: huggingface-cli upload {args.push_to_hub} {args.out}") from e  # fmt: skip
    print(json.dumps(out))
    return 0


def add_export_parser(sub) -> None:
    x = sub.add_parser(
        "export", help="a consolidated Hugging Face model (with a model card) from a run or checkpoint"
    )
    x.add_argument("source", help="run directory (its newest valid checkpoint) or a checkpoint directory")
    x.add_argument("out", help="new output directory")
    x.add_argument("--best", action="store_true",
                   help="source is a run directory: export its best checkpoint (checkpoint.keep_best)")  # fmt: skip
    x.add_argument("--with-optimizer", action="store_true",
                   help="also training_state/ (optimizer, scheduler, RNG) to resume from the export")  # fmt: skip
    x.add_argument(
        "--push-to-hub", metavar="ORG/NAME", default=None, help="upload the folder to this Hub repository"
    )
    x.add_argument(
        "--public", action="store_true", help="create the Hub repository public (default: private)"
    )
    x.set_defaults(fn=_export)
