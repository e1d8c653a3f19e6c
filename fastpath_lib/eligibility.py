"""Generic eligibility machinery: named conditions, a predicate that runs all of them, and the decision it returns.

Nothing here imports Triton or touches a GPU, so the predicate of any fast path built on it can be tested on any
machine. The model is PyTorch's SDPA selector (``sdp_utils.cpp``): a list of small named checks, each able to say
why it failed. Unlike SDPA's default selector, :meth:`Predicate.evaluate` always runs *every* condition, so a user
sees all the reasons at once, not only the first.

A condition's check returns ``None`` when it holds, or a string naming the actual and the required value when it
does not. A check may return :data:`UNKNOWN`-prefixed text when the answer is not knowable yet (for example data
pointer alignment on a fake tensor while ``torch.compile`` traces); the decision then counts as not eligible, and the
op re-decides at run time.

Each condition also *declares* its boundary: a list of :class:`Boundary` entries, each a small change to an eligible
base case together with whether the condition should then hold. Tests and the PR note's scope section are generated
from these declarations, so the limits are written down once.

>>> p = Predicate("demo", [Condition("positive", "x > 0", lambda ctx: None if ctx > 0 else f"x={ctx}, need > 0")])
>>> p.evaluate(-1).reasons
['positive: x=-1, need > 0']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["UNKNOWN", "SPEED_PREDICTION", "Boundary", "Condition", "Decision", "Predicate", "for_speed"]

#: Prefix of a reason whose answer cannot be known yet (fake tensors at trace time).
UNKNOWN = "unknown until run time: "
#: What every speed condition's ``why`` ends with (:attr:`Condition.explained`): its cost is predicted, not measured.
SPEED_PREDICTION = ("a speed condition: that the kernel is slower than the fallback outside it is a prediction until a "
                    "GPU run measures it")


@dataclasses.dataclass(frozen=True)
class Boundary:
    """One declared boundary point of a condition.

    Args:
        label: short name shown in test ids and tables, e.g. ``"cols=limit+1"``.
        change: overrides applied to the predicate's eligible base case. Either a dict, or a callable taking the
            limits in force (what ``OpSpec.limits(device)`` returns: a dataclass, a namespace, any object) and
            returning the dict, for boundaries that depend on the device. The concrete overrides under given limits
            are :func:`fastpath_lib.boundary.overrides`'s: not a method here, so that a module that hands out the
            predicate (exercise 04's) hands out no reader of its declared boundaries.
        holds: whether the condition should hold for the changed case.
    """

    label: str
    change: dict[str, Any] | Callable[[Any], dict[str, Any]]
    holds: bool


@dataclasses.dataclass(frozen=True)
class Condition:
    """A named eligibility condition.

    Args:
        name: identifier used in reasons, e.g. ``"dtype"``.
        requirement: the rule in words, for docs and the PR note, e.g. ``"input dtype is fp16, bf16 or fp32"``.
        check: ``check(ctx) -> None | str``; ``None`` when the condition holds, otherwise the reason without the
            name (it is prefixed automatically).
        category: the review category (device, architecture, dtype, shape, stride, alignment, mode).
        why: why the condition exists: what it protects, in facts about the code (no timing).
        boundaries: declared boundary points, see :class:`Boundary`.
        speed: the condition keeps calls off the kernel for speed, not for correctness or semantics: the kernel runs,
            correct, on both sides of it, and is predicted slower outside (a limit outside which no kernel launches
            bounds what the kernels support, and is not one); its :attr:`explained` text then says the cost is a
            prediction (:data:`SPEED_PREDICTION`).
    """

    name: str
    requirement: str
    check: Callable[[Any], str | None]
    category: str = "other"
    why: str = ""
    boundaries: tuple[Boundary, ...] = ()
    speed: bool = False

    @property
    def explained(self) -> str:
        """``why`` as docs, lessons and PR notes show it: a speed condition's ends with :data:`SPEED_PREDICTION`.

        >>> c = Condition("rows", "rows >= 8", lambda ctx: None, why="a small call moves few bytes", speed=True)
        >>> c.explained == "a small call moves few bytes; " + SPEED_PREDICTION
        True
        """
        return f"{self.why}; {SPEED_PREDICTION}" if self.speed else self.why


def for_speed(condition: Condition) -> Condition:
    """``condition`` marked as kept for speed (:attr:`Condition.speed`), as a declaration reads it:
    ``for_speed(Condition(...))``."""
    return dataclasses.replace(condition, speed=True)


@dataclasses.dataclass(frozen=True)
class Decision:
    """The outcome of a predicate: plain Python values, safe to print, compare and serialise.

    Attributes:
        eligible: every condition holds.
        route: ``"triton"`` when eligible, else ``"fallback"``.
        reasons: one entry per failed (or not yet knowable) condition, ``"<name>: <actual>, <required>"``.
        failed: the names of the failed conditions, in declaration order.
    """

    eligible: bool
    route: str
    reasons: list[str]
    failed: list[str]

    def __str__(self) -> str:
        if self.eligible:
            return f"route={self.route} (all conditions hold)"
        return f"route={self.route}\n" + "\n".join(f"  - {r}" for r in self.reasons)

    def _repr_html_(self) -> str:  # shown by JupyterLab
        import html

        items = "".join(f"<li><code>{html.escape(r)}</code></li>" for r in self.reasons)
        head = f"<b>route: {html.escape(self.route)}</b>"
        return head + (f"<ul>{items}</ul>" if items else " &mdash; all conditions hold")


class Predicate:
    """An ordered list of conditions for one fast path.

    Args:
        name: the fast path's name.
        conditions: the conditions, in the order their reasons are reported.
        fast_route: the route name when every condition holds.
        fallback_route: the route name otherwise.
    """

    def __init__(self, name: str, conditions: Iterable[Condition], *, fast_route: str = "triton",
                 fallback_route: str = "fallback") -> None:
        self.name = name
        self.conditions: tuple[Condition, ...] = tuple(conditions)
        names = [c.name for c in self.conditions]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate condition names in {name}: {names}")
        self.fast_route = fast_route
        self.fallback_route = fallback_route

    def __getitem__(self, name: str) -> Condition:
        for c in self.conditions:
            if c.name == name:
                return c
        raise KeyError(name)

    def check_one(self, name: str, ctx: Any) -> str | None:
        """The reason ``name`` fails on ``ctx`` (``None`` when it holds)."""
        return self[name].check(ctx)

    def evaluate(self, ctx: Any) -> Decision:
        """Run every condition on ``ctx`` and return the :class:`Decision`."""
        reasons, failed = [], []
        for cond in self.conditions:
            why = cond.check(ctx)
            if why is not None:
                reasons.append(f"{cond.name}: {why}")
                failed.append(cond.name)
        eligible = not failed
        return Decision(eligible, self.fast_route if eligible else self.fallback_route, reasons, failed)

    def table(self, limits: Any = None) -> list[dict[str, str]]:
        """One row per condition (name, category, requirement, why, boundaries) for docs and the PR note."""
        rows = []
        for c in self.conditions:
            pts = ", ".join(f"{b.label} ({'in' if b.holds else 'out'})" for b in c.boundaries)
            rows.append({"condition": c.name, "category": c.category, "requirement": c.requirement,
                         "why": c.explained, "boundary points": pts})
        return rows

    def markdown_table(self, limits: Any = None) -> str:
        """:meth:`table` as a Markdown table."""
        rows = self.table(limits)
        cols = ["condition", "category", "requirement", "why", "boundary points"]
        out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        out += ["| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |" for r in rows]
        return "\n".join(out)

    def categories(self) -> Sequence[str]:
        """The distinct categories covered, in declaration order."""
        return list(dict.fromkeys(c.category for c in self.conditions))
