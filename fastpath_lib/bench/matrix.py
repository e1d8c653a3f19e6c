"""The predeclared case matrix: what is measured, and what each case is expected to show, before anything runs.

A case file is JSON (``{"cases": [...]}``) with one object per case: ``id``, ``family``, ``shape`` ``[rows, cols]``,
``dtype``, ``layout`` (``contiguous``, ``row_slice`` with ``pad``, ``step``, ``transposed``; ``offset`` misaligns the
input), ``pass`` (``forward`` or ``backward``), ``expected`` (one of :data:`OUTCOMES`), a one-line ``rationale``, and
optionally ``quick`` (a small ``shape``/``pad`` used by ``--quick``, same id). The default matrix is
``fastpath_lib/bench/cases.json``.

>>> cases = load_cases()
>>> check_coverage(cases)
[]
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from fastpath_lib.bench.schema import FALLBACK, LOSS, NEUTRAL, OUTCOMES, WIN
from fastpath_lib.cases import CaseSpec
from fastpath_lib.opspec import MIN_CASES

__all__ = ["OUTCOMES", "PASSES", "BENCH_LAYOUTS", "DEFAULT_CASES", "COMMON_WORDS", "SAME_RATIONALE", "OWN_WORDS",
           "BenchCase", "load_cases", "check_coverage", "coverage_rules", "rationale_words", "Rule", "aligned",
           "ALIGN_BYTES", "SMALL_ELEMENTS", "LARGE_ELEMENTS", "STRIDED_LAYOUTS"]

PASSES = ("forward", "backward")
BENCH_LAYOUTS = ("contiguous", "row_slice", "step", "transposed", "batched", "permuted")
DEFAULT_CASES = Path(__file__).with_name("cases.json")
#: The widest global access a GPU thread makes (a 16-byte vector): a case is aligned when its pointer, row stride and
#: width are multiples of it.
ALIGN_BYTES = 16
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


@dataclasses.dataclass(frozen=True)
class BenchCase:
    """One predeclared benchmark case.

    Args:
        id: stable name, the key across runs (``compare`` matches on it).
        family: group, e.g. ``decode``, ``prefill``, ``layout``, ``alignment``, ``width``.
        shape: ``(rows, cols)`` of the full run.
        dtype: ``"float16"``, ``"bfloat16"`` or ``"float32"`` (``"float64"`` allowed, it falls back).
        layout: a :data:`fastpath_lib.cases.LAYOUTS` name.
        pass_: ``"forward"`` or ``"backward"`` (backward means forward+backward of each provider).
        expected: predicted outcome on a CUDA GPU, one of :data:`OUTCOMES`.
        rationale: one line saying why.
        pad: extra elements per row for ``row_slice``.
        offset: elements the input starts past its buffer's (aligned) start.
        quick_shape, quick_pad: the ``--quick`` variant (defaults: the full values).
    """

    id: str
    family: str
    shape: tuple[int, int]
    dtype: str
    layout: str
    pass_: str
    expected: str
    rationale: str
    pad: int = 0
    offset: int = 0
    quick_shape: tuple[int, int] | None = None
    quick_pad: int | None = None

    def __post_init__(self):
        problems = []
        if self.dtype not in _DTYPES:
            problems.append(f"dtype {self.dtype!r} not in {sorted(_DTYPES)}")
        if self.layout not in BENCH_LAYOUTS:
            problems.append(f"layout {self.layout!r} not in {BENCH_LAYOUTS}")
        if self.pass_ not in PASSES:
            problems.append(f"pass {self.pass_!r} not in {PASSES}")
        if self.expected not in OUTCOMES:
            problems.append(f"expected {self.expected!r} not in {OUTCOMES}")
        if len(self.shape) != 2 or min(self.shape) < 1:
            problems.append(f"shape {self.shape!r} must be [rows, cols] with both >= 1")
        if not self.rationale.strip():
            problems.append("rationale is empty")
        if problems:
            raise ValueError(f"case {self.id!r}: " + "; ".join(problems))

    @property
    def torch_dtype(self) -> torch.dtype:
        """The dtype as a ``torch.dtype``."""
        return _DTYPES[self.dtype]

    def dims(self, quick: bool = False) -> tuple[int, int, int]:
        """``(rows, cols, pad)`` for the full or the quick run."""
        if quick and self.quick_shape is not None:
            rows, cols = self.quick_shape
            return rows, cols, self.pad if self.quick_pad is None else self.quick_pad
        return self.shape[0], self.shape[1], self.pad

    def spec(self, quick: bool = False) -> CaseSpec:
        """The :class:`~fastpath_lib.cases.CaseSpec` that builds this case's inputs."""
        rows, cols, pad = self.dims(quick)
        return CaseSpec(rows=rows, cols=cols, dtype=self.torch_dtype, weight="same", layout=self.layout, pad=pad,
                        offset=self.offset)

    def to_json(self) -> dict:
        """The case as a case-file entry."""
        out = {"id": self.id, "family": self.family, "shape": list(self.shape), "dtype": self.dtype,
               "layout": self.layout, "pass": self.pass_, "expected": self.expected, "rationale": self.rationale}
        if self.pad:
            out["pad"] = self.pad
        if self.offset:
            out["offset"] = self.offset
        if self.quick_shape is not None:
            out["quick"] = {"shape": list(self.quick_shape)}
            if self.quick_pad is not None:
                out["quick"]["pad"] = self.quick_pad
        return out

    @classmethod
    def from_json(cls, d: dict) -> BenchCase:
        """Build a case from a case-file entry (raises ``ValueError`` naming the bad field)."""
        fields = ("id", "family", "shape", "dtype", "layout", "pass", "expected", "rationale")
        missing = [k for k in fields if k not in d]
        if missing:
            raise ValueError(f"case {d.get('id', '?')!r} lacks {missing}")
        quick = d.get("quick") or {}
        try:
            shape = tuple(int(v) for v in d["shape"])
            pad, offset = int(d.get("pad", 0)), int(d.get("offset", 0))
            quick_shape = tuple(int(v) for v in quick["shape"]) if "shape" in quick else None
            quick_pad = int(quick["pad"]) if "pad" in quick else None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"case {d.get('id', '?')!r}: shape, pad, offset and quick need integers ({exc})") from None
        return cls(id=str(d["id"]), family=str(d["family"]), shape=shape, dtype=str(d["dtype"]),
                   layout=str(d["layout"]), pass_=str(d["pass"]), expected=str(d["expected"]),
                   rationale=str(d["rationale"]), pad=pad, offset=offset, quick_shape=quick_shape, quick_pad=quick_pad)


