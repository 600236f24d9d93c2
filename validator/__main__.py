"""`python -m validator` is the same front door as the `spark-validate` console script."""

from validator.cli import main

raise SystemExit(main())
