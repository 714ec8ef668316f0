"""report.html's fidelity section: how far each replayed strategy is from what really ran
(`as-run`; replay/fidelity.py), and the incumbent settings the model does not implement."""

from __future__ import annotations

import html
from typing import Any

from ..replay.fidelity import verdict
from ..replay.results import Comparison

NA = "—"


def _s(x: float | None) -> str:
    if x is None:
        return NA
    return f"{x / 60:.1f} min" if x < 7200 else f"{x / 3600:.1f} h"


def _r(x: float | None) -> str:
    return NA if x is None else f"×{x:.2f}"


def _pct(x: float | None) -> str:
    return NA if x is None else f"{100 * x:.1f}%"


def _rows(kind: str, table: dict[str, Any]) -> list[str]:
    out = []
    for name, row in table.items():
        if not row.get("jobs"):
            continue
        cls = "pass" if row["close"] else "fail"
        cells = "".join(
            f"<td>{_s(row[f'replayed_p{q}_s'])} vs {_s(row[f'actual_p{q}_s'])} "
            f"({_r(row[f'p{q}_ratio'])})</td>"
            for q in (50, 90)
        )
        share = ""
        if "share_diff_points" in row:
            share = (
                f" <td>{row['replayed_share_pct']:.1f}% vs {row['actual_share_pct']:.1f}% "
                f"({row['share_diff_points']:+.1f} pts)</td>"
            )
        out.append(
            f'<tr><td>{html.escape(kind)} {html.escape(name)}</td>{cells}{share}<td class="{cls}">'
            f"{'close' if row['close'] else 'off'}</td></tr>"
        )
    return out


def fidelity_section(c: Comparison) -> str:
    """The section, or "" when the comparison had no as-run and no incumbent settings."""
    esc = html.escape
    out: list[str] = []
    if c.fidelity:
        out.append("<h3>Fidelity: each model against what really ran (as-run)</h3>")
        out.append("<p>" + "<br>".join(esc(line) for line in verdict(c.fidelity)) + "</p>")
        for name, f in c.fidelity.items():
            so, occ, mk = f["start_order"], f["occupancy"], f["makespan"]
            rho, tau = so["spearman"], so["kendall"]
            out.append(
                f"<h4>{esc(name)}</h4><p>Start order against the real starts ({so['jobs']} jobs started "
                f"in both): Spearman {NA if rho is None else f'{rho:.3f}'}, Kendall "
                f"{NA if tau is None else f'{tau:.3f}'}. Occupancy over the recorded span "
                f"{_pct(occ['replayed'])} vs {_pct(occ['actual'])} real; makespan "
                f"{_s(mk['replayed_s'])} vs {_s(mk['actual_s'])} ({_r(mk['ratio'])}).</p>"
            )
            head = "<tr><th>jobs</th><th>wait p50, replayed vs real</th><th>wait p90</th>"
            rows = _rows("size", f["sizes"])
            acc = _rows("account", f["accounts"])
            out.append(f"<table><thead>{head}<th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
            out.append(
                f"<table><thead>{head}<th>delivered share over the span</th><th></th></tr></thead>"
                f"<tbody>{''.join(acc)}</tbody></table>"
            )
    if c.not_modelled:
        items = "".join(
            f"<li><b>{esc(n['key'])}</b> = {esc(n['value'])}: {esc(n['why'])}</li>" for n in c.not_modelled
        )
        out.append(
            "<h3>Incumbent settings not modelled</h3><p>The site's Slurm runs with these settings; "
            f"slurm-multifactor does not implement them, so its figures ignore them:</p><ul>{items}</ul>"
        )
    return "\n".join(out)
