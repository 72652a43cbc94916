"""The sweep's figures, PNG with matplotlib's Agg backend (no display, no GUI toolkit):

- ``success_by_condition.png``: the success rate of each condition with its Wilson 95 % interval and n;
- ``success_by_axis.png``: per axis, the success rate of each value pooled over the other axes (which value of
  which axis hurts);
- ``metrics.png``: per summarised metric, the distribution over each condition's trials (box and every trial as
  a dot: with ten seeds a box alone hides too much).

Conditions run down the y axis so that long labels stay readable. Only this module imports matplotlib, and only
when a sweep's report is made.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .summary import SUMMARY_METRICS

DPI = 110
OK_COLOUR, BAD_COLOUR = "#3b7dd8", "#d8543b"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def write_plots(rows: list[Mapping[str, Any]], summaries: list[Mapping[str, Any]],
                axes_rates: dict[str, list[dict[str, Any]]], folder: Path, title: str) -> list[Path]:
    """Write the figures into ``folder``; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [_success_by_condition(summaries, folder / "success_by_condition.png", title)]
    if axes_rates:
        paths.append(_success_by_axis(axes_rates, folder / "success_by_axis.png", title))
    paths.append(_metrics(rows, summaries, folder / "metrics.png", title))
    return paths


def _rate_bars(ax, labels: list[str], rates: list[Mapping[str, Any]]) -> None:
    ys = list(range(len(labels)))
    values = [r["success_rate"] or 0.0 for r in rates]
    low = [max(0.0, v - (r["ci_low"] if r["ci_low"] is not None else v)) for v, r in zip(values, rates)]
    high = [max(0.0, (r["ci_high"] if r["ci_high"] is not None else v) - v) for v, r in zip(values, rates)]
    colours = [OK_COLOUR if v >= 0.5 else BAD_COLOUR for v in values]
    ax.barh(ys, values, color=colours, alpha=0.8, xerr=[low, high], capsize=3, ecolor="#333333")
    for y, v, r in zip(ys, values, rates):
        ax.text(1.04, y, f"{100 * v:.0f}% ({r['successes']}/{r['n']})", va="center", fontsize=8)
    ax.set_yticks(ys, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.3)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel("success rate (95% Wilson interval)")
    ax.grid(axis="x", alpha=0.3)


def _success_by_condition(summaries: list[Mapping[str, Any]], path: Path, title: str) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.35 * len(summaries)), dpi=DPI)
    _rate_bars(ax, [s["condition"] for s in summaries], list(summaries))
    ax.set_title(f"{title}: success per condition", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _success_by_axis(axes_rates: dict[str, list[dict[str, Any]]], path: Path, title: str) -> Path:
    plt = _pyplot()
    heights = [max(1.6, 0.9 + 0.35 * len(v)) for v in axes_rates.values()]
    fig, axs = plt.subplots(len(axes_rates), 1, figsize=(7, sum(heights)), dpi=DPI, squeeze=False,
                            gridspec_kw={"height_ratios": heights})
    for ax, (axis, rates) in zip(axs[:, 0], axes_rates.items()):
        _rate_bars(ax, [r["value"] for r in rates], rates)
        ax.set_title(f"by {axis} (pooled over the other axes)", fontsize=9)
    fig.suptitle(f"{title}: success per axis value", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _horizontal_boxes(ax, data: list[list[float]], positions: list[int]) -> None:
    style = {"positions": positions, "widths": 0.6, "showfliers": False, "medianprops": {"color": "#222222"}}
    try:
        ax.boxplot(data, orientation="horizontal", **style)  # matplotlib >= 3.10
    except TypeError:
        ax.boxplot(data, vert=False, **style)


def _metrics(rows: list[Mapping[str, Any]], summaries: list[Mapping[str, Any]], path: Path, title: str) -> Path:
    plt = _pyplot()
    import numpy as np

    conditions = [s["condition"] for s in summaries]
    n = len(SUMMARY_METRICS)
    fig, axs = plt.subplots(1, n, figsize=(3.2 * n + 2, 1.4 + 0.35 * len(conditions)), dpi=DPI, sharey=True,
                            squeeze=False)
    rng = np.random.default_rng(0)  # the dots' jitter: the same picture for the same table
    for ax, (column, label, _) in zip(axs[0], SUMMARY_METRICS):
        data = []
        for condition in conditions:
            values = [float(r[column]) for r in rows if r["condition"] == condition and
                      isinstance(r.get(column), (int, float)) and not isinstance(r.get(column), bool)]
            data.append(values)
        ys = list(range(len(conditions)))
        filled = [(d, y) for d, y in zip(data, ys) if d]
        if filled:
            _horizontal_boxes(ax, [d for d, _ in filled], [y for _, y in filled])
        for y, values, condition in zip(ys, data, conditions):
            ok = [bool(r.get("success")) for r in rows if r["condition"] == condition and
                  isinstance(r.get(column), (int, float)) and not isinstance(r.get(column), bool)]
            jitter = rng.uniform(-0.18, 0.18, len(values))
            ax.scatter(values, [y + j for j in jitter], s=10, zorder=3,
                       c=[OK_COLOUR if good else BAD_COLOUR for good in ok])
            if not values:
                ax.text(0.5, y, "no values", transform=ax.get_yaxis_transform(), ha="center", va="center",
                        fontsize=7, color="#777777")
        ax.set_title(label, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axs[0][0].set_yticks(list(range(len(conditions))), conditions, fontsize=8)
    axs[0][0].invert_yaxis()
    fig.suptitle(f"{title}: metrics per condition (dots: trials; red: not a success)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
