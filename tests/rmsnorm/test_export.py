"""Export and dynamic compile keep one graph over the user's whole range: sizes a tracer holds symbolically are
decided inside ``fastpath::rms_norm`` at run time (as alignment is), so there is no guard on the row threshold.

Each test runs the traced program below, at and above the threshold, and checks the route every call took
(``record_routes``) and the values against ``torch.nn.RMSNorm``.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import fastpath_lib
from fastpath_lib.rmsnorm.limits import limits_for
from fastpath_lib.testing import compare

COLS = 64


def threshold(device) -> int:
    return limits_for(device).min_rows


def routes_of(fn, x) -> tuple[torch.Tensor, dict]:
    with fastpath_lib.record_routes() as routes:
        y = fn(x)
    return y, dict(routes)


def expected_routes(rows: int, device, calls: int = 1) -> dict:
    return {"triton" if rows >= threshold(device) else "fallback": calls}


class Block(torch.nn.Module):
    """A decoder block's norm pattern: norm, linear, residual, norm."""

    def __init__(self, norm=fastpath_lib.RMSNorm, device=None):
        super().__init__()
        self.norm1, self.norm2 = norm(COLS, device=device), norm(COLS, device=device)
        self.proj = torch.nn.Linear(COLS, COLS, device=device)

    def forward(self, x):
        return self.norm2(x + self.proj(self.norm1(x)))


def reference_block(block: Block, device) -> Block:
    ref = Block(torch.nn.RMSNorm, device=device)
    ref.load_state_dict(block.state_dict())
    return ref


@pytest.mark.parametrize("strict", [False, True])
def test_export_with_dynamic_rows_runs_every_size(strict, device):
    """``torch.nn.RMSNorm`` exports with ``Dim("rows", max=4096)``; so must the drop-in, and the program must take the
    fallback below the threshold and the kernels from it on."""
    torch.manual_seed(0)
    m = fastpath_lib.RMSNorm(COLS, device=device)
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
    t = threshold(device)
    ep = torch.export.export(m, (torch.randn(2 * t, COLS, device=device),),
                             dynamic_shapes={"x": {0: Dim("rows", max=4096)}}, strict=strict)
    assert "fastpath.rms_norm" in str(ep.graph)
    program = ep.module()
    for rows in (1, t - 1, t, t + 1, 5 * t + 3):
        x = torch.randn(rows, COLS, device=device)
        y, routes = routes_of(program, x)
        assert routes == expected_routes(rows, device), rows
        assert compare(y, torch.nn.functional.rms_norm(x, [COLS], m.weight.detach()), x.dtype) is None, rows


def test_exported_decoder_block_runs_its_first_decode_step(device):
    """A block with a dynamic batch *and* sequence dim: the exported program runs a (1, 1, 64) decode step (no
    ``Guard failed: x.size()[1] * x.size()[0] >= 8``) and prefill shapes at and above the threshold."""
    torch.manual_seed(1)
    block = Block(device=device)
    ref = reference_block(block, device)
    ep = torch.export.export(block, (torch.randn(2, 8, COLS, device=device),),
                             dynamic_shapes={"x": {0: Dim("batch", max=64), 1: Dim("seq", max=512)}})
    program = ep.module()
    t = threshold(device)
    for batch, seq in ((1, 1), (1, t - 1), (1, t), (2, t), (3, t + 5)):
        x = torch.randn(batch, seq, COLS, device=device)
        y, routes = routes_of(program, x)
        assert routes == expected_routes(batch * seq, device, calls=2), (batch, seq)
        with torch.no_grad():
            assert compare(y, ref(x), x.dtype) is None, (batch, seq)


def test_export_backward_decides_at_run_time(device):
    """The exported training graph (``export_for_training``'s joint is not needed: autograd runs through the op) takes
    the backward route that the size calls for, on each side of the threshold."""
    m = fastpath_lib.RMSNorm(COLS, device=device)
    ep = torch.export.export(m, (torch.randn(16, COLS, device=device),), dynamic_shapes={"x": {0: Dim("rows")}})
    program = ep.module()
    t = threshold(device)
    for rows in (t - 1, t):
        x = torch.randn(rows, COLS, device=device, requires_grad=True)
        with fastpath_lib.record_routes("backward") as routes:
            program(x).sum().backward()
        assert dict(routes) == expected_routes(rows, device), rows
        x_ref = x.detach().clone().requires_grad_()
        torch.nn.functional.rms_norm(x_ref, [COLS], m.weight.detach()).sum().backward()
        assert compare(x.grad, x_ref.grad, x.dtype) is None, rows


def test_compile_dynamic_makes_one_graph_across_the_threshold(device):
    """``torch.compile(dynamic=True)`` traces once; the calls below and above the threshold share that graph (no
    recompile) and each takes its own route."""
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    torch._dynamo.reset()
    block = Block(device=device)
    ref = reference_block(block, device)
    compiled = torch.compile(block, backend=counting, dynamic=True, fullgraph=True)
    t = threshold(device)
    for rows in (3, t - 1, t, 4 * t + 1, 2):  # first not 2: equal sizes would share a symbol (duck sizing)
        x = torch.randn(2, rows, COLS, device=device)
        with torch.no_grad():
            y, routes = routes_of(compiled, x)
            assert compare(y, ref(x), x.dtype) is None, rows
        assert routes == expected_routes(2 * rows, device, calls=2), rows
    assert len(graphs) == 1, f"{len(graphs)} graphs: a size test became a guard"
    torch._dynamo.reset()


def test_explain_on_a_traced_size_says_unknown_and_adds_no_guard(device):
    """``explain()`` inside an export trace reads the symbolic row count as unknown until run time (no guard, so the
    export with a range below the threshold still succeeds) and keeps reporting what the tracer does know."""
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append(fastpath_lib.explain(x, [x.shape[-1]]))
            return x * 2

    x = torch.randn(16, 24, device=device).t()  # 24 rows, transposed: a known reason beside the unknown one
    torch.export.export(Probe(), (x,), dynamic_shapes={"x": {0: Dim("rows", max=4096)}})
    (d,) = seen
    by_name = dict(zip(d.failed, d.reasons))
    assert d.route == "fallback" and "last_dim_contiguous" in by_name
    assert by_name["min_rows"].startswith("min_rows: unknown until run time"), by_name
    assert "symbolically" in by_name["min_rows"] and "unknown" not in by_name["last_dim_contiguous"]


def test_static_sizes_still_decide_at_trace_time(device):
    """With static sizes nothing is deferred: a call below the threshold is plain ``F.rms_norm`` in the graph."""
    t = threshold(device)
    m = fastpath_lib.RMSNorm(COLS, device=device)
    small = torch.export.export(m, (torch.randn(t - 1, COLS, device=device),))
    assert "fastpath.rms_norm" not in str(small.graph)
    large = torch.export.export(m, (torch.randn(t, COLS, device=device),))
    assert "fastpath.rms_norm" in str(large.graph)
