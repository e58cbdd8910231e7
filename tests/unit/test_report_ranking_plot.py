"""The ranking plot with many candidates: the best ranked, the baseline and the reversals, said so."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from contracts.verdicts import Ranking
from report.plots import RANKING_TOP, _plot_ranking, _pyplot, ranking_shown


def _ranking(order: list[str], label: str = "serial e2e p50") -> Ranking:
    return Ranking(metric="m", profile="p", label=label, order=order, values=[1.0] * len(order))


@pytest.mark.parametrize(
    ("orders", "keep", "top", "shown"),
    [
        ([["a", "b", "c"]], set(), 3, ["a", "b", "c"]),  # few: every one
        ([["c", "b", "a", "d"]], set(), 2, ["b", "c"]),  # the best two, in the report's order
        ([["c", "b", "a", "d"]], {"d"}, 2, ["b", "c", "d"]),  # the baseline or a reversal besides
        ([["a", "b", "c", "d"], ["d", "c", "b", "a"]], set(), 2, ["a", "d"]),  # best in any ranking
        ([["a", "b", "c", "d"], ["b", "a", "d", "c"]], set(), 1, ["a"]),  # a tie: the report's order
    ],
)
def test_ranking_shown(orders: list[list[str]], keep: set[str], top: int, shown: list[str]) -> None:
    assert ranking_shown([_ranking(o) for o in orders], ["a", "b", "c", "d"], keep=keep, top=top) == shown


def test_the_ranking_plot_of_101_candidates_shows_the_top_and_says_so() -> None:
    names = ["baseline", *(f"c{i:03d}" for i in range(100))]
    serial, loaded = names[::-1], names  # the baseline is last serially, first under load
    report = SimpleNamespace(
        rankings=[_ranking(serial), _ranking(loaded, "decode_heavy output tokens/s")],
        rows=[SimpleNamespace(candidate=n) for n in names],
        reversals=[SimpleNamespace(candidate="c050")],
        baseline="baseline",
    )
    plt = _pyplot()
    fig, _ = _plot_ranking(plt, report, dict.fromkeys(names, "#000000"), "t")  # type: ignore[arg-type]
    try:
        (ax,) = fig.axes
        drawn = [line.get_label() for line in ax.get_lines()]
        assert len(drawn) <= RANKING_TOP + 2 and {"baseline", "c050"} <= set(drawn)
        assert f"{len(drawn)} of 101 candidates shown: the {RANKING_TOP} best ranked" in ax.get_title()
        assert len(ax.get_yticks()) <= 2 * len(drawn)
    finally:
        plt.close(fig)
