"""Exceptions that mean "the input is wrong", not "the code is wrong".

Owns: `InputError` (a data file, row, recipe, option or directory that cannot be used; the message
names the place). The CLI prints these as one line `reasonrl: error: ...` with exit status 2 and keeps
tracebacks for everything else (real bugs), unless `--debug`. Does not own: any check itself.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input; the message names the file / row / field or the config key."""
