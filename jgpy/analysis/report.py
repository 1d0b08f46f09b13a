"""The checker's report: ``report.md`` plus PNG plots (latency CDF, throughput over time with view changes)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jgpy.analysis import CheckResult

log = logging.getLogger("jgpy.analysis")


def _f(x, fmt: str = "{:,.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def write_report(res: "CheckResult", out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(res, out_dir)
    st = res.stats
    errors = [f for f in res.findings if f.severity == "error"]
    warnings = [f for f in res.findings if f.severity == "warning"]
    lines = [f"# Journal check: {res.run_dir}", "",
             f"Checked {time.strftime('%Y-%m-%d %H:%M:%S')} with Spark `{res.master}` in {res.seconds:.1f} s "
             f"({res.rows:,} journal rows, {res.rows / max(res.seconds, 1e-9):,.0f} rows/s).", "",
             f"**Verdict: {res.verdict}** ({len(errors)} error kinds, {len(warnings)} warning kinds)", "",
             "## Members", "", "| member | impl | rows | views | sends | deliveries | unnumbered | end |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for name, m in sorted(st["members"].items()):
        end = "closed" if m["closed"] else ("crashed (marker)" if m.get("crash_ts") else "no close row")
        lines.append(f"| {name} | {m.get('impl', '?')} | {m['rows']:,} | {m['views']} | {m['sends']:,} | "
                     f"{m['deliveries']:,} | {m['unnumbered']:,} | {end} |")
    lines += ["", "## Checks", "",
              f"Total order checked: {'yes' if res.total_order else 'no (no SEQUENCER/TOTAL in the stacks)'}; "
              f"same-view breaks are {'errors (FLUSH in the stack)' if res.flush else 'warnings (no FLUSH)'}; "
              f"{st.get('numbered_deliveries', 0):,} numbered deliveries in {st.get('streams', 0)} member x stream "
              f"pairs, {st.get('required_deliveries', 0):,} deliveries required by view membership, "
              f"{st.get('self_deliveries_required', 0):,} self-deliveries required.", ""]
    if not res.findings:
        lines.append("No findings: reliability, FIFO, view agreement, self-delivery"
                     + (", total order" if res.total_order else "") + " and same-view delivery hold.")
    else:
        lines += ["| severity | check | finding | count | first counterexample |", "|---|---|---|---:|---|"]
        for f in res.findings:
            lines.append(f"| {f.severity} | {f.check} | {f.kind} | {f.count:,} | {f.examples[0] if f.examples else ''} |")
        lines.append("")
        for f in res.findings:
            lines += [f"### {f.check} / {f.kind} ({f.severity}, {f.count:,})", ""]
            if f.note:
                lines += [f.note, ""]
            lines += [f"- {e}" for e in f.examples] + [""]
    lines += ["", "## Latency (send to delivery)", ""]
    lo = st.get("latency_overall")
    if lo and lo["n"]:
        lines += ["| pair | deliveries | mean us | p50 us | p99 us | p99.9 us |", "|---|---:|---:|---:|---:|---:|",
                  f"| **all** | {lo['n']:,} | {_f(lo['mean_us'])} | {_f(lo['p50_us'])} | {_f(lo['p99_us'])} | "
                  f"{_f(lo['p999_us'])} |"]
        for p in st.get("latency_pairs", []):
            lines.append(f"| {p['sender']} -> {p['member']}{' (unicast)' if p['dest'] else ''} | {p['n']:,} | "
                         f"{_f(p['mean_us'])} | {_f(p['p50_us'])} | {_f(p['p99_us'])} | {_f(p['p999_us'])} |")
    else:
        lines.append("No deliveries with a journaled send.")
    lines += ["", "## Throughput", ""]
    tp = st.get("throughput")
    if tp:
        lines.append(f"{tp['total_deliveries']:,} deliveries over {tp['seconds']} one-second windows: peak "
                     f"{tp['peak_per_s']:,} /s, mean {tp['mean_per_s']:,.0f} /s (all members together).")
    lines += ["", "## Crashes", ""]
    if st.get("crashes"):
        lines += ["| member | crashed at (s) | first member to exclude it (s) | all survivors (s) | per member |",
                  "|---|---:|---:|---:|---|"]
        for c in st["crashes"]:
            per = ", ".join(f"{k}: {v:.2f}" for k, v in sorted(c["by"].items()))
            lines.append(f"| {c['member']} | {c['crash_s']:.2f} | {_f(c.get('first_s'), '{:.2f}')} | "
                         f"{_f(c.get('all_s'), '{:.2f}')} | {per} |")
    else:
        lines.append("No crash markers.")
    if st.get("abrupt_ends"):
        lines.append(f"\nJournals without a close row (crashed or killed): {', '.join(st['abrupt_ends'])}.")
    lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_plots(res: "CheckResult", out_dir: Path) -> list[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots (pip install matplotlib)")
        return []
    from jgpy.analysis.checks import CDF_POINTS
    out = []
    st = res.stats
    fig, ax = plt.subplots(figsize=(8, 5))
    lo = st.get("latency_overall")
    drawn = False
    pairs = [p for p in st.get("latency_pairs", []) if not p["dest"]]
    for p in pairs[:20]:
        xs = [x for x in p["cdf_us"] if x is not None]
        if xs:
            ax.plot(xs, CDF_POINTS[:len(xs)], lw=0.8, alpha=0.6, label=f"{p['sender']} -> {p['member']}")
            drawn = True
    if lo and lo.get("cdf_us"):
        xs = [x for x in lo["cdf_us"] if x is not None]
        ax.plot(xs, CDF_POINTS[:len(xs)], lw=2.2, color="black", label="all")
        drawn = True
    if drawn:
        ax.set_xscale("log")
        ax.set_xlabel("latency, send to delivery (us)")
        ax.set_ylabel("fraction of deliveries")
        ax.set_title("Delivery latency CDF")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2 if len(pairs) > 8 else 1)
        p = out_dir / "latency_cdf.png"
        fig.savefig(p, dpi=110, bbox_inches="tight")
        out.append(p)
    plt.close(fig)

    if res.throughput:
        fig, ax = plt.subplots(figsize=(9, 5))
        per_member: dict[str, dict[int, int]] = {}
        for member, sec, deliveries, _ in res.throughput:
            per_member.setdefault(member, {})[sec] = deliveries
        lo_s = min(s for _, s, _, _ in res.throughput)
        hi_s = max(s for _, s, _, _ in res.throughput)
        secs = list(range(lo_s, hi_s + 1))
        for member, d in sorted(per_member.items())[:20]:
            ax.step(secs, [d.get(s, 0) for s in secs], where="post", lw=1, label=member)
        t0, t0s = res.stats["t0_ns"], res.stats["t0_s"]
        for ts, vc, vi in res.view_marks:
            x = ts / 1e9 - t0s
            ax.axvline(x, color="grey", ls="--", lw=0.8)
            ax.annotate(f"{vc}|{vi}", (x, 1), xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                        va="top", ha="right", color="grey")
        for c in st.get("crashes", []):
            x = c["crash_s"] + t0 / 1e9 - t0s
            ax.axvline(x, color="red", lw=1.2)
            ax.annotate(f"crash {c['member']}", (x, 0.5), xycoords=("data", "axes fraction"), rotation=90,
                        fontsize=7, color="red", ha="right")
        ax.set_xlabel("time (s), 1 s windows")
        ax.set_ylabel("deliveries per second")
        ax.set_title("Throughput per member (dashed: view installations)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        p = out_dir / "throughput.png"
        fig.savefig(p, dpi=110, bbox_inches="tight")
        out.append(p)
        plt.close(fig)
    return out
