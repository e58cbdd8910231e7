"""The report's three PNG plots: TTFT per profile, aggregate tokens/s, serial against loaded ranking.

Pipeline position: the last step of the report stage, beside the Markdown. Draws what the sweep's
records and summaries hold (pooled request TTFTs, each repeat's tokens/s) and the rankings the judge
wrote; matplotlib's Agg backend, so no display is needed. A candidate without measurements or a
profile nobody measured leaves a labelled gap, never an empty axis without a word.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts.layout import PLOT_RANKING, PLOT_THROUGHPUT, PLOT_TTFT
from contracts.metrics import mean
from contracts.schema import GauntletConfig
from contracts.trials import read_search
from contracts.verdicts import Ranking
from report.model import ReportModel, SweepData
from report.search import confirmation_of
from report.search_plot import write_search_plot
from report.slo_plots import write_slo_plots

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _pyplot() -> Any:
    # matplotlib's first run on a machine builds its font cache and logs "generated new fontManager" at
    # INFO, which the sweep's root handler (Hydra's) printed in the middle of the decision table's output.
    # Only its warnings reach the console, unless the user chose matplotlib's level themselves.
    quiet = logging.getLogger("matplotlib")
    if quiet.level == logging.NOTSET:
        quiet.setLevel(logging.WARNING)
    import matplotlib  # noqa: PLC0415  (plots are the only user; set the backend before pyplot loads)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


_BASELINE_COLOR = "#222222"
_REVERSAL_COLORS = ["#d62728", "#ff7f0e", "#e377c2"]
_OTHER_COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#bcbd22", "#7f7f7f"]


def plot_colors(report: ReportModel) -> dict[str, str]:
    """Baseline black, candidates with a reversal in warm colours, the rest in cool ones (stable order)."""
    reversed_names = {r.candidate for r in report.reversals}
    colors = {report.baseline: _BASELINE_COLOR}
    warm = [r.candidate for r in report.rows if r.candidate in reversed_names]
    cool = [
        r.candidate for r in report.rows if r.candidate not in reversed_names and r.candidate not in colors
    ]
    colors.update({n: _REVERSAL_COLORS[i % len(_REVERSAL_COLORS)] for i, n in enumerate(warm)})
    colors.update({n: _OTHER_COLORS[i % len(_OTHER_COLORS)] for i, n in enumerate(cool)})
    return colors


def _measured_profiles(profiles: Sequence[str], data: SweepData) -> tuple[list[str], list[str]]:
    """The profiles somebody measured, and the ones nobody did."""
    seen = [p for p in profiles if any(r.repeats(p) for r in data.results.values())]
    return seen, [p for p in profiles if p not in seen]


def _log_axis(ax: Axes) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: PLC0415

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=110, metadata={"Software": None})


@dataclass(frozen=True)
class _Canvas:
    """What every plot draws with: pyplot, the sweep's config and data, candidates in table order."""

    plt: Any
    cfg: GauntletConfig
    names: Sequence[str]
    colors: dict[str, str]
    data: SweepData
    title: str


def write_plots(sweep_dir: Path, cfg: GauntletConfig, report: ReportModel, data: SweepData) -> None:
    """The three PNGs (and the SLO and search plots where the sweep has them); a candidate without
    measurements or a missing profile leaves a labelled gap."""
    plt = _pyplot()
    colors = plot_colors(report)
    title = f"{report.sweep}" + (" (SIMULATED)" if report.simulated else "")
    canvas = _Canvas(plt, cfg, [r.candidate for r in report.rows], colors, data, title)
    with plt.rc_context({"font.size": 9, "axes.titlesize": 10}):
        for fig in (_plot_ttft(canvas), _plot_throughput(canvas), _plot_ranking(plt, report, colors, title)):
            _save(fig[0], sweep_dir / fig[1])
            plt.close(fig[0])
        write_slo_plots(plt, sweep_dir, results=data.results, colors=colors, slo=cfg.slo, title=title)
        record = read_search(sweep_dir)  # the confirmation as judged: trials.json records it after the report
        confirmation = confirmation_of(report.search, record) if record is not None else None
        unit = report.search.unit if report.search is not None else ""
        write_search_plot(plt, sweep_dir, record, title, confirmation=confirmation, unit=unit)


def _grid(plt: Any, panels: int, *, cols: int, width: float, height: float) -> tuple[Any, list[Axes]]:
    rows = max(1, math.ceil(panels / cols))
    cols = max(1, min(cols, panels))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat


