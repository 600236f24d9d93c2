"""The path-forking machinery: how the reader follows every path through a script without running it.

Where a condition is known only at run time (a program's status, a ``[[ ]]`` on an unknown value), the
evaluator asks ``Forks.decide`` which way to go. A path is replayed from the start with its decisions
given as a prefix: the forks it meets beyond the prefix take their first alternative, and each other
alternative becomes a new prefix to replay (depth first, the first alternatives first). Replaying instead
of copying the state at each fork keeps the evaluator free of undo logic. It knows nothing of bash.
"""

from __future__ import annotations

from collections.abc import Callable


class Forks:
    """The decisions of one path: those given (``prefix``), then the first alternative at each fork met
    beyond it; ``taken`` says in words what each fork assumed, for the report."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = prefix
        self.widths: list[int] = []  # how many alternatives each fork met had, in order
        self.taken: list[str] = []  # what each fork assumed

    def decide(self, n: int, labels: list[str], where: str) -> int:
        """The alternative (0 to ``n - 1``) this path takes at its next fork; ``labels`` names each one."""
        k = len(self.widths)
        self.widths.append(n)
        choice = self.prefix[k] if k < len(self.prefix) else 0
        self.taken.append(f"{where}: {labels[choice]}")
        return choice

    def untaken(self) -> list[list[int]]:
        """The prefixes of the paths that part from this one beyond its prefix, the last to explore first."""
        out: list[list[int]] = []
        for k in range(len(self.widths) - 1, len(self.prefix) - 1, -1):
            for alt in range(self.widths[k] - 1, 0, -1):
                out.append([*self.prefix, *([0] * (k - len(self.prefix))), alt])
        return out


def explore(walk: Callable[[Forks], None], limit: int) -> bool:
    """Run ``walk`` once per path, each time with that path's ``Forks``; False when more than ``limit``
    paths remained to walk (the rest are not walked)."""
    stack: list[list[int]] = [[]]
    walked = 0
    while stack:
        prefix = stack.pop()
        if walked >= limit:
            return False
        forks = Forks(prefix)
        walk(forks)
        walked += 1
        stack.extend(forks.untaken())
    return True
