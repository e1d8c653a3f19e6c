"""Reading the evidence as a reviewer: the newest recorded GPU run, and the dispatch's host cost drawn side by side.

The lessons call these instead of deciding for themselves what counts as evidence:

* :func:`recorded_gpu_run` finds the newest *GPU* results folder under ``results/`` (CPU and interpreter runs,
  synthetic data and unfinished folders never count; :func:`~fastpath_lib.bench.results.latest_gpu_results`) and
  loads it, or says plainly that there is none;
* :func:`host_plot` draws the host-overhead family (:func:`~fastpath_lib.bench.host.host_table`): per-call host time
  of ``F.rms_norm`` and of the dispatched op, side by side, labelled with the machine it was measured on.

>>> rec = recorded_gpu_run("/nonexistent/results")
>>> rec.found, rec.line().startswith("no GPU run is recorded")
(False, True)
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd

from fastpath_lib.bench.analysis import coverage_line
from fastpath_lib.bench.host import TARGET_RATIO
from fastpath_lib.bench.results import INCOMPLETE_MARKER, latest_gpu_results, load_results

__all__ = ["RESULTS_ROOT", "Recorded", "recorded_gpu_run", "host_plot"]

#: Where results folders live in a checkout of the kit (``results/<device>-<date>/``).
RESULTS_ROOT = Path(__file__).resolve().parents[2] / "results"


@dataclasses.dataclass
class Recorded:
    """The newest recorded GPU run (``folder``, its classified results ``df`` and ``env``), or none."""

    root: Path
    folder: Path | None = None
    df: pd.DataFrame | None = None
    env: dict = dataclasses.field(default_factory=dict)
    other_folders: int = 0

    @property
    def found(self) -> bool:
        return self.folder is not None

    def line(self) -> str:
        """One plain sentence: which GPU run the numbers come from, or that there is none."""
        others = (f" ({self.other_folders} other folder(s) there are not finished GPU measurements and are not read)"
                  if self.other_folders else "")
        if not self.found:
            return (f"no GPU run is recorded under {self.root.name}/{others}: no GPU number is shown. A run of "
                    f"`python -m fastpath_lib evidence --out results/<device>-<date>` on a GPU records one, and these "
                    f"cells read it once it is committed.")
        e = self.env
        commit = str(e.get("git_commit") or "?")[:12]
        return (f"newest GPU run: {self.root.name}/{self.folder.name} ({e.get('device_name')}, "
                f"{e.get('compute_capability')}, {e.get('timestamp')}, commit {commit}); "
                f"{coverage_line(self.df, e)}{others}")


def _result_folders(root: Path) -> list[Path]:
    return [p.parent for p in root.glob("*/environment.json") if not p.parent.name.startswith(".")]


def recorded_gpu_run(root: str | Path = RESULTS_ROOT) -> Recorded:
    """The newest recorded GPU results folder under ``root``, loaded, or a :class:`Recorded` saying there is none.

    Args:
        root: the results folder root (default: the kit's ``results/``).

    Returns:
        a :class:`Recorded`; ``found`` is false when no folder holds a finished, non-synthetic GPU measurement.
    """
    rootp = Path(root)
    folders = _result_folders(rootp) if rootp.is_dir() else []
    newest = latest_gpu_results(rootp)
    others = len([f for f in folders if f != newest and not _is_gpu(f)])
    if newest is None:
        return Recorded(root=rootp, other_folders=others)
    df, env = load_results(newest)
    return Recorded(root=rootp, folder=newest, df=df, env=env, other_folders=others)


def _is_gpu(folder: Path) -> bool:
    """A finished, non-synthetic GPU measurement (what :func:`latest_gpu_results` may return)."""
    if (folder / INCOMPLETE_MARKER).exists():
        return False
    try:
        env = json.loads((folder / "environment.json").read_text())
    except (OSError, ValueError):
        return False
    return env.get("gpu_measurement") is True and not env.get("synthetic")


def host_plot(table: pd.DataFrame, *, machine: str = "", gpu: bool = False, fontsize: int = 11):
    """Per-call host time of ``F.rms_norm`` and of the dispatched op, side by side, one pair of bars per case.

    Args:
        table: :func:`~fastpath_lib.bench.host.host_table`'s table; its fallback cases are drawn (the eligible
            case compares with the launcher, not ``F.rms_norm``: read it in the table), unmeasured ones left out.
        machine: what it was measured on (goes in the title).
        gpu: whether the calls ran on a CUDA device (the title says which kind of time this is).

    Returns:
        a matplotlib ``Figure``; each pair is labelled with its ratio and the target.
    """
    from matplotlib.figure import Figure

    t = table[(table["ratio_to"] == "F.rms_norm") & table["baseline_us"].notna() & table["dispatched_us"].notna()]
    fig = Figure(figsize=(10, 1.8 + 0.9 * max(1, len(t))), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(t)))[::-1]
    h = 0.38
    ax.barh([y + h / 2 for y in ys], t["baseline_us"], height=h, color="tab:gray", label="F.rms_norm")
    ax.barh([y - h / 2 for y in ys], t["dispatched_us"], height=h, color="tab:blue",
            label="fastpath_lib.rms_norm (dispatch + fallback)")
    for y, r in zip(ys, t.itertuples()):
        if not math.isnan(float(r.ratio)):
            ax.text(r.dispatched_us, y - h / 2, f"  {float(r.ratio):.2f}x", va="center", fontsize=fontsize - 1)
    ax.set_yticks(ys, [f"{c}\n{r.shape} {r.dtype}, {r.layout}" for c, r in zip(t.index, t.itertuples())],
                  fontsize=fontsize - 2)
    ax.set_xlabel("host time per call (us; best of several medians, torch.utils.benchmark)", fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    ax.set_xlim(0, float(max(t["dispatched_us"].max(), t["baseline_us"].max())) * 1.25 if len(t) else 1)
    kind = "CUDA calls, host side" if gpu else "CPU host time"
    ax.set_title(f"Dispatch cost on the fallback route ({kind}{', ' + machine if machine else ''})\n"
                 f"labels: dispatched / F.rms_norm; target at most {TARGET_RATIO}x", fontsize=fontsize)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=fontsize - 1)
    ax.grid(True, axis="x", alpha=0.3)
    return fig
