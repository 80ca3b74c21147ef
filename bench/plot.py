"""Plots a benchmark run (the .tsv that bench/run.sh writes) as speed-ups over plain TCP.

    plot.py RESULTS.tsv OUT.png

One panel per workload, one group of bars per case, one bar per mode: the median's speed-up over
TCP's median (TCP latency / latency, or throughput / TCP throughput, so higher is always better),
with the range of the runs as error bars, on a logarithmic axis. A workload whose reference is
another mode (TCP over veth between namespaces, for the region) is drawn against that one.
"""
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

MODES = {
    "tcp": ("TCP", "#7f7f7f"),
    "unix": ("Unix socket", "#bcbd22"),
    "usmc": ("usmc", "#1f77b4"),
    "usmc-sleep": ("usmc, sleeping", "#17becf"),
    "usmc-allshort": ("usmc, short connections accelerated too", "#393b79"),
    "usmc-bp": ("usmc, busy-poll", "#d62728"),
    "fallback": ("usmc client, plain server", "#9467bd"),
    "fallback-server": ("plain client, usmc server", "#8c564b"),
    "bare": ("bare memfd ring", "#2ca02c"),
    "bare-sleep": ("bare memfd ring, sleeping", "#98df8a"),
    "erm": ("usmc ERM, shared memory", "#ff7f0e"),
    "erm-vm": ("usmc ERM, the application's memory", "#ffbb78"),
    "memcpy": ("bare memcpy", "#e377c2"),
    "veth": ("TCP over veth", "#c7c7c7"),
    "region": ("usmc through the region", "#aec7e8"),
    "region-bp": ("usmc through the region, busy-poll", "#ff9896"),
}


def times(v):
    return f"{v:.0f}×" if v >= 10 else f"{v:.2g}×"


def load(path):
    workloads, cases = {}, defaultdict(list)
    values = defaultdict(list)
    with open(path) as f:
        for line in f:
            kind, *fields = line.rstrip("\n").split("\t")
            if kind == "W":
                # a fifth field names the reference mode (tcp when absent)
                name, title, unit, better, *ref = fields
                workloads[name] = (title, better, ref[0] if ref else "tcp")
            elif kind == "C":
                # a fourth field, lower or higher, overrides the workload's direction
                lower = fields[3] == "lower" if len(fields) > 3 else None
                cases[fields[0]].append((fields[1], fields[2], lower))
            elif kind == "V" and fields[3] != "FAILED":
                values[tuple(fields[:3])].append(float(fields[3]))
    return workloads, cases, values


def speedups(name, case, lower, workloads, values):
    """(mode, median, low, high) speed-ups of one case, against its reference's median"""
    tcp = values.get((name, case, workloads[name][2]))
    if not tcp:
        return []
    base = statistics.median(tcp)
    if lower is None:
        lower = workloads[name][1] == "lower"
    out = []
    for mode in MODES:
        runs = values.get((name, case, mode))
        if not runs:
            continue
        s = [base / v if lower else v / base for v in runs if v > 0]
        if s:
            out.append((mode, statistics.median(s), min(s), max(s)))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py RESULTS.tsv OUT.png")
    workloads, cases, values = load(sys.argv[1])
    panels = []
    for name, (title, *_) in workloads.items():
        groups = [(label, speedups(name, case, lower, workloads, values))
                  for case, label, lower in cases[name]]
        groups = [g for g in groups if g[1]]
        if groups:
            panels.append((name, title, groups))
    if not panels:
        sys.exit("plot.py: no figure has a TCP figure to compare with")

    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    # one panel alone is as wide as two: the title and the legend span it
    fig, axes = plt.subplots(rows, cols, figsize=(6 * max(cols, 2), 4.2 * rows), squeeze=False)
    seen = {}
    for ax, (name, title, groups) in zip(axes.flat, panels):
        modes = [m for m in MODES if any(m == s[0] for _, g in groups for s in g)]
        width = 0.8 / len(modes)
        for gi, (label, group) in enumerate(groups):
            for mode, med, low, high in group:
                x = gi + (modes.index(mode) - (len(modes) - 1) / 2) * width
                bar = ax.bar(x, med, width, color=MODES[mode][1],
                             yerr=[[med - low], [high - med]], capsize=2)
                seen[mode] = bar
                ax.annotate(times(med), (x, high), ha="center", va="bottom", fontsize=7,
                            xytext=(0, 2), textcoords="offset points")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: times(v)))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.axhline(1, color="black", linewidth=0.8)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([label.replace(", ", "\n") for label, _ in groups], fontsize=8)
        ax.set_title(f"{name}: {title}", fontsize=9)
        ax.set_ylabel("speed-up over TCP (median)", fontsize=8)
        ax.margins(y=0.15)
        low, high = ax.get_ylim()
        if high / low < 30:  # less than about a decade: label the minor ticks too
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: times(v)))
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    ncol = min(len(seen), 3 * cols)
    fig.legend([seen[m] for m in MODES if m in seen], [MODES[m][0] for m in MODES if m in seen],
               loc="lower center", ncol=ncol, fontsize=9)
    # a legend row takes about a quarter of an inch
    legend = 0.25 * -(-len(seen) // ncol) / (4.2 * rows)
    fig.suptitle("usmc benchmark: speed-up over plain TCP loopback (higher is better; "
                 "bars: median, whiskers: range of runs)", fontsize=10)
    fig.tight_layout(rect=(0, legend + 0.01, 1, 0.96))
    fig.savefig(sys.argv[2], dpi=110, format="png")


if __name__ == "__main__":
    main()
