"""A live ipywidgets explorer of the RMSNorm eligibility predicate: change a case, see the route and the reasons.

:func:`route_explorer` returns a small panel of controls (rows, cols, dtype, weight, layout, pad, offset, mode) and
two outputs: the route (``triton`` or ``fallback``) and every reason the predicate gives. Each change builds the case
with :class:`fastpath_lib.cases.CaseSpec` (inputs in NaN-poisoned buffers, as the tests build them) and asks
:func:`fastpath_lib.explain`; modes that are not properties of a tensor (``force_fallback()``, ``create_graph=True``,
CUDA graph capture, interpreter off) are evaluated by replacing that field of the predicate's context. The explorer
never runs a kernel, so it answers instantly on any machine.

The outputs carry stable DOM classes for browser tests: the panel ``fastpath-explorer``, the outputs
``fastpath-route``, ``fastpath-reasons`` and ``fastpath-case``, and each control ``fastpath-<name>`` (for example
``fastpath-dtype``).

Note:
    Off CUDA the case is built on the CPU and the limits are the interpreter's (``min_rows`` 8); on a GPU machine
    it is built on CUDA and the row threshold is the one for that architecture.

>>> ex = route_explorer()
>>> ex.decision.route
'triton'
>>> ex.controls["layout"].value = "transposed"
>>> ex.decision.route, ex.decision.failed[:1]
('fallback', ['last_dim_contiguous'])
"""

from __future__ import annotations

import dataclasses
import html

import ipywidgets as widgets
import torch

from fastpath_lib.cases import CaseSpec
from fastpath_lib.eligibility import Decision
from fastpath_lib.rmsnorm.op import explain
from fastpath_lib.rmsnorm.predicate import ALIGN_BYTES, PREDICATE, limits_for, make_call

__all__ = ["MODES", "MAX_ELEMENTS", "RouteExplorer", "route_explorer"]

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
WEIGHTS = {"same as input": "same", "none": None, "float32": torch.float32, "float64": torch.float64}
EXPLORER_LAYOUTS = ("contiguous", "row_slice", "step", "transposed", "permuted", "batched")

#: Modes that are not tensor properties: the field of the predicate's context each one replaces.
MODES = {
    "normal": {},
    "force_fallback()": {"forced": True},
    "backward with create_graph=True": {"create_graph": True},
    "during CUDA graph capture": {"capturing": True},
    "interpreter off": {"interpret": False},
}

#: Largest case the explorer allocates (elements); bigger ones are reported instead of built.
MAX_ELEMENTS = 1 << 24


