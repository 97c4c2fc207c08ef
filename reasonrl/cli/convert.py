"""`reasonrl convert {verl,trl,openrlhf} FILE [-o RECIPE.yaml] [--overwrite]`: another trainer's recipe (a
verl launch script, a TRL GRPOConfig YAML / JSON, an OpenRLHF launch script) as a reasonrl recipe, with a
note per setting left out or derived.

Owns: the command's arguments, writing the recipe (atomically; an existing file only with --overwrite),
its header of notes, and loading it back to say whether it trains as it is. Does not own: the key
mapping (`config.foreign`, `config.from_verl`, `config.from_trl`, `config.from_openrlhf`).
"""

from __future__ import annotations

import sys
from pathlib import Path


def _convert(args) -> int:
    import yaml

    from reasonrl.config import ConfigError, load_config
    from reasonrl.config.foreign import convert
    from reasonrl.errors import InputError

    if args.out and Path(args.out).exists() and not args.overwrite:
        raise InputError(f"{args.out} exists; pass --overwrite to replace it")
    result = convert(args.source, args.file)
    header = [f"# Converted by `reasonrl convert {args.source} {args.file}` (docs/porting.md).",
              *(f"# - {note}" for note in result.notes)]  # fmt: skip
    text = "\n".join(header) + "\n" + yaml.safe_dump(result.recipe, sort_keys=False)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if not args.out:
        print(text, end="")
        return 0
    from reasonrl.data.files import write_text

    write_text(args.out, text)
    try:
        load_config(args.out)
        print(f"wrote {args.out}; train it with: reasonrl train {args.out}", file=sys.stderr)
    except ConfigError as e:  # written all the same: the user edits what only they know (paths, steps)
        print(f"wrote {args.out}; it does not load as it is, edit it first: {e}", file=sys.stderr)
    return 0


def add_convert_parser(sub) -> None:
    c = sub.add_parser(
        "convert", help="a verl / OpenRLHF launch script or a TRL GRPOConfig file as a reasonrl recipe"
    )
    c.add_argument("source", choices=["verl", "trl", "openrlhf"], help="the trainer the file is for")
    c.add_argument("file", help="verl: the launch script (or a file of key=value overrides); trl: YAML / JSON; "
                   "openrlhf: the launch script (python -m openrlhf.cli.train_ppo_ray ...)")  # fmt: skip
    c.add_argument("-o", "--out", default=None, help="the recipe file to write (default: print it)")
    c.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    c.set_defaults(fn=_convert)
