"""What the PR note reads: :class:`Evidence` (the results, the environment and the analyses, gathered once), the op's
sentences (``OpSpec.pr_text`` keys, :data:`PR_TEXT_KEYS`, with the default built from the spec's other fields), and the
small readers and formatters every part of the note shares."""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from fastpath_lib import opspec
from fastpath_lib.bench.schema import matrix_rows
from fastpath_lib.opspec import OpSpec

__all__ = ["Evidence", "PR_TEXT_KEYS", "DEFAULT_TEXT", "fmt", "junit_counts", "qualified", "read_json",
           "spec_of", "ANALYSES", "not_run", "steps_skipping"]

#: The per-op analyses a results folder can hold beside the matrix: file -> (what it is, the evidence step that runs
#: it, what it needs of an :class:`~fastpath_lib.opspec.OpSpec`: a field name, which the spec must declare, or a
#: ``(field, key)`` pair, an entry the spec's mapping field must hold). ``bench --op`` runs the matrix and the host
#: cost only; the GPU evidence run runs these for every op whose spec declares what they need.
ANALYSES = {
    "threshold.csv": ("the row-threshold sweep", "sweep", ("fast",)),
    "replay.json": ("the workload replay", "replay", ("decoder_step",)),
    "compile_cost.json": ("the compile cost per kernel specialization", "compile_cost", ("specialization",)),
    "compiled.json": ("the compiled-code facts", "compiled", ("kernels", "compiler")),
    "capture_test.json": ("the CUDA-graph capture test", "capture", ("capture",)),
    "results.csv (compiled rows)": ("the torch.compile baseline", "compiled_baselines",
                                    (("baselines", opspec.COMPILED),)),
}


def _missing(spec: OpSpec, needs) -> list[str]:
    """What of ``needs`` (an :data:`ANALYSES` entry's third part) ``spec`` leaves out, each named."""
    out = []
    for need in needs:
        if isinstance(need, tuple):
            field, key = need
            if key not in (getattr(spec, field, None) or {}):
                out.append(f"a `{key}` entry in {field} (OpSpec.{field})")
        elif getattr(spec, need, None) is None:
            out.append(f"{need} (OpSpec.{need})")
    return out


def steps_skipping(spec: OpSpec) -> dict[str, str]:
    """evidence step -> why it skips ``spec`` (what it needs that the spec leaves out, :data:`ANALYSES`)."""
    return {step: not_run(spec, file) for file, (_, step, needs) in ANALYSES.items() if _missing(spec, needs)}


def not_run(spec: OpSpec, file: str) -> str:
    """Why the analysis that writes ``file`` (a key of :data:`ANALYSES`) was not run: what it needs that ``spec``
    leaves out, each named, or else the evidence step that runs it.

    >>> not_run(opspec.OpSpec("x", abs, abs, tuple, str, baselines={"b": abs}), "replay.json")
    "decoder_step (OpSpec.decoder_step) is not declared by the op's spec"
    """
    what, step, needs = ANALYSES[file]
    missing = _missing(spec, needs)
    if missing:
        return ", ".join(missing) + f" {'is' if len(missing) == 1 else 'are'} {opspec.NOT_DECLARED}"
    return (f"the GPU evidence run's `{step}` step runs it "
            f"(`python -m fastpath_lib evidence --op {opspec.reference_of(spec)} --out DIR`)")


def compiled_not_run(spec: OpSpec, df: pd.DataFrame | None) -> str | None:
    """Why the run's results hold no timed torch.compile row: the reason its own compiled rows give (``--quick`` off
    CUDA skips the compile; the evidence run's matrix leaves it to its own step), else :func:`not_run`'s; ``None``
    where the run timed at least one (a full run)."""
    rows = df[df["provider"].astype(str) == opspec.COMPILED] if df is not None and "provider" in df.columns else None
    if rows is not None and len(rows):
        if (rows["status"].astype(str) == "ok").any():
            return None
        notes = sorted({str(n).removeprefix("skipped: ") for n in rows["note"].dropna() if str(n)})
        if notes:
            return "; ".join(notes)
    return not_run(spec, "results.csv (compiled rows)")


def junit_counts(path: str | Path) -> dict:
    """``{"tests", "failures", "errors", "skipped"}`` summed over a JUnit XML file's test suites."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


def fmt(v, spec=".4g") -> str:
    """A number for a table: ``—`` for missing values.

    >>> fmt(1.23456), fmt(None), fmt(float("nan"))
    ('1.235', '—', '—')
    """
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "—" if v is None else str(v)
    return "—" if math.isnan(f) else format(f, spec)


def qualified(fn) -> str:
    """``module.qualname`` of a callable (its ``repr`` when it has none)."""
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}".lstrip(".")


def read_json(folder: Path | None, name: str):
    """``folder/name`` parsed, or ``None`` when there is no folder or no such file."""
    if folder is None or not (folder / name).exists():
        return None
    return json.loads((folder / name).read_text())


def _default_eligibility(spec: OpSpec) -> list[str]:
    L = ["Fast path when every condition holds; otherwise the fallback runs, so a limit never becomes a new error.", ""]
    if spec.predicate is None:
        return L + ["(The op's spec declares no predicate: its conditions are not listed here.)"]
    return L + [spec.predicate.markdown_table(spec.limits(None) if spec.limits else None)]


def _default_limitations(ev) -> list[str]:
    """What the matrix timed, read off the cases the run ran: their passes and their layouts."""
    m = ev.matrix if ev is not None else None
    if m is None or not len(m):
        return ["- The matrix timed no case in this run."]
    m = m.drop_duplicates("case_id")
    passes = _series([f"the {p} pass" for p in dict.fromkeys(m["pass"].astype(str))])
    layouts = _series([f"`{v}`" for v in dict.fromkeys(m["layout"].astype(str))])
    return [f"- The matrix times {passes} on {layouts} inputs (the layouts of its {len(m)} cases run); other "
            "layouts take their route but are not timed."]


def _series(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``.

    >>> _series(["a"]), _series(["a", "b"]), _series(["a", "b", "c"])
    ('a', 'a and b', 'a, b and c')
    """
    return " and ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} and {items[-1]}"


