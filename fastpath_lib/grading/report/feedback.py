"""What every exercise check shares: running a graded part, turning a learner's error into feedback, showing results.

Every check scores through :func:`graded`: it hands ``graded`` the names of its parts and a grade function, which
returns one :class:`Result` per part (:func:`passed` for a part that passed, :func:`part` for a part judged on its
own); an exception the grade function raises, the learner's or a :class:`Fail` with the text the learner sees, fails
every named part with that feedback. A learner's own exception never escapes a check; it becomes "your code raised
..." with the line of the learner's code that raised it.

>>> r = part("ex01", "default_eps", lambda: None)
>>> r.passed, r.points
(True, 1)
"""

from __future__ import annotations

import numbers
import os
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path

from fastpath_lib.grading.engine.remote import RemoteError
from fastpath_lib.grading.registry import Result, points_of

#: checks score through :func:`graded`; the display of results (``_emit``) is private to this module.
__all__ = ["Fail", "graded", "part", "passed", "call", "describe_error", "table", "dtype_name", "case_label", "hold",
           "real", "truth"]


class Fail(Exception):
    """Raised inside a check to fail the part with a message."""


def _emit(results: list[Result], show: bool):
    """Display ``results`` (in a notebook: readable text plus a JSON copy) and return ``None``; with ``show=False``
    return them instead."""
    if not show:
        return results
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            for r in results:
                display(r.bundle(), raw=True)
            return None
    except ImportError:
        pass
    for r in results:
        print(r.text())
    return None


#: Folders whose code is not the learner's: the kit and the installed libraries (torch, triton, the standard library).
_LIBRARY_DIRS = tuple(str(Path(d).resolve()) for d in {str(Path(__file__).resolve().parents[2]),
                                                       *(sysconfig.get_paths()[k] for k in ("stdlib", "purelib",
                                                                                            "platlib"))})


def _learners(filename: str) -> bool:
    """Whether a traceback frame's file holds the learner's code (a notebook cell, an exercise file, an ``exec``)."""
    if filename.startswith("<") and not filename.startswith("<frozen"):
        return True
    try:
        path = str(Path(filename).resolve())
    except (OSError, ValueError):
        return True
    return not any(path == d or path.startswith(d + os.sep) for d in _LIBRARY_DIRS)


def describe_error(exc: BaseException) -> str:
    """One line of feedback for an exception raised by learner code (or a :class:`Fail`).

    The line named is the innermost one of the learner's own code, not torch's or the kit's. An exception with no
    frame of the learner's code in its traceback was raised by the check itself, while it read what the learner's code
    returned, or by a fault of the grader: the feedback says so instead of blaming a line of the learner's.
    """
    if isinstance(exc, Fail):
        return str(exc)
    if isinstance(exc, NotImplementedError):
        return "not implemented yet: your code still raises NotImplementedError"
    name = type(exc).__name__
    msg = str(exc).strip().splitlines()
    first = msg[0][:300] if msg else ""
    chain = f"{name} {exc} {exc.__cause__!r} {exc.__context__!r}"  # Triton's CompilationError wraps the raise
    if "NotImplementedError" in chain:
        return "not implemented yet: your code still raises NotImplementedError"
    where = str(getattr(exc, "fastpath_where", "") or "")  # raised in the learner's kernel: the line it named
    if not where and not isinstance(exc, RemoteError):
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if _learners(f.filename)]
        if not frames:
            return (f"the check raised {name}: {first} (in the grader's code, not in a line of yours: check what your "
                    "code returns; if it looks right, tell your course staff)")
        frame = frames[-1]
        where = f" (line {frame.lineno}: {frame.line})" if frame.line else f" (line {frame.lineno})"
    return f"your code raised {name}: {first}{where}"


def passed(exercise: str, name: str, note: str | None = None) -> Result:
    """The part ``name`` passed, with ``note`` as its feedback."""
    return Result(exercise, name, points_of(exercise, name), True, note or "")


def part(exercise: str, name: str, fn: Callable[..., str | None], *args) -> Result:
    """Run ``fn(*args)``, one part judged apart from the others of its check: it returns ``None`` (or a note) when
    the part passes and raises :class:`Fail` when not."""
    try:
        return passed(exercise, name, fn(*args))
    except Exception as exc:  # noqa: BLE001 - a learner's bug must become feedback, never a crash
        return Result(exercise, name, points_of(exercise, name), False, describe_error(exc))