def _gap(ax: Axes, x: float, text: str) -> None:
    ax.annotate(
        text,
        (x, 0.5),
        xycoords=("data", "axes fraction"),
        ha="center",
        va="center",
        rotation=90,
        fontsize=8,
        color="#888888",
    )


def _plot_ttft(c: _Canvas) -> tuple[Any, str]:
    configured = list(c.cfg.run.profiles) or sorted({p for r in c.data.results.values() for p in r.profiles})
    profiles, unmeasured = _measured_profiles(configured, c.data)
    fig, axes = _grid(c.plt, len(profiles) or 1, cols=3, width=4.2, height=3.4)
    if not profiles:
        axes[0].text(
            0.5, 0.5, "no profile was measured", ha="center", va="center", transform=axes[0].transAxes
        )
        axes[0].set_axis_off()
    for ax, profile in zip(axes, profiles, strict=False):
        positions = list(range(1, len(c.names) + 1))
        series: list[list[float]] = []
        for pos, name in zip(positions, c.names, strict=True):
            res = c.data.results[name]
            values = [
                r.ttft_s
                for rep in res.samples(profile)  # a run cut short is no sample
                for r in rep.records
                if r.ttft_s is not None and r.ttft_s > 0
            ]
            series.append(values)
            if not values:
                _gap(ax, pos, "did not start" if not res.started else "not measured")
        drawn = [(p, v, n) for p, v, n in zip(positions, series, c.names, strict=True) if v]
        if drawn:
            parts = ax.boxplot(
                [v for _, v, _ in drawn],
                positions=[p for p, _, _ in drawn],
                widths=0.6,
                patch_artist=True,
                flierprops={"markersize": 2, "alpha": 0.5},
                medianprops={"color": "black"},
            )
            for patch, (_, _, name) in zip(parts["boxes"], drawn, strict=True):
                patch.set_facecolor(c.colors[name])
                patch.set_alpha(0.55)
            _log_axis(ax)
        ax.set_xlim(0.4, len(c.names) + 0.6)
        ax.set_xticks(positions, c.names, rotation=30, ha="right")
        ax.set_title(profile)
        ax.set_ylabel("TTFT (host s, log)")
        ax.grid(axis="y", which="both", alpha=0.25)
    missing = f"\nnot measured by anyone: {', '.join(unmeasured)}" if unmeasured else ""
    fig.suptitle(f"TTFT per candidate and profile: {c.title}{missing}")
    fig.tight_layout()
    return fig, PLOT_TTFT


