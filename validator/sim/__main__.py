"""``python -m validator.sim``: the same as ``spark-validate sim``, through the one CLI front door."""

from __future__ import annotations

import sys

from validator.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["sim", *sys.argv[1:]]))
