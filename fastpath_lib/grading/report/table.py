"""The grader's score table (``python -m fastpath_lib grade``'s default output), and the status words it reads."""

from __future__ import annotations

from pathlib import Path

from fastpath_lib.grading.registry import EXERCISES, TITLES

__all__ = ["HELD", "print_table"]

#: The status of a part, or a notebook, whose checks run in the course's autograder only (a student release).
HELD = "graded by the autograder only"


def _first_line(text: str, width: int = 70) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def print_table(grades, verbose: bool) -> None:
    """One row per part, then one line per notebook and the score (parts :data:`HELD` are counted apart)."""
    rows = [("exercise", "part", "points", "passed", "feedback")]
    for g in grades:
        if not g.parts:
            rows.append((Path(g.path).name, "-", "0/0", "no", _first_line(g.reason)))
        for p in g.parts:
            rows.append((p.exercise, p.part, f"{p.earned}/{p.points}", "yes" if p.passed else "no",
                         _first_line(p.feedback)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 8)
    print()
    for g in grades:
        title = TITLES.get(g.exercise or "", "")
        status = g.status + (f": {g.reason}" if g.reason else "")
        print(f"{Path(g.path).name}: {g.earned}/{g.points} ({title}; {g.seconds:.1f} s; {status}; kernel "
              f"{g.isolation})")
        for note in g.notes:
            print(f"  note: {note}")
        if verbose:
            for p in g.parts:
                if "\n" in p.feedback:  # a passed part's too: free prose shown for a person to read is there
                    print(f"  {p.part}:\n" + "\n".join("    " + x for x in p.feedback.splitlines()))
    total, maximum = sum(g.earned for g in grades), sum(g.points for g in grades)
    held = sum(pts for g in grades for p in g.parts if p.feedback.startswith(HELD) for part, pts in
               EXERCISES.get(p.exercise, ()) if part == p.part)
    print(f"score: {total}/{maximum}" + (f" ({held} more points are {HELD}: this copy leaves out their checks)"
                                         if held else ""))