class RouteExplorer(widgets.VBox):
    """The explorer panel (a ``VBox``): ``controls`` by name, the ``route`` / ``reasons`` / ``case`` outputs."""

    def __init__(self, *, rows: int | None = None, cols: int = 64, dtype: str = "float32", layout: str = "contiguous",
                 offset: int = 0, mode: str = "normal", device: str | None = None) -> None:
        style = {"description_width": "56px"}
        lay = widgets.Layout(width="190px")
        self.device = device
        if rows is None:  # twice the row threshold in force: eligible by default, on CPU and on CUDA
            rows = 2 * limits_for(device).min_rows
        self.controls = {
            "rows": widgets.BoundedIntText(rows, min=0, max=1 << 20, description="rows", style=style, layout=lay),
            "cols": widgets.BoundedIntText(cols, min=0, max=1 << 16, description="cols", style=style, layout=lay),
            "dtype": widgets.Dropdown(options=list(DTYPES), value=dtype, description="dtype", style=style, layout=lay),
            "weight": widgets.Dropdown(options=list(WEIGHTS), value="same as input", description="weight",
                                       style=style, layout=lay),
            "layout": widgets.Dropdown(options=list(EXPLORER_LAYOUTS), value=layout, description="layout",
                                       style=style, layout=lay),
            "pad": widgets.BoundedIntText(4, min=0, max=256, description="pad", style=style, layout=lay,
                                          tooltip="extra elements per row of the buffer (row_slice only)"),
            "offset": widgets.BoundedIntText(offset, min=0, max=256, description="offset", style=style, layout=lay,
                                             tooltip="elements between the buffer's start and the input"),
            "mode": widgets.Dropdown(options=list(MODES), value=mode, description="mode", style=style,
                                     layout=widgets.Layout(width="386px")),
        }
        for name, control in self.controls.items():
            control.add_class(f"fastpath-{name}")
            control.observe(self._on_change, names="value")
        self.route = widgets.HTML().add_class("fastpath-route")
        self.case = widgets.HTML().add_class("fastpath-case")
        self.reasons = widgets.HTML().add_class("fastpath-reasons")
        self.decision: Decision | None = None
        self.error: str | None = None
        grid = widgets.GridBox(list(self.controls.values())[:-1],
                               layout=widgets.Layout(grid_template_columns="repeat(3, 196px)", grid_gap="2px 4px"))
        super().__init__([grid, self.controls["mode"], self.route, self.case, self.reasons])
        self.add_class("fastpath-explorer")
        self.refresh()

    def spec(self) -> CaseSpec:
        """The :class:`CaseSpec` the controls describe."""
        c = {k: w.value for k, w in self.controls.items()}
        return CaseSpec(rows=c["rows"], cols=c["cols"], dtype=DTYPES[c["dtype"]], weight=WEIGHTS[c["weight"]],
                        layout=c["layout"], pad=c["pad"] if c["layout"] == "row_slice" else 0, offset=c["offset"])

    def evaluate(self) -> tuple[Decision, torch.Tensor]:
        """Build the case and return the predicate's :class:`Decision` under the chosen mode, with the input."""
        spec = self.spec()
        n = spec.rows * spec.cols
        if n > MAX_ELEMENTS:
            raise ValueError(f"{spec.rows} x {spec.cols} = {n} elements; the explorer builds at most {MAX_ELEMENTS}")
        x, ns, w = spec.build(seed=0, device=self.device).args()
        change = MODES[self.controls["mode"].value]
        if not change:
            return explain(x, ns, w), x
        return PREDICATE.evaluate(dataclasses.replace(make_call(x, ns, w), **change)), x

    def refresh(self) -> None:
        """Re-evaluate and redraw the outputs (called on every control change)."""
        try:
            decision, x = self.evaluate()
        except Exception as exc:  # an impossible case: say so in the panel instead of raising in a callback
            self.decision, self.error = None, f"{type(exc).__name__}: {exc}"
            self.route.value = "<b>route: (no case)</b>"
            self.case.value = ""
            self.reasons.value = f"<code>{html.escape(self.error)}</code>"
            return
        self.decision, self.error = decision, None
        colour = "#1a7f37" if decision.eligible else "#9a6700"
        self.route.value = f'<b style="color:{colour}">route: {html.escape(decision.route)}</b>'
        ptr = x.data_ptr() % ALIGN_BYTES if x.numel() else "-"
        self.case.value = (f"<small>{html.escape(self.spec().label())}: shape {list(x.shape)}, stride "
                           f"{list(x.stride())}, data pointer % {ALIGN_BYTES} = {ptr} bytes, device {x.device}</small>")
        if decision.reasons:
            items = "".join(f"<li><code>{html.escape(r)}</code></li>" for r in decision.reasons)
            self.reasons.value = f'<ul style="margin:2px 0">{items}</ul>'
        else:
            self.reasons.value = "all conditions hold"

    def _on_change(self, change) -> None:
        self.refresh()


def route_explorer(**initial) -> RouteExplorer:
    """A live explorer of the RMSNorm eligibility predicate (display it as a cell's last expression).

    Args:
        **initial: starting values, any of ``rows`` (default: twice the row threshold in force), ``cols``,
            ``dtype`` (``"float32"``, ``"float16"``, ``"bfloat16"``, ``"float64"``), ``layout``, ``offset``,
            ``mode`` (a key of :data:`MODES`), ``device``.

    Returns:
        a :class:`RouteExplorer` (an ``ipywidgets.VBox``); its ``decision`` attribute holds the current
        :class:`~fastpath_lib.eligibility.Decision`.

    Note:
        Evaluates the predicate only; no kernel runs. Off CUDA the case lives on the CPU under the interpreter.

    >>> route_explorer(rows=4).decision.failed
    ['min_rows']
    """
    return RouteExplorer(**initial)
