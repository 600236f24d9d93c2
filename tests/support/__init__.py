"""Helpers shared by the tests and the benches: simulator and sidecar processes on loopback, checkpoint and
SGLang-build factories, bounded subprocess runs, hostile servers. A package, so that ``bench/`` imports it
normally (``python -m bench.NAME`` from the checkout) instead of editing ``sys.path``."""
