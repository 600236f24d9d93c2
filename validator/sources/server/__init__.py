"""The running server: its HTTP replies, /metrics, log, attestation file, identity and readiness."""