#: ``OpSpec.pr_text`` keys -> the sentence used when a spec leaves the key out (built from its other fields; the
#: limitations from the run's results too).
DEFAULT_TEXT = {
    "noun": lambda spec: spec.name,
    "summary": lambda spec: (f"`{qualified(spec.function)}` keeps the contract of its reference "
                             f"`{qualified(spec.reference)}` and takes its fast route where an eligibility "
                             "predicate holds; every other call takes the fallback."),
    "eligibility": _default_eligibility,
    "mechanism": lambda spec: ("Bytes moved per call come from the op's bytes model (`OpSpec.bytes_moved`)."
                               if spec.bytes_moved else "The op declares no bytes model: no bandwidth is derived."),
    "traffic": lambda spec: [],  # why the op requests more bytes than it reads (the counted-traffic table)
    "traffic_backward": lambda spec: [],  # the same for its backward, said where a backward row was counted
    "host": lambda spec: "Host cost of the dispatch: not measured in this run.",
    "compiled": lambda spec: ("Compiled code (vector width, registers, spills): not recorded in this run: "
                              f"{not_run(spec, 'compiled.json')}."),
    "route_differs": lambda spec: "differs",
    "maintenance": lambda spec: [
        "- Surface: the predicate's conditions above; everything else falls back.",
        f"- New architectures: {{owner}} re-runs `python -m fastpath_lib bench --op {opspec.reference_of(spec)}` on "
        "the new GPU; "
        "until then the predeclared expectations are unverified there."],
    "limitations": lambda spec, ev=None: _default_limitations(ev),
    "vllm_op": lambda spec: [],  # the vLLM IR op the op provides: only where its spec names one
    "vllm_tests": lambda spec: [],  # vLLM's own tests of the op (paths in vLLM's tree), for the vLLM form's Test Plan
}
#: The keys an :class:`~fastpath_lib.opspec.OpSpec`'s ``pr_text`` may set.
PR_TEXT_KEYS = tuple(DEFAULT_TEXT)


@dataclasses.dataclass
class Evidence:
    """Everything the note reads, gathered once."""

    df: pd.DataFrame
    env: dict
    gpu: bool
    synthetic: bool
    label: str
    tests: dict | None = None
    replay: dict | None = None
    compile_cost: dict | None = None
    threshold: dict | None = None
    compiled: list | None = None
    manifest: dict | None = None
    owner: str = "the PR author"
    spec: OpSpec | None = None

    def __post_init__(self):
        self.spec = self.spec or opspec.default()
        unknown = sorted(set(self.spec.pr_text) - set(PR_TEXT_KEYS))
        if unknown:
            raise ValueError(f"{self.spec.name}: unknown pr_text keys {unknown}; known: {', '.join(PR_TEXT_KEYS)}")

    def text(self, key: str) -> list[str]:
        """The spec's lines for ``key`` (its ``pr_text``, else the default), ``{owner}`` filled in."""
        v = self.spec.pr_text.get(key)
        v = (DEFAULT_TEXT[key](self.spec, self) if key == "limitations" else DEFAULT_TEXT[key](self.spec)) \
            if v is None else v() if callable(v) else v
        return [line.replace("{owner}", self.owner) for line in ([v] if isinstance(v, str) else v)]

    @property
    def baseline(self) -> str:
        """The name of the first baseline (outcomes are read against it)."""
        return self.spec.baseline[0]

    @property
    def noun(self) -> str:
        """What the op is called in prose (``pr_text["noun"]``, default its registry name)."""
        return self.text("noun")[0]

    @property
    def title(self) -> str:
        """The note's title: the spec's, else one built from its name."""
        return self.spec.title or f"{self.spec.name}: a fast path behind an eligibility predicate"

    @property
    def matrix(self) -> pd.DataFrame:
        return matrix_rows(self.df)

    @property
    def dispatched(self) -> pd.DataFrame:
        m = self.matrix
        return m[m.provider == "dispatched"]


def spec_of(spec: OpSpec | str | None, env: dict) -> OpSpec:
    """The op the note is about: ``spec`` (a spec or a registered name), else the op the results name (registered, or
    loaded from the ``module:attribute`` reference ``environment.json`` records as ``op_ref``, as ``--op`` does), else
    the default op."""
    if isinstance(spec, OpSpec):
        return spec
    name = spec or env.get("op") or opspec.names()[0]
    try:
        return opspec.get(name)
    except KeyError as exc:
        ref = env.get("op_ref") if spec is None else None
        if ref and ":" in str(ref):
            try:
                loaded = opspec.load(str(ref))
            except (ImportError, AttributeError, TypeError, ValueError) as err:
                raise ValueError(f"the note's op: {exc.args[0]}; loading {ref} (environment.json's op_ref): {err} "
                                 "(pass spec= an OpSpec)") from None
            if loaded.name == name:
                return loaded
        raise ValueError(f"the note's op: {exc.args[0]} (pass spec= an OpSpec)") from None
