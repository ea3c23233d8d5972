"""The report's table of rows with their spread: mean±std over seeds, and over several workloads the range.

``report.html`` draws one overlay per row from its first run; when a row stands for several runs (``compare
--seeds N``, several traces) its numbers are means, and the page must show them with their spread as the
command's table does, or a reader takes one seed's result for the row's.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from dlsched.sim.metrics import SUMMARY_KEYS
from dlsched.sim.report import _column, _fmt


def has_spread(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether any row summarises several runs."""
    return any(int(r.get("runs", 1) or 1) > 1 or "workloads" in r for r in rows)


def _scaled(value: Any, div: float) -> Any:
    return value / div if isinstance(value, int | float) and not isinstance(value, bool) else value


def spread_table(rows: Sequence[dict[str, Any]]) -> str:
    """An HTML table: one line per row with ``mean ± std`` per metric, and ``min - max`` over workloads."""
    cols = [(k, *_column(k)) for k in SUMMARY_KEYS if any(k in r for r in rows)]
    head = "<th>row</th><th>runs</th>" + "".join(
        f"<th title='{html.escape(k)}'>{html.escape(name)}</th>" for k, name, _ in cols)
    lines = []
    for r in rows:
        cells = [f"<td class='label'>{html.escape(str(r.get('policy', '')))}</td>", f"<td>{_fmt(r.get('runs'))}</td>"]
        for k, _, div in cols:
            text = _fmt(_scaled(r.get(k), div))
            if r.get(f"{k}_std") is not None:
                text += f" &plusmn; {_fmt(_scaled(r[f'{k}_std'], div))}"
            if r.get(f"{k}_min") is not None and r.get(f"{k}_max") is not None:
                text += (f"<br><small>{_fmt(_scaled(r[f'{k}_min'], div))} &ndash; "
                         f"{_fmt(_scaled(r[f'{k}_max'], div))}</small>")
            cells.append(f"<td>{text}</td>")
        lines.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"
