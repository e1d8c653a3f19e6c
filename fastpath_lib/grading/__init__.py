"""Grading of the exercise notebooks: ``python -m fastpath_lib grade PATH... [--format table|json|gradescope]``.

* :mod:`~fastpath_lib.grading.registry` — the parts of each exercise and their points, the result type.
* ``ex01_reference`` ... ``ex13_review`` — one module of checks per exercise (:mod:`fastpath_lib.exercises` is
  the short façade the notebooks import); :mod:`~fastpath_lib.grading.feedback` scores every check (``graded``) and
  words its feedback, :mod:`~fastpath_lib.grading.borrowed` catches the kit's own answers handed back,
  :mod:`~fastpath_lib.grading.vocabulary` holds the kit's outcome words and rule,
  :mod:`~fastpath_lib.grading.materials` what the notebooks show and hand to the learner's code (never an answer),
  :mod:`~fastpath_lib.grading.given` exercise 06's classes, given to exercise 07.
* :mod:`~fastpath_lib.grading.mutants` and :mod:`~fastpath_lib.grading.mutant_kernels` — the seeded faults of
  exercise 04; :mod:`~fastpath_lib.grading.fused_mutants` — exercise 12's in-place fused ops, correct and broken;
  :mod:`~fastpath_lib.grading.mutation` — the engine exercises 04, 09 and 12 share (parts per fault category).
* :mod:`~fastpath_lib.grading.cli` — executes notebooks on a copy in a fresh kernel and computes the verdict in
  its own process; :mod:`~fastpath_lib.grading.notebook` restores the distributed check cells and reads the
  learner's source for tampering; :mod:`~fastpath_lib.grading.sources` is the learner's source as read from the
  file, for source-based checks; :mod:`~fastpath_lib.grading.remote` is the grader's side of the answer channel
  (stand-ins for the learner's functions and data) and :mod:`~fastpath_lib.grading.runner` the agent in the kernel
  that only answers; :mod:`~fastpath_lib.grading.sandbox` runs the kernel under bubblewrap where it can, with only
  the materials of the grading package and without the modules its exercise forbids;
  :mod:`~fastpath_lib.grading.gradescope` writes Gradescope's ``results.json``.
"""