def _plot_throughput(c: _Canvas) -> tuple[Any, str]:
    configured = [p for p in c.cfg.run.profiles if p != c.cfg.gates.answer_profile]
    profiles, unmeasured = _measured_profiles(configured, c.data)
    metrics = [("output_tps", "output tok/s"), ("prompt_tps", "prompt tok/s")]
    if not profiles:
        fig, ax = c.plt.subplots(figsize=(6.0, 3.0))
        ax.text(0.5, 0.5, "no profile was measured", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        fig.suptitle(f"Aggregate tokens/s: {c.title}")
        return fig, PLOT_THROUGHPUT
    fig, axes = _grid(c.plt, len(profiles) * 2, cols=len(profiles), width=2.9, height=3.0)
    for row, (metric, label) in enumerate(metrics):
        for col, profile in enumerate(profiles):
            ax = axes[row * len(profiles) + col]
            for x, name in enumerate(c.names):
                res = c.data.results[name]
                values = [float(getattr(rep.summary, metric)) for rep in res.samples(profile)]
                if not values:
                    _gap(ax, x, "did not start" if not res.started else "not measured")
                    continue
                average = mean(values) or 0.0
                err = [[max(0.0, average - min(values))], [max(0.0, max(values) - average)]]
                ax.bar(
                    x,
                    average,
                    width=0.7,
                    color=c.colors[name],
                    alpha=0.7,
                    yerr=err,
                    capsize=3,
                    error_kw={"elinewidth": 1},
                )
                ax.scatter([x] * len(values), values, s=8, color="black", zorder=3)
            ax.set_xlim(-0.6, len(c.names) - 0.4)
            ax.set_xticks(range(len(c.names)), c.names, rotation=35, ha="right")
            ax.set_title(f"{profile}: {label}")
            ax.set_ylim(bottom=0)
            ax.grid(axis="y", alpha=0.25)
    missing = f"\nnot measured by anyone: {', '.join(unmeasured)}" if unmeasured else ""
    fig.suptitle(f"Aggregate tokens/s (mean of repeats, bars: min-max, dots: repeats): {c.title}{missing}")
    fig.tight_layout()
    return fig, PLOT_THROUGHPUT


#: The ranking plot draws at most this many candidates (a search makes many; 101 lines are unreadable):
#: those with the best ranks, plus the baseline and every reversal. The report's tables list them all.
RANKING_TOP = 12


def ranking_shown(
    rankings: Sequence[Ranking], order: Sequence[str], *, keep: Collection[str], top: int = RANKING_TOP
) -> list[str]:
    """The candidates the ranking plot draws, in ``order`` (the report's rows): every one when there are
    at most ``top``, else the ``top`` best by their best rank in any ranking (ties in ``order``), and
    ``keep`` (the baseline, the reversals) besides (pure).

    >>> from contracts.verdicts import Ranking
    >>> r = Ranking(metric="m", profile="p", label="l", order=["c", "a", "b", "d"], values=[1, 2, 3, 4])
    >>> ranking_shown([r], ["a", "b", "c", "d"], keep={"d"}, top=2)
    ['a', 'c', 'd']
    """
    names = [n for n in order if any(n in r.order for r in rankings)]
    if len(names) <= top:
        return names
    best = {n: min(r.order.index(n) for r in rankings if n in r.order) + 1 for n in names}
    chosen = set(sorted(names, key=lambda n: (best[n], names.index(n)))[:top]) | set(keep)
    return [n for n in names if n in chosen]


def _plot_ranking(plt: Any, report: ReportModel, colors: dict[str, str], title: str) -> tuple[Any, str]:
    ranked = report.rankings
    reversed_names = {rev.candidate for rev in report.reversals}
    order = [row.candidate for row in report.rows]
    names = ranking_shown(ranked, order, keep={report.baseline, *reversed_names})
    everyone = len({n for r in ranked for n in r.order})
    height = max(4.2, 0.28 * len(names) + 2.0)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(ranked) + 3), height))
    if not ranked:
        ax.text(
            0.5,
            0.5,
            "fewer than two candidates were measured: no ranking",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        fig.suptitle(f"Serial versus loaded ranking: {title}")
        return fig, PLOT_RANKING
    for name in names:
        xs = [i for i, r in enumerate(ranked) if name in r.order]
        ys = [ranked[i].order.index(name) + 1 for i in xs]
        emphasis = name == report.baseline or name in reversed_names
        ax.plot(
            xs,
            ys,
            marker="o",
            color=colors[name],
            linewidth=2.6 if emphasis else 1.2,
            alpha=1.0 if emphasis else 0.6,
            label=name,
        )
        ax.annotate(
            name,
            (xs[0], ys[0]),
            xytext=(-8, 0),
            textcoords="offset points",
            ha="right",
            va="center",
            color=colors[name],
            fontsize=8,
        )
        ax.annotate(
            name,
            (xs[-1], ys[-1]),
            xytext=(8, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            color=colors[name],
            fontsize=8,
        )
    ranks = sorted({r.order.index(n) + 1 for r in ranked for n in names if n in r.order})
    lowest = ranks[-1] if ranks else 1
    if len(ranked) > 1:
        ax.axvspan(0.5, len(ranked) - 0.5, color="#f2f2f2", zorder=0)
        ax.text(
            len(ranked) / 2,
            lowest + 0.45,
            "under load",
            ha="center",
            va="center",
            fontsize=8,
            color="#666666",
        )
    ax.set_xticks(range(len(ranked)), [r.label.replace(" ", "\n", 1) for r in ranked], fontsize=8)
    ax.set_yticks(ranks if len(names) < everyone else range(1, lowest + 1))
    ax.set_ylim(lowest + 0.7, 0.5)
    ax.set_xlim(-1.2, len(ranked) - 1 + 1.2)
    ax.set_ylabel("rank (1 = best)")
    note = f"reversal: {', '.join(sorted(reversed_names))}" if reversed_names else "no reversal"
    shown = (
        f"\n{len(names)} of {everyone} candidates shown: the {RANKING_TOP} best ranked, the baseline and "
        "every reversal (report.md lists all)"
        if len(names) < everyone
        else ""
    )
    ax.set_title(f"Rank by serial latency (left) and under load ({note}){shown}")
    fig.suptitle(f"Serial versus loaded ranking: {title}")
    fig.tight_layout()
    return fig, PLOT_RANKING
