"""``report.html``: one static page with the sweep's answer, no external assets (opened from a file, mailed, kept
with the results). The figures are inlined as data URIs; the worst trials' top-down pictures are linked beside
it (``trials/.../topdown.png``, relative), with the command that opens each trial.
"""
from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .summary import SUMMARY_METRICS, format_failures

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 80em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
tr.bad td { background: #fbeaea; }
img.figure { max-width: 100%; display: block; margin: 1em 0; }
img.thumb { width: 14em; }
code { background: #f3f3f3; padding: 0 0.2em; }
"""


def write_report(path: Path, *, title: str, source: str, rows: list[Mapping[str, Any]],
                 summaries: list[Mapping[str, Any]], worst: list[Mapping[str, Any]], figures: list[Path],
                 criteria: list[str], tables: list[str], out: Path) -> Path:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>",
             f"<style>{STYLE}</style></head><body>", f"<h1>Sweep {_e(title)}</h1>",
             f"<p>{len(rows)} trials in {len(summaries)} conditions from <code>{_e(source)}</code>. "
             f"Success: ran to its end and {_e(' and '.join(criteria)) or 'nothing more'}. "
             f"Tables: {', '.join(f'<a href={_q(t)}>{_e(t)}</a>' for t in tables)}.</p>",
             "<h2>Per condition</h2>", _summary_table(summaries)]
    for figure in figures:
        data = base64.b64encode(figure.read_bytes()).decode("ascii")
        parts.append(f"<img class='figure' alt='{_e(figure.stem)}' src='data:image/png;base64,{data}'>")
    parts += ["<h2>The worst trials</h2>",
              "<p>Failures first, then collisions the robot caused, intimate-zone entries, the closest approach. "
              "Open one with <code>hil view FOLDER</code> (replay in the browser) or <code>hil report FOLDER</code>."
              "</p>", _worst_table(worst, out),
              "</body></html>"]
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def _summary_table(summaries: list[Mapping[str, Any]]) -> str:
    head = ["condition", "n", "success", "95% CI", "ok", "failed", "timeout", "why they failed"]
    for _, label, percentiles in SUMMARY_METRICS:
        head += [f"{label} mean"] + [f"p{p}" for p in percentiles]
    lines = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for s in summaries:
        rate = s["success_rate"]
        cells = [s["condition"], s["n"], f"{100 * rate:.0f}%" if rate is not None else "-",
                 f"{100 * s['ci_low']:.0f}-{100 * s['ci_high']:.0f}%" if rate is not None else "-",
                 s["ok"], s["failed"], s["timeout"], format_failures(s.get("failures") or {})]
        for column, _, percentiles in SUMMARY_METRICS:
            cells += [_num(s.get(f"{column}.mean"))] + [_num(s.get(f"{column}.p{p}")) for p in percentiles]
        bad = " class='bad'" if rate is not None and rate < 0.5 else ""
        lines.append(f"<tr{bad}>" + "".join(f"<td>{_e(str(c))}</td>" for c in cells) + "</tr>")
    return "\n".join(lines) + "</table>"


def _worst_table(worst: list[Mapping[str, Any]], out: Path) -> str:
    head = ["trial", "status", "success", "why it failed", "error", "collisions (robot)", "intimate entries",
            "min distance m", "time to goal s", "picture", "open with", "retry from 10 s before its first failure"]
    lines = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for row in worst:
        folder = str(row.get("folder"))
        picture = f"{folder}/topdown.png"
        image = f"<a href={_q(picture)}><img class='thumb' src={_q(picture)} alt='top-down'></a>" \
            if (out / picture).is_file() else "-"
        cells = [f"<td class='text'><a href={_q(folder)}>{_e(str(row.get('trial')))}</a></td>",
                 f"<td class='text'>{_e(str(row.get('status')))}</td>",
                 f"<td>{'yes' if row.get('success') else 'no'}</td>",
                 f"<td class='text'>{_e(str(row.get('failure') or ''))}</td>",
                 f"<td class='text'>{_e(_short(row.get('error')))}</td>",
                 f"<td>{_e(_num(row.get('collisions.robot_initiated'), 0))}</td>",
                 f"<td>{_e(_num(row.get('intrusions.intimate.entries'), 0))}</td>",
                 f"<td>{_e(_num(row.get('min_distance_m')))}</td>", f"<td>{_e(_num(row.get('time_to_goal_s')))}</td>",
                 f"<td>{image}</td>", f"<td class='text'><code>hil report {_e(str(out / folder))}</code></td>",
                 f"<td class='text'>{_retry(out / folder)}</td>"]
        bad = "" if row.get("success") else " class='bad'"
        lines.append(f"<tr{bad}>" + "".join(cells) + "</tr>")
    return "\n".join(lines) + "</table>"


def _retry(folder: Path) -> str:
    """``hil trial ... --from FOLDER@T`` 10 s before the trial's first collision, intrusion or failure (its
    saved states say when: trial/state/retry.py), or '-'."""
    from ..state.retry import retry_before_failure

    line = retry_before_failure(folder)
    return f"<code>{_e(line)}</code>" if line else "-"


def _short(text: Any, limit: int = 160) -> str:
    if not text:
        return ""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "~"


def _num(value: Any, decimals: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{decimals}f}"
    return str(value)


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _q(href: str) -> str:
    return '"' + html.escape(href, quote=True) + '"'