def load_cases(path: str | Path | None = None) -> list[BenchCase]:
    """Read a case file (default: the kit's predeclared matrix).

    Args:
        path: a JSON case file; ``None`` for :data:`DEFAULT_CASES`.

    Returns:
        the cases in file order.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not JSON, not a case file, or a case with a missing or bad field (the message names it).

    Note:
        Pure data; nothing is built or timed, so it works on any machine.

    >>> load_cases()[0].id
    'decode_m1_fp16'
    """
    data = json.loads(Path(path or DEFAULT_CASES).read_text())
    entries = data.get("cases") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ValueError('a case file holds {"cases": [...]} or a list of cases')
    bad = [i for i, e in enumerate(entries) if not isinstance(e, dict)]
    if bad:
        raise ValueError(f"case entries {bad} are not JSON objects")
    try:
        cases = [BenchCase.from_json(e) for e in entries]
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    ids = [c.id for c in cases]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"duplicate case ids: {dup}")
    return cases


#: a *small* case (launch- and host-bound on a GPU) and a *large* one (memory-bound), in elements.
SMALL_ELEMENTS = 65536
LARGE_ELEMENTS = 4096 * 4096
#: strided layouts the fast path supports (eligible when aligned); ``transposed``/``permuted`` count as odd cases.
STRIDED_LAYOUTS = ("row_slice", "step")


