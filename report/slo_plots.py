"""The SLO plots: ``pareto.png`` (output tok/s per GPU against tok/s per user) and ``goodput.png``.

Pipeline position: beside :mod:`report.plots`, drawn from each candidate's capacity search
(``capacity.json``: one point per measured load level, the median run where a level was repeated).
The Pareto plot has one curve per candidate through its load levels, the capacity level starred and
the SLO's per-user speed (1 / TPOT threshold) as a line; the goodput plot shows goodput and SLO
attainment against load, with the SLO's target attainment and each capacity marked. Without a capacity
search neither file is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contracts.layout import PLOT_GOODPUT, PLOT_PARETO
from contracts.results import CapacityPoint, CapacityResult
from contracts.schema import SloConfig
from contracts.sweepdir import Results


def level_points(result: CapacityResult) -> list[CapacityPoint]:
    """One point per load level (the median-margin run of a repeated level), by level."""
    by_level: dict[float, list[CapacityPoint]] = {}
    for point in result.points:
        by_level.setdefault(point.level, []).append(point)
    out = []
    for level in sorted(by_level):
        runs = sorted(by_level[level], key=lambda p: p.margin)
        out.append(runs[len(runs) // 2])
    return out


def write_slo_plots(
    plt: Any,
    sweep_dir: Path,
    *,
    results: Mapping[str, Results],
    colors: Mapping[str, str],
    slo: SloConfig,
    title: str,
) -> list[str]:
    """Draw both plots when some candidate has a capacity search; returns the files written."""
    searched = {name: res.capacity for name, res in results.items() if res.capacity is not None}
    if not searched:
        return []
    written = []
    for draw, name in ((_pareto, PLOT_PARETO), (_goodput, PLOT_GOODPUT)):
        fig = draw(plt, searched, colors, slo, title)
        fig.savefig(sweep_dir / name, dpi=110, metadata={"Software": None})
        plt.close(fig)
        written.append(name)
    return written


def _pareto(
    plt: Any, searched: Mapping[str, CapacityResult], colors: Mapping[str, str], slo: SloConfig, title: str
) -> Any:
    fig, ax = plt.subplots(figsize=(7, 5))
    for name, result in searched.items():
        pts = [p for p in level_points(result) if p.tps_per_user is not None]
        if not pts:
            continue
        xs = [p.tps_per_user for p in pts]
        ys = [p.output_tps / max(result.gpus, 1) for p in pts]
        color = colors.get(name, "#555555")
        ax.plot(xs, ys, "-o", color=color, label=f"{name} ({result.gpus} GPUs)", markersize=4)
        for p, x, y in zip(pts, xs, ys, strict=True):
            ax.annotate(f"{p.level:g}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
        at = [(x, y) for p, x, y in zip(pts, xs, ys, strict=True) if p.level == result.capacity]
        if at:
            ax.plot(*at[0], marker="*", markersize=14, color=color, markeredgecolor="black")
    if slo.tpot_s:
        ax.axvline(1 / slo.tpot_s, color="#888888", linestyle="--", linewidth=1)
        ax.annotate(
            f"SLO: TPOT <= {slo.tpot_s * 1e3:g} ms",
            (1 / slo.tpot_s, 0.98),
            xycoords=("data", "axes fraction"),
            ha="left",
            va="top",
            fontsize=8,
            color="#555555",
        )
    ax.set_xlabel("output tok/s per user (1 / median TPOT)")
    ax.set_ylabel("output tok/s per GPU")
    ax.set_title(f"Throughput per GPU against speed per user, by load level (star: capacity)\n{title}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _goodput(
    plt: Any, searched: Mapping[str, CapacityResult], colors: Mapping[str, str], slo: SloConfig, title: str
) -> Any:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    unit = next(iter(searched.values())).unit
    for name, result in searched.items():
        pts = level_points(result)
        color = colors.get(name, "#555555")
        levels = [p.level for p in pts]
        left.plot(levels, [p.goodput_tps for p in pts], "-o", color=color, label=name, markersize=4)
        right.plot(levels, [p.attainment for p in pts], "-o", color=color, label=name, markersize=4)
        if result.capacity is not None:
            for ax in (left, right):
                ax.axvline(result.capacity, color=color, linestyle=":", linewidth=1)
    target = slo.percentile / 100
    right.axhline(target, color="#888888", linestyle="--", linewidth=1)
    right.annotate(
        f"SLO target p{slo.percentile:g}",
        (0.02, target),
        xycoords=("axes fraction", "data"),
        va="bottom",
        fontsize=8,
        color="#555555",
    )
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415  (pyplot is loaded by the caller)

    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel(f"load ({unit})")
        ax.grid(alpha=0.3)
    left.set_ylabel("goodput (output tok/s of requests within the SLO)")
    right.set_ylabel("SLO attainment (share of requests within every threshold)")
    right.set_ylim(0, 1.05)
    left.legend(fontsize=8)
    fig.suptitle(f"Goodput and attainment against load (dotted: capacity)  {title}", fontsize=10)
    fig.tight_layout()
    return fig
