"""`python -m reasonrl ...` (and `torchrun ... -m reasonrl train RECIPE`): the `reasonrl` command."""

from reasonrl.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
