"""A pytest plugin that stops a run gracefully at a wall-clock deadline, so its JUnit XML is still written.

The evidence command runs ``pytest -p fastpath_lib.bench.pytest_deadline`` with ``FASTPATH_PYTEST_STOP_AT`` (seconds
since the epoch): once that time has passed, the test in progress finishes and the session stops ("evidence deadline
reached"), reporting the tests that ran.
"""

from __future__ import annotations

import os
import time

ENV = "FASTPATH_PYTEST_STOP_AT"
REASON = "evidence deadline reached"


def pytest_runtest_teardown(item, nextitem):
    stop_at = os.environ.get(ENV)
    if stop_at and nextitem is not None and time.time() > float(stop_at):
        item.session.shouldstop = REASON
