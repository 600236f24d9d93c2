"""``python -m validator.daemon``: the same as ``spark-validate serve``, through the one CLI front door."""

from __future__ import annotations

import sys

from validator.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["serve", *sys.argv[1:]]))
