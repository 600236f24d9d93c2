"""Collect one fact as seen by several sources, and say when they disagree.

Evidence that disagrees between sources (the server reports humming, the log shows FlashInfer expert
preparation) is itself a failure: one of them is lying about what runs, and the report shows both.
"""

from __future__ import annotations

from typing import Any


class Observations:
    def __init__(self, what: str) -> None:
        self.what = what
        self._seen: list[tuple[str, str, Any]] = []  # (source, role, value)

    def add(self, source: str, role: str, value: Any) -> None:
        if value is not None:
            self._seen.append((source, role, value))

    def empty(self) -> bool:
        return not self._seen

    def sources(self) -> list[str]:
        return list(dict.fromkeys(source for source, _, _ in self._seen))  # in the order first seen

    def values(self) -> set[Any]:
        return {v for _, _, v in self._seen}

    def evidence(self) -> dict[str, Any]:
        return {f"{source}.{role}": value for source, role, value in self._seen}

    def disagreement(self) -> str | None:
        by_role: dict[str, dict[str, Any]] = {}
        for source, role, value in self._seen:
            by_role.setdefault(role, {})[source] = value
        for role, seen in by_role.items():
            if len(set(map(str, seen.values()))) > 1:
                detail = ", ".join(f"{s} says {v}" for s, v in seen.items())
                return f"sources disagree on the {role}'s {self.what}: {detail}"
        return None
