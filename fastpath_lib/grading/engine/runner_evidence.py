"""The grader's tamper evidence in the learner's kernel: what switches off or sidesteps the agent's call watch,
recorded by an audit hook and sealed into every answer (:func:`_evidence`).

This text runs in the learner's kernel after :mod:`~fastpath_lib.grading.engine.runner`'s, in the same namespace
(:class:`fastpath_lib.grading.engine.remote.Session` executes the agent's texts in order), where the grader asks for
it; like the agent, it imports nothing of the grader. The grader reads the record
(:meth:`fastpath_lib.grading.engine.remote.Session.evidence`) and reports the parts it touches "tampered".
"""
# ruff: noqa: F821 - _WATCH_EVENTS and the agent's functions are runner.py's, defined in the same namespace

import sys
import types


def _evidence(namespace):
    """Install the tamper evidence: an audit hook (no code can remove one) that records what in the kernel switches
    off or sidesteps the call watch (:func:`_watched`) or the agent, and seals the record into every answer.

    It records, with the place in the notebook's code (the innermost frame outside the interpreter's and the
    installed packages' files and the agent's code):

    * ``sys.setprofile`` and ``sys.settrace`` during a watched call (also raised from C: through ``map``, by
      ``ctypes``'s ``PyEval_SetProfile``/``PyEval_SetTrace``, in any thread), and a tracer set outside one that is on
      when a watched call starts (each call sets its watch anew, so a profile function set between calls, a profiler in
      a scratch cell, does nothing to it; a tracer set before the agent, a coverage tool's, is not counted), made by any
      code but the watch's own (``_watched``'s code object, by identity, while it runs: a copy of its text is other
      code). No library's own call is excused: one that a learner's code can call could switch the watch off for it
      (none that grading an honest notebook runs calls them: torch only in its debugging tools, IPython in its debugger
      and profiling magics, dynamo not at all: it replaces the frame evaluation function, which raises no event and
      leaves the profile function alone; Triton's interpreter and ipykernel not at all);
    * ``ctypes`` events and walks of the garbage collector's objects whose caller (past ``ctypes``'s own frames) is
      the notebook's code, as the agent's record is in the kernel's memory; a library's own use (triton loads its
      driver through ``ctypes`` when imported) is excused, as the library's code chooses what it loads;
    * a thread started while a call is watched (the watch sees the call that starts it; the new thread's calls are
      unwatched), and a thread whose stack holds the notebook's code when a watched call starts or ends (one started
      earlier that the call hands its work to), the watch run by other code than the agent, a new code, defaults or
      keyword defaults of the agent's functions, and a name of the agent's namespace bound to another object than when
      it was installed;
    * code that imitates the agent's own events (``fastpath.*``) from elsewhere.

    It also seals the first forbidden call the watch sees in each watched call (an ``F`` line, not tampering): the
    grader refuses that call's answer even where the learner's code emptied the watch's own list or rewrote the
    agent's error answer.

    The seal: the grader's key (:meth:`fastpath_lib.grading.engine.remote.Session.start`, before the learner's first
    cell) stays in this hook's closure; each answer carries the record since the previous answer, its number and a
    keyed hash (BLAKE2b) of both, the grader's number for the request and the answer. Code that answers for the agent
    cannot seal, the record cannot be dropped from an answer, and an answer sealed for a request the grader did not
    make leaves a gap in the numbers.

    What it cannot see: Python code can read and write anything in its own process, so code that reaches this hook's
    closure (a garbage collector walk or ``ctypes``, themselves recorded, refused outright where the exercise makes
    operators absent, :mod:`~fastpath_lib.grading.engine.absent`) can empty the record before the next answer; code in a
    file of an installed package's name (a file name is only a name) has its ``ctypes`` use excused (what ctypes can do
    to the watch still raises the events above); a thread started before the call that shows none of the notebook's code
    when the call starts and ends (an idle worker of a thread pool the notebook made, which the call hands work to), and
    reads of the agent's frames (``sys._getframe``, ``f_back``) are not recorded; nor is a change inside an object the
    agent runs on outside its namespace (``torch.save``, the shell's kernel): those give the learner's code a say in
    what an answer holds, never a seal of the grader's.
    The hook calls no code the notebook can replace (the builtins and methods it uses are taken at installation) and
    never raises, so no traceback exposes its frame.
    """
    import hashlib
    import os
    import sysconfig

    getframe, blake, join, bjoin, startswith, same = sys._getframe, hashlib.blake2b, "".join, b"".join, \
        str.startswith, str.__eq__
    number, size, kind, ident, to_bytes = int.__repr__, len, type, id, int.to_bytes
    function, missing = types.FunctionType, object()
    frames, thread, gettrace = sys._current_frames, __import__("_thread").get_ident, sys.gettrace
    roots = [sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    library = tuple({os.path.join(p, "") for r in roots for p in (r, os.path.realpath(r))}) + ("<frozen ",)
    ctypes_dir = tuple({os.path.join(p, "ctypes", "") for r in roots[:2] for p in (r, os.path.realpath(r))})
    watch_events, heap_events = _WATCH_EVENTS, _HEAP_EVENTS
    snapshot = dict(namespace)
    names = {id(f): n for n, f in snapshot.items() if type(f) is function}
    codes = {id(f.__code__): f.__code__ for f in snapshot.values() if type(f) is function}
    watched, serve, answer = (snapshot[n].__code__ for n in ("_watched", "_serve", "_answer"))
    watch, saw = (next(c for c in watched.co_consts if kind(c) is types.CodeType and c.co_name == n)
                  for n in ("watch", "saw"))
    state = {"key": None, "seq": 0, "depth": 0, "tracer": None}  # tracer: where one was set outside a watched call
    pending, noted = [], {}
    outside = "outside the notebook's code"

    def agent(code):
        return codes.get(ident(code)) is code

    def notebook(code):
        name = code.co_filename
        return not (agent(code) or startswith(name, library) or same(name, "<fastpath grader agent>"))

    def where(frame):
        while frame is not None and not notebook(frame.f_code):
            frame = frame.f_back
        if frame is None:
            return outside
        qual = frame.f_code.co_qualname
        return join(["in a cell" if same(qual, "<module>") else join(["in ", qual]), " (line ",
                     number(frame.f_lineno), ")"])

    def note(text, frame=None, why="", at=None):
        place = join([" ", at]) if at is not None else "" if frame is None else join([" ", where(frame)])
        first = join(["W" if state["depth"] > 0 else "N", "your code ", text, place.split(" (line")[0]])
        if first not in noted and size(pending) < 64:  # once an answer per place (a function, a cell)
            noted[first] = None
            pending.append(join([first[:1], "your code ", text, place, why]))

    def seal(frame, args):
        if frame.f_code is not serve or frame.f_globals is not namespace or state["key"] is None or size(args) != 3 \
                or kind(args[0]) is not bytes or kind(args[1]) is not bytes or kind(args[2]) is not list:
            return note("imitates the grader's agent (fastpath.seal)", frame)
        changed = [n for n, v in snapshot.items() if namespace.get(n, missing) is not v]
        if changed:
            note(join(["replaced the grader's agent's ", ", ".join(changed)]))
        state["seq"] += 1
        record = "\n".join(pending).encode("utf-8", "replace")
        del pending[:]
        noted.clear()
        message = bjoin([to_bytes(state["seq"], 8, "big"), args[0], to_bytes(size(args[1]), 8, "big"), args[1],
                         record])
        args[2].append((state["seq"], record, blake(message, key=state["key"], digest_size=32).hexdigest()))

    def hook(event, args):  # its caller's frame is the one that raised the event (react's getframe(2))
        try:
            react(event, args)
        except BaseException:  # noqa: BLE001, S110 - an exception would carry this frame to the notebook
            pass

    def beside():
        """Each other thread whose stack holds the notebook's code, at a watched call's start and end."""
        me = thread()
        for other, top in frames().items():
            if other != me and where(top) is not outside:
                note("runs a thread beside the grader's call", top, ", whose calls the watch does not see")

    def react(event, args):
        if event in watch_events:
            frame = getframe(2)
            if frame.f_code is watched and state["depth"] == 1:
                return  # the watch's own switch on and off
            if state["depth"] == 0:  # each watched call sets its watch anew: only a tracer left on matters
                if same(event, "sys.settrace"):
                    state["tracer"] = where(frame)
                return
            if same(event, "sys.setprofile"):
                note("switched off the grader's call watch (sys.setprofile)", frame)
            else:
                note("installed a tracer (sys.settrace)", frame, ", whose code the grader's call watch does not see")
        elif startswith(event, "ctypes."):
            frame = getframe(2)
            while frame is not None and startswith(frame.f_code.co_filename, ctypes_dir):
                frame = frame.f_back
            if frame is not None and notebook(frame.f_code):
                note(join(["reached into the interpreter through ctypes (", event, ")"]), frame)
        elif event in heap_events:
            frame = getframe(2)
            if notebook(frame.f_code):
                note(join(["walked the garbage collector's objects (", event, ")"]), frame,
                     ", where the grader's agent keeps its record")
        elif same(event, "object.__setattr__"):
            if size(args) > 1 and ident(args[0]) in names:
                note(join(["replaced the ", args[1] if kind(args[1]) is str else "?", " of the grader's agent's ",
                           names[ident(args[0])]]), getframe(2))
        elif startswith(event, "fastpath."):
            frame = getframe(2)
            if same(event, "fastpath.seal"):
                seal(frame, args)
            elif same(event, "fastpath.forbidden") and frame.f_code is saw and state["depth"] > 0:
                if size(pending) < 64 and kind(args[0]) is str:
                    pending.append(join(["F", args[0]]))  # a call the watch saw: the grader refuses the answer
            elif frame.f_code is not watched and frame.f_code is not answer and frame.f_code is not watch:
                note(join(["imitates the grader's agent (", event, ")"]), frame)
            elif same(event, "fastpath.key") and frame.f_code is answer and state["key"] is None \
                    and kind(args[0]) is bytes:
                state["key"] = args[0]
            elif same(event, "fastpath.watch") and frame.f_code is watched:
                if args[0] == 1:
                    state["depth"] += 1
                    if state["depth"] > 1:
                        note("ran the grader's call watch itself (_watched)", frame)
                    if state["tracer"] is not None and gettrace() is not None:
                        note("installed a tracer (sys.settrace)", None, ", which is on when the grader's call starts: "
                             "its code is not watched", state["tracer"])
                beside()
                if args[0] != 1:
                    state["depth"] -= 1
            elif same(event, "fastpath.tamper") and frame.f_code is watch:
                note(args[0], args[1], args[2])
            else:
                note(join(["imitates the grader's agent (", event, ")"]), frame)

    sys.addaudithook(hook)


if __name__ == "<fastpath grader agent>" and globals().get("_FASTPATH_TAMPER"):
    _evidence(globals())