@dataclasses.dataclass(frozen=True)
class Rule:
    """One coverage rule applied to a matrix: its topic, whether the matrix meets it, and what it asks (with counts)."""

    topic: str  # "size", "layout", "expectations" or "passes"
    ok: bool
    text: str


def aligned(case: BenchCase) -> bool:
    """Whether a case's rows are 16-byte aligned: data pointer and row stride multiples of 16 bytes, row-major."""
    _, cols, pad = case.dims()
    el = case.torch_dtype.itemsize
    stride = {"row_slice": cols + pad, "step": 2 * cols}.get(case.layout, cols)
    return (case.offset * el % ALIGN_BYTES == 0 and stride * el % ALIGN_BYTES == 0 and cols * el % ALIGN_BYTES == 0
            and case.layout not in ("transposed", "permuted"))


def rationale_words(text: str) -> str:
    """A rationale reduced to its lower-case words, so reworded punctuation or case does not make it new."""
    return " ".join("".join(ch if ch.isalnum() else " " for ch in str(text).lower()).split())


#: dtype -> the other names a rationale may give it
_DTYPE_NAMES = {"float32": "fp32 f32 float single", "float16": "fp16 f16 half", "bfloat16": "bf16 bfloat",
                "float64": "fp64 f64 double"}


#: Words too common to tell two rationales apart.
COMMON_WORDS = frozenset("a an the of to in on and or is are be it its at by for with from as so but no not".split())

#: The share of its words (Jaccard) from which a rationale is another case's: half.
SAME_RATIONALE = 0.5

#: The fewest words a rationale says of its own: not numbers, the case's own fields or the commonest words.
OWN_WORDS = 3


def _field_words(c: BenchCase) -> set[str]:
    """The words a rationale gets from the case's own fields, not from a why."""
    fields = f"{c.id} {c.dtype} {_DTYPE_NAMES.get(c.dtype, '')} {c.layout} {c.expected} {c.pass_} {c.family}"
    return set(rationale_words(fields.replace("_", " ")).split())


