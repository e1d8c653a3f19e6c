"""How the kit times host cost per call, in one place: interleaved fixed blocks, the minimum of each side.

Host time per call swings from one moment to the next on a shared machine (other processes, caches, frequency). On a
2-core machine the best of a few ``torch.utils.benchmark.Timer.blocked_autorange`` medians reads 1.14-1.38x for the
same fallback call from one run to the next, where interleaved blocks read 1.08x: a median over a few long runs swings
with the machine, the fastest of many short blocks taken for both sides in the same minutes comes close to the time
each one needs when nothing interferes. Short is the point: with other processes keeping both cores busy (load 5 on 2
cores), 40 blocks of 1000 or of 300 calls (15 or 4.5 ms at 15 us a call, as long as a scheduler's time slice) put the
M=1 fallback's ratio anywhere between 0.55x and 2.06x over three runs each, where 200 blocks of 100 calls, 100 of 100 or
100 of 50 read 1.064-1.075x on every run: a block that fits between two preemptions is often one that nothing
interfered with. The method damps the machine's noise without removing it: a slowdown that lasts through every block
of one side moves that side's fastest block too. :func:`halves_band` measures how finely one run resolves a ratio,
and :func:`ratio_reading` says what the ratio and its band can tell about a target (and names the case the band
cannot see).

So every host-cost measurement of the kit (the host-overhead family of every op, :mod:`fastpath_lib.bench.ophost`;
vLLM's dispatch, :mod:`fastpath_lib.bench.vllmhost`; the host-cost cells of lessons 03 and 05) takes its numbers from
:func:`fastest_blocks`: :data:`BLOCKS` rounds, in each of which every callable runs :data:`CALLS` times in a row
(the order alternating between rounds), each side's fastest block kept (:data:`QUICK_BLOCKS` of
:data:`QUICK_CALLS` in a ``--quick`` run).

What a callable warns is part of its result, not noise on the console: :func:`warnings_of` records what one call
warns (torch's warn-once warnings included), and the timed calls run inside :func:`silenced`.

Times in microseconds.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import re
import time
import warnings

import torch

from fastpath_lib.bench.timing import quantile

__all__ = ["BLOCKS", "CALLS", "QUICK_BLOCKS", "QUICK_CALLS", "HOST_TIMER", "fastest_blocks", "host_blocks",
           "halves_band", "ratio_reading", "timing_fields", "warnings_of", "silenced"]

#: Rounds of interleaved blocks per measurement (each side's number of blocks).
BLOCKS = 200
#: Calls per block: short enough to fit between two preemptions on a busy machine.
CALLS = 100
#: Rounds and calls per block in a ``--quick`` run.
QUICK_BLOCKS, QUICK_CALLS = 100, 50

#: How the kit times host cost (each row's ``timer``).
HOST_TIMER = ("time.perf_counter around blocks of consecutive calls (synchronized at the end of each block on CUDA), "
              "the providers interleaved block by block (order alternating), garbage collection off; the fastest "
              "block per provider (host time per call)")


def fastest_blocks(fns: dict, *, blocks: int = BLOCKS, number: int | None = CALLS, warmup: int = 200, sync=None,
                   block_s: float = 0.01, around: dict | None = None) -> dict:
    """Time several callables side by side: ``blocks`` rounds, in each of which every callable runs ``number`` times
    in a row (the order alternating between rounds); keep each one's fastest block.

    Args:
        fns: name -> zero-argument callable.
        blocks: rounds (each callable's number of blocks).
        number: calls per block; ``None``: as many as fill about ``block_s`` seconds, per callable (at most 1000).
        warmup: calls of each callable before timing (first calls compile, cache and allocate); at most ``number``.
        sync: called at the end of each block, inside the timed part (``torch.cuda.synchronize``: a block's time
            then includes the device work it queued, as ``torch.utils.benchmark.Timer``'s does).
        block_s: the block length ``number=None`` aims at.
        around: name -> a context-manager factory entered around each of that callable's blocks (and its warm-up),
            outside the timed part: state a side needs while it runs, e.g. vLLM's ``op.set_priority([...])``.

    Returns:
        name -> ``{"best_us", "samples_us", "number", "blocks", "warmup"}``: the fastest block's time per call, every
        block's (in the order run), and the calls per block and warm-up calls it ran.

    >>> res = fastest_blocks({"a": lambda: None}, blocks=3, number=10, warmup=1)
    >>> len(res["a"]["samples_us"]), res["a"]["best_us"] == min(res["a"]["samples_us"])
    (3, True)
    """
    clock = time.perf_counter
    around = around or {}

    def inside(k):
        return around[k]() if k in around else contextlib.nullcontext()

    counts = {}
    for k, fn in fns.items():
        with inside(k):
            fn()
            start = clock()
            fn()
            if sync is not None:
                sync()
            one = clock() - start
            counts[k] = number or max(1, min(1000, int(block_s / max(one, 1e-7))))
            for _ in range(min(warmup, counts[k])):
                fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for b in range(blocks):
            for k in names if b % 2 == 0 else names[::-1]:
                fn, n = fns[k], counts[k]
                with inside(k):
                    start = clock()
                    for _ in range(n):
                        fn()
                    if sync is not None:
                        sync()
                    samples[k].append((clock() - start) / n * 1e6)
    finally:
        if was_enabled:
            gc.enable()
    return {k: {"best_us": min(v), "samples_us": v, "number": counts[k], "blocks": blocks,
                "warmup": min(warmup, counts[k])} for k, v in samples.items()}


def host_blocks(quick: bool, rounds: int | None) -> tuple[int, int]:
    """``(blocks, calls per block)`` for a run: :data:`BLOCKS` of :data:`CALLS` (:data:`QUICK_BLOCKS` of
    :data:`QUICK_CALLS` with ``quick``); ``rounds`` blocks when given.

    >>> host_blocks(False, None), host_blocks(True, None), host_blocks(True, 2)
    ((200, 100), (100, 50), (2, 50))
    """
    return (rounds or (QUICK_BLOCKS if quick else BLOCKS)), (QUICK_CALLS if quick else CALLS)


def halves_band(samples: list[float], base_samples: list[float]) -> float:
    """How finely one run resolves a ratio of fastest blocks (``min(samples) / min(base_samples)``), from the run
    itself: the same ratio taken on the even rounds alone and on the odd rounds alone (each side's fastest block
    among them); the band is how far the two differ. NaN with fewer than two blocks a side.

    The 20-80 % spread of all blocks (:func:`fastpath_lib.bench.analysis.noise_band`) describes single blocks, which
    load swings by several times on a busy machine; the fastest block moves far less, and this band measures how much.
    What no band taken from one run can see is a slowdown that lasts through every block of one side: it moves that
    side's fastest block in both halves alike (:func:`ratio_reading` names the case it can expose).

    >>> halves_band([2.0, 2.2, 2.1, 2.0], [1.0, 1.0, 1.1, 1.0])  # even rounds: 2.0 / 1.0, odd rounds: 2.0 / 1.0
    0.0
    >>> round(halves_band([2.0, 2.4, 2.1, 2.2], [1.0, 1.0, 1.1, 1.0]), 3)  # 2.0 / 1.0 against 2.2 / 1.0
    0.2
    """
    if min(len(samples), len(base_samples)) < 2:
        return math.nan
    even, odd = (min(samples[i::2]) / min(base_samples[i::2]) for i in (0, 1))
    return abs(even - odd)


def ratio_reading(ratio: float, band: float, target: float) -> str:
    """What one run's ratio of fastest blocks says about a target, given its :func:`halves_band`, where the candidate
    does all of the baseline's work and more (a fallback call: the dispatch, then the baseline itself).

    ``"within"`` or ``"OVER"`` when the target lies outside ``ratio ± band``, ``"cannot tell"`` when it lies inside;
    ``"noise"`` when the ratio is below 1 by more than the band (the kit's ``win`` by
    :func:`fastpath_lib.bench.analysis.outcome`): a call cannot be faster than work it contains, so a slowdown that
    lasted through the baseline's blocks moved the ratio, unseen by the band. The same slowdown on the candidate's side
    lifts the ratio instead and reads ``"OVER"``: only a second run tells it from a real cost. ``""`` when not measured.

    >>> [ratio_reading(r, b, 1.15) for r, b in ((1.07, 0.01), (1.2, 0.01), (1.1, 0.1), (0.79, 0.01), (1.0, math.nan))]
    ['within', 'OVER', 'cannot tell', 'noise', '']
    """
    from fastpath_lib.bench.outcome import outcome
    from fastpath_lib.bench.schema import WIN

    if any(math.isnan(float(v)) for v in (ratio, band, target)):
        return ""
    if outcome(ratio, band) == WIN:
        return "noise"
    return "within" if ratio + band <= target else "OVER" if ratio - band > target else "cannot tell"


def timing_fields(res: dict) -> dict:
    """The results schema's timing columns for one provider's :func:`fastest_blocks` result: ``min_us`` is the
    fastest block (what the host tables compare), ``median_us``, ``q20_us``, ``q80_us`` and ``mean_us`` describe
    all blocks, ``samples_us`` lists them.

    >>> f = timing_fields({"samples_us": [3.0, 1.0, 2.0], "best_us": 1.0, "number": 10, "blocks": 3, "warmup": 1})
    >>> f["min_us"], f["median_us"], f["note"]
    (1.0, 2.0, 'fastest of 3 blocks of 10 calls')
    """
    s = res["samples_us"]
    return dict(reps=res["blocks"], number=res["number"], warmup=f"{res['warmup']} calls", timer=HOST_TIMER,
                median_us=quantile(s, 0.5), q20_us=quantile(s, 0.2), q80_us=quantile(s, 0.8),
                mean_us=sum(s) / len(s), min_us=res["best_us"], samples_us=json.dumps([round(v, 4) for v in s]),
                note=f"fastest of {res['blocks']} blocks of {res['number']} calls")


_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)")  # the C++ location torch appends


def warnings_of(fn) -> str:
    """What one call of ``fn`` warns, torch's warn-once warnings included: distinct messages joined by ``" | "``,
    without the C++ source location torch appends (``(Triggered internally at ...)``).

    Torch raises a ``TORCH_WARN_ONCE`` warning once per process, so whether it shows would depend on what ran before;
    ``torch.set_warn_always`` makes it show on this call (and is put back as it was).

    >>> import torch.nn.functional as F
    >>> x, w = torch.ones(1, 8, dtype=torch.bfloat16), torch.ones(8)
    >>> warnings_of(lambda: F.rms_norm(x, [8], w))[:39]
    'Mismatch dtype between input and weight'
    >>> warnings_of(lambda: F.rms_norm(x, [8]))
    ''
    """
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.set_warn_always(always)
    return " | ".join(dict.fromkeys(_TRIGGERED.sub("", " ".join(str(w.message).split())) for w in seen))


@contextlib.contextmanager
def silenced():
    """Warnings ignored inside (the timed calls: what they warn was recorded by :func:`warnings_of` first)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
