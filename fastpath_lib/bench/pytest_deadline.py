"""A pytest plugin that stops a run gracefully at a wall-clock deadline, so its JUnit XML is still written.

The evidence command runs ``pytest -p fastpath_lib.bench.pytest_deadline`` with ``FASTPATH_PYTEST_STOP_AT`` (seconds
since the epoch): once that time has passed, the test in progress finishes and the session stops ("evidence deadline
reached"), reporting the tests that ran. It also prints how many tests were collected (``COLLECTED_LINE``), so the
evidence run can say "collected N, ran M" of a session it stopped.
"""

from __future__ import annotations

import os
import time

ENV = "FASTPATH_PYTEST_STOP_AT"
REASON = "evidence deadline reached"
#: The line this plugin prints once collection is done (``{n}`` the number of tests selected to run).
COLLECTED_LINE = "fastpath-deadline: {n} tests selected"


def pytest_collection_finish(session):
    print("\n" + COLLECTED_LINE.format(n=len(session.items)), flush=True)


def pytest_runtest_teardown(item, nextitem):
    stop_at = os.environ.get(ENV)
    if stop_at and nextitem is not None and time.time() > float(stop_at):
        item.session.shouldstop = REASON