def coverage_rules(cases: list[BenchCase], *, passes: bool = True) -> list[Rule]:
    """Every rule a review-grade matrix meets, each with whether ``cases`` meets it: the kit's one source.

    The kit's predeclared matrix meets all of them (:func:`check_coverage`), and exercise 05 grades a learner's
    matrix with the same list (without the pass rule: its cases are forward only).

    Args:
        cases: the matrix.
        passes: also require forward and backward cases.

    Returns:
        the rules in order, topics ``size``, ``layout``, ``expectations`` (and ``passes``).
    """
    n = len(cases)
    specs = [(c.shape, c.dtype, c.layout, c.pad, c.offset, c.pass_) for c in cases]
    elements = [c.shape[0] * c.shape[1] for c in cases]
    small = sum(e <= SMALL_ELEMENTS for e in elements)
    large = sum(e >= LARGE_ELEMENTS for e in elements)
    n_aligned = sum(aligned(c) for c in cases)
    strided = sum(c.layout in STRIDED_LAYOUTS for c in cases)
    contiguous = sum(c.layout == "contiguous" for c in cases)
    dtypes = [d for d in ("float32", "float16", "bfloat16") if d not in {c.dtype for c in cases}]
    count = {o: sum(c.expected == o for c in cases) for o in OUTCOMES}
    texts = [rationale_words(c.rationale) for c in cases]
    # a rationale's gist: its words but for numbers, the case's own fields (id, dtype, layout, expectation, pass) and
    # the commonest words. Two rationales whose gists share half their words or more (one template filled with each
    # case's fields, or with a word or two changed per case) are the same rationale: it says no why of its own
    gist = [{w for w in t.split() if not any(ch.isdigit() for ch in w) and w not in _field_words(c)} - COMMON_WORDS
            for c, t in zip(cases, texts)]
    bad_why = [c.id for c, t, g in zip(cases, texts, gist) if len(t.split()) < 4 or len(g) < OWN_WORDS]
    twins = {c.id: ", ".join(d.id for d, h in zip(cases, gist) if d.id != c.id and d.id not in bad_why
                             and len(g & h) >= SAME_RATIONALE * len(g | h))
             for c, g in zip(cases, gist) if c.id not in bad_why}
    same_why = sorted(cid for cid, twin in twins.items() if twin)
    rules = [
        Rule("size", n >= MIN_CASES, f">= {MIN_CASES} cases: {n}"),
        Rule("size", len({c.id for c in cases}) == n, "unique case ids"),
        Rule("size", len(set(specs)) == n, f"no case repeated: {n - len(set(specs))} repeats"),
        Rule("size", len({c.shape for c in cases}) >= 8, f">= 8 distinct shapes (rows x cols): "
             f"{len({c.shape for c in cases})}"),
        Rule("size", small >= 2, f">= 2 small cases (<= {SMALL_ELEMENTS} elements): {small}"),
        Rule("size", large >= 2, f">= 2 large cases (>= 4096x4096 elements): {large}"),
        Rule("size", any(c.shape[0] == 1 for c in cases), "an M=1 decode case (one row)"),
        Rule("layout", n_aligned >= 2,
             f">= 2 aligned cases ({ALIGN_BYTES}-byte pointer, row stride and width): {n_aligned}"),
        Rule("layout", n - n_aligned >= 2, f">= 2 odd cases (misaligned width, pointer or stride, or transposed): "
             f"{n - n_aligned}"),
        Rule("layout", contiguous >= 2, f">= 2 contiguous cases: {contiguous}"),
        Rule("layout", strided >= 1, f">= 1 supported strided case ({', '.join(STRIDED_LAYOUTS)}): {strided}"),
        Rule("layout", not dtypes, "fp32, fp16 and bf16 cases" + (f": no {', '.join(dtypes)}" if dtypes else "")),
        Rule("expectations", count[WIN] >= 1, f">= 1 case expected to {WIN}: {count[WIN]}"),
        Rule("expectations", count[NEUTRAL] + count[LOSS] >= 2,
             f">= 2 cases expected not to improve ({NEUTRAL} or {LOSS}): {count[NEUTRAL] + count[LOSS]}"),
        Rule("expectations", count[FALLBACK] >= 2,
             f">= 2 cases outside the eligibility region (expected {FALLBACK}): {count[FALLBACK]}"),
        Rule("expectations", not bad_why and not same_why, f"a rationale of its own for every case (at least four "
             f"words, {OWN_WORDS} of them its own)"
             + "".join(f"\n      {cid}: no rationale saying why (fewer than {OWN_WORDS} words of its own, leaving out "
                       f"numbers, the case's own id, dtype, layout and expectation and the commonest words)"
                       for cid in bad_why)
             + "".join(f"\n      {cid}: the same rationale as {twins[cid]} (half its words or more are the same, "
                       f"leaving out numbers, the case's own id, dtype, layout and expectation and the commonest "
                       f"words: say why this case should do that)" for cid in same_why)),
    ]
    if passes:
        have = {c.pass_ for c in cases}
        lacking = [p for p in PASSES if p not in have]
        rules.append(Rule("passes", not lacking, "forward and backward cases"
                          + (f": no {', '.join(lacking)}" if lacking else "")))
    return rules


def check_coverage(cases: list[BenchCase]) -> list[str]:
    """What a review-grade matrix lacks; ``[]`` when it covers everything (the failed :func:`coverage_rules`).

    Args:
        cases: the matrix.

    Returns:
        one line per rule the matrix does not meet, starting "need".
    """
    return [f"need {r.text}" for r in coverage_rules(cases) if not r.ok]
