"""Speed measurements, run from the checkout as ``python -m bench.NAME`` (each prints a table with ratios to a
baseline measured in the same run)."""
