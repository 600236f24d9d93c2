"""The sidecar daemon behind ``spark-validate serve``: a latched verdict, a scheduler that re-checks the
server, and the endpoints that publish the verdict (readiness, liveness, Prometheus, the report).

Only the command imports this package, so ``preflight`` and ``check`` never pay for it.
"""
