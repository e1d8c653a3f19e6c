"""Stand-ins for the checks a course's student release leaves out: the release appends one line per check to the
student's copy of this module (``check_readiness = held_by_autograder(...)``), and the student's
``fastpath_lib.exercises`` imports them from here (:mod:`fastpath_lib.release`). The kit holds every check, so its
own copy has none.

>>> check = held_by_autograder("check_readiness", "ex13", "review readiness", "the scenario keys")
>>> check(None, show=False)
[]
"""

from __future__ import annotations

__all__ = ["held_by_autograder"]


def held_by_autograder(name: str, exercise: str, title: str, what: str):
    """A check this copy of the kit does not hold: calling it says the course's autograder runs it (with
    ``show=False`` it returns no results)."""

    def check(*args, show=True, **kwargs):
        text = (f"{exercise} · {title}: this check runs in your course's autograder only; the student release "
                f"leaves it out ({what}). Submit the notebook to get its feedback.")
        if show:
            print(text)
            return None
        return []

    check.__name__ = check.__qualname__ = name
    return check
