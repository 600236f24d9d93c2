"""``python -m validator.daemon``: the same as ``spark-validate serve``, usable on its own."""

from __future__ import annotations

import argparse
import sys

from validator.commands import serve
from validator.errors import ValidatorError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validator.daemon")
    serve.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return serve.run(args)
    except ValidatorError as exc:
        sys.stderr.write(f"spark-validate: {exc}\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
