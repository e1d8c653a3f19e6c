"""Grading of the exercise notebooks: ``python -m fastpath_lib grade PATH... [--json] [--timeout S]``.

* :mod:`fastpath_lib.grading.registry` — the parts of each exercise and their points, the result MIME type.
* :mod:`fastpath_lib.grading.cli` — executes notebooks on a copy in a fresh kernel and prints the score table.
* :mod:`fastpath_lib.grading.mutants` — seeded faulty predicates and kernels for exercise 04.
"""
