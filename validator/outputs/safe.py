"""The last line of defence against leaking secrets: every output renders from a redacted copy."""

from __future__ import annotations

from typing import Any

from validator.report import Report

SECRET_KEYS = ("api_key", "admin_api_key", "password", "secret", "authorization")
REDACTED = "<redacted>"


def _is_secret_key(key: str, extra: tuple[str, ...]) -> bool:
    k = key.lower()
    return k in extra or any(s == k or k.endswith("_" + s) or k.startswith(s) for s in SECRET_KEYS)


def redact_obj(obj: Any, extra: tuple[str, ...] = ()) -> Any:
    if isinstance(obj, dict):
        return {
            k: (
                REDACTED
                if isinstance(k, str) and _is_secret_key(k, extra) and v is not None
                else redact_obj(v, extra)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact_obj(v, extra) for v in obj]
    return obj


def safe_dict(report: Report, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    data: dict[str, Any] = redact_obj(report.model_dump(mode="json"), tuple(s.lower() for s in secrets))
    return data
