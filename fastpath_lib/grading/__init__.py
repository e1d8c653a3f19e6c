"""Grading of the exercise notebooks: ``python -m fastpath_lib grade PATH... [--format table|json|gradescope]``.

The package is laid out in four rooms over a floor. A room imports the rooms listed after it and the floor, never
one listed before it, with two seams left, each named in ``tests/kit/test_architecture.py`` (``ROOM_SEAMS``): feedback
reads the answer channel's error type (``report`` -> ``engine.remote``), and the registry takes exercise 04's
category names from its mutants (floor -> ``rules.mutants``), which the student release stubs.

* floor (this folder): :mod:`~fastpath_lib.grading.registry` (the parts of each exercise, their points, the result
  type, where each check lives), :mod:`~fastpath_lib.grading.vocabulary` (the outcome words and rule),
  :mod:`~fastpath_lib.grading.materials` (what the notebooks show and hand to the learner's code, never an answer)
  and :mod:`~fastpath_lib.grading.given` (exercise 06's classes, given to exercise 07). Of the grading package only
  the floor's materials are handed to the learner's kernel in the sandbox.
* ``checks/``: one module per exercise (``ex01_reference`` ... ``ex13_review``), each check ending in
  ``graded(...)``; :mod:`fastpath_lib.exercises` is the short façade the notebooks import.
* ``rules/``: what the checks apply: ``borrowed`` and ``kernel_source`` (the few source rules that remain, on the
answer's own code), ``mutants``, ``mutant_kernels``,
  ``fused_mutants`` and ``mutation`` (seeded faults and the engine exercises 04, 09 and 12 share),
  ``ex13_scenarios`` (scenario keys) and ``coverage`` (which lesson item each part grades).
* ``engine/``: ``cli`` (runs a copy of each notebook in a fresh kernel and computes the verdict in its own process),
  ``notebook`` (restores the check cells), ``sources`` (the learner's code as read from the file), ``remote`` and
  ``runner`` (the two ends of the answer channel), ``sandbox`` (the kernel under bubblewrap), ``handout`` (the kit as an
  exercise hands it out, staged for the kernel), ``kernel_run`` (the learner's Triton kernel run by the grader) and
  ``autograde`` (Gradescope, PrairieLearn and nbgrader entry points).
* ``report/``: ``feedback`` (scores every check and words its feedback) and ``gradescope`` (``results.json``).
"""