def _failed_parts(exercise: str, names, exc: BaseException) -> list[Result]:
    """Every part in ``names`` failed with the feedback for ``exc``."""
    fb = describe_error(exc)
    return [Result(exercise, n, points_of(exercise, n), False, fb) for n in names]


def graded(exercise: str, names, grade, *args, show: bool = True, subject: str = ""):
    """:func:`_emit` what ``grade(*args)`` returns (a list of :class:`Result`); an exception, the learner's bug or a
    :class:`Fail`, becomes the feedback of every part in ``names``, never a crash. With ``subject`` (what was graded,
    when the notebook chooses it: exercise 08's operator), every result names it, failed ones included.

    >>> def grade(answer):
    ...     if answer != 42:
    ...         raise Fail(f"got {answer}, expected 42")
    ...     return [passed("ex01", "default_eps", "right")]
    >>> [(r.passed, r.feedback) for r in graded("ex01", ("default_eps",), grade, 41, show=False)]
    [(False, 'got 41, expected 42')]
    >>> [(r.passed, r.feedback) for r in graded("ex01", ("default_eps",), grade, 42, show=False)]
    [(True, 'right')]
    """
    try:
        results = grade(*args)
    except Exception as exc:  # noqa: BLE001 - a learner's bug must become feedback, never a crash
        results = _failed_parts(exercise, names, exc)
    if subject:
        results = [r.with_subject(subject) for r in results]
    return _emit(results, show)


def call(fn, *args):
    """Call learner code; a ``None`` result is a failure (the stub returned nothing)."""
    if not callable(fn):
        raise Fail(f"expected a function, got {type(fn).__name__}: {fn!r:.80}")
    out = fn(*args)
    if out is None:
        raise Fail("your function returned None (is the stub still in place?)")
    return out


def _item(v):
    """A scalar's own value: ``v.item()`` for a numpy scalar, a 0-d array or a 0-d tensor (also when ``v`` comes over
    the answer channel), else ``v``."""
    try:
        if not isinstance(v, (numbers.Number, str)) and getattr(v, "ndim", None) == 0:
            return v.item()
    except Exception:  # noqa: BLE001 - an object that only looks like a scalar is not one
        pass
    return v


def real(v) -> float | None:
    """``v`` as a float when it is a real number in any type honest code returns (a Python ``int`` or ``float``, a
    numpy scalar, a 0-d array or tensor); ``None`` for anything else, bools included (``True`` is no count).

    >>> import numpy as np
    >>> real(np.int64(1024)), real(16), real(True), real("16")
    (1024.0, 16.0, None, None)
    """
    v = _item(v)
    return float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else None


def truth(v) -> bool | None:
    """``v`` as a bool when it is one in any type honest code returns (``bool``, numpy's ``bool_``, a 0-d bool
    tensor); ``None`` for anything else, numbers included.

    >>> import numpy as np
    >>> truth(np.bool_(True)), truth(False), truth(1)
    (True, False, None)
    """
    v = _item(v)
    return v if isinstance(v, bool) else None


def _shown(yours, expected) -> tuple:
    """The two cells as text, each with its type when the texts agree but the types do not (``1024 (int64)`` against
    ``1024 (int)``): a row marked different never shows two identical texts."""
    a, b = str(yours), str(expected)
    if a == b and type(yours) is not type(expected):
        return f"{a} ({type(yours).__name__})", f"{b} ({type(expected).__name__})"
    return a, b


def table(rows: list[tuple], header: tuple) -> str:
    """A plain-text table with a rule under the header. Where the header has a ``yours`` and an ``expected`` column,
    two cells whose texts agree but whose types differ show their types."""
    rows = [tuple(r) for r in rows]
    if "yours" in header and "expected" in header:
        i, j = header.index("yours"), header.index("expected")
        for k, r in enumerate(rows):
            cells = list(r)
            cells[i], cells[j] = _shown(r[i], r[j])
            rows[k] = tuple(cells)
    cells = [tuple(str(c) for c in header)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def dtype_name(d) -> str:
    """``float16`` for ``torch.float16``."""
    return str(d).replace("torch.", "")


def case_label(spec) -> str:
    """``spec.label()`` plus the fields it leaves out (weight offset, scale)."""
    lab = spec.label()
    lab += f" woff{spec.weight_offset}" if spec.weight_offset else ""
    return lab + (f" scale={spec.scale:g}" if spec.scale != 1.0 else "")


def hold(b: bool) -> str:
    """``holds`` / ``fails``."""
    return "holds" if b else "fails"
