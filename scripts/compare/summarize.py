#!/usr/bin/env python3
"""summarize.py - the report half of scripts/compare-mpi: reads the per-run CSVs,
takes the median latency per (implementation, op, size), prints the comparison
table and writes it as CSV and markdown, and renders the plots with gnuplot.
With --dist (the benchmarks' calls timed one by one) it compares the median
per-call latency, p50, and shows the 99th percentile, p99, beside it.
Python 3 standard library only."""

import argparse
import csv
import math
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

OPS = ["allreduce", "reduce", "bcast", "allgather", "reduce_scatter", "alltoall",
       "gather", "scatter", "barrier"]
NAMES = {"ompi": "Open MPI (tuned)", "ompi-collsm": "Open MPI coll/sm",
         "ompi-tcp": "Open MPI over TCP",
         "mpich": "MPICH", "shmcoll": "shmcoll",
         "ompi+shmcoll": "Open MPI with the shmcoll interposer (LD_PRELOAD)",
         "mpich+shmcoll": "MPICH with the shmcoll interposer (LD_PRELOAD)"}
# Line styles: fixed colours, so a plot reads the same whichever impls ran;
# shmcoll drawn thickest.
STYLES = {"ompi": 'lc rgb "#7b3294" pt 1 lw 2', "ompi-collsm": 'lc rgb "#008837" pt 2 lw 2',
          "mpich": 'lc rgb "#2c7bb6" pt 4 lw 2', "shmcoll": 'lc rgb "#d7191c" pt 7 lw 3',
          "ompi-tcp": 'lc rgb "#e66101" pt 5 lw 2',
          "ompi+shmcoll": 'lc rgb "#c2a5cf" pt 9 lw 2 dt 2',
          "mpich+shmcoll": 'lc rgb "#92c5de" pt 11 lw 2 dt 2'}
SHM = "shmcoll"
# An MPI run through the interposer: "<mpi>+shmcoll". Not an MPI of its own:
# the table shows the best of them in columns of their own.
INTERPOSED = "+shmcoll"


def interposed(impl):
    return impl.endswith(INTERPOSED)


# Another commit's build of shmcoll (compare-mpi --against REV): "shmcoll@<7-char
# id>". Not an MPI either: it is compared with this tree's build, shmcoll, in
# sections of its own, and drawn dashed in fixed styles, by command-line order.
AGAINST = "shmcoll@"
AGAINST_STYLES = ['lc rgb "#67001f" pt 6 lw 2 dt 2', 'lc rgb "#f4a582" pt 8 lw 2 dt 3',
                  'lc rgb "#404040" pt 12 lw 2 dt 4', 'lc rgb "#a6611a" pt 10 lw 2 dt 5']


def against(impl):
    return impl.startswith(AGAINST)


def rev_of(impl):
    """The commit id in an --against label: shmcoll@243d9ed -> 243d9ed."""
    return impl[len(AGAINST):]


def style(impl, impls):
    if against(impl):
        k = [i for i in impls if against(i)].index(impl)
        return AGAINST_STYLES[k % len(AGAINST_STYLES)]
    return STYLES.get(impl, "lw 2")


def describe(impl):
    """An implementation's label in the markdown's list of them."""
    if against(impl):
        return ("shmcoll at commit %s, with that commit's own shmcoll-run and"
                " shmcoll-bench (--against)" % rev_of(impl))
    return NAMES.get(impl, impl)


FIELDS = ["impl", "op", "ranks", "bytes", "lat_us", "algbw_GBps", "busbw_GBps"]
# What --dist adds to every row (bench/busy.c): the median and 99th percentile of the
# per-call latency (each the largest over the ranks), the calls timed, the busy processes.
DIST_FIELDS = ["p50_us", "p99_us", "calls", "hogs"]
# The latency compared, picked the fastest by, paired and plotted: "lat" (lat_us, the
# per-call average), or "p50" with --dist (main sets it).
METRIC = "lat"


def dist_mode():
    return METRIC == "p50"


# {(impl, op, bytes): {repeat: latency}}: every run's latency (METRIC) by its repeat,
# for the ratios of two builds paired within a repeat (against_rows).
BY_REPEAT = defaultdict(dict)
# With --dist, {(impl, op, bytes): {"p50": [...], "p99": [...], "calls": [...],
# "hogs": [...]}}, a value per run, as lats has lat_us.
DIST = defaultdict(lambda: defaultdict(list))


def read_runs(runs_dir, ranks):
    """{(impl, op, bytes): [lat_us, ...]} and {(impl, op): busbw/algbw factor},
    from every runs/<impl>.<op>.<rep>.csv; rows of another rank count are dropped
    (compare-mpi has reported them already). Fills BY_REPEAT too, and with --dist
    DIST (rows without its columns are dropped then)."""
    lats = defaultdict(list)
    factor = {}
    width = len(FIELDS) + (len(DIST_FIELDS) if dist_mode() else 0)
    for name in sorted(os.listdir(runs_dir)):
        if not name.endswith(".csv"):
            continue
        impl = name.split(".")[0]
        rep = name[:-len(".csv")].rsplit(".", 1)[-1]
        with open(os.path.join(runs_dir, name), newline="") as f:
            for row in csv.reader(f):
                if len(row) != width or row[0] == "impl":
                    continue
                try:
                    nranks, nbytes = int(row[2]), int(row[3])
                    lat, alg, bus = float(row[4]), float(row[5]), float(row[6])
                    d = {}
                    if dist_mode():
                        d = dict(p50=float(row[7]), p99=float(row[8]), calls=int(row[9]),
                                 hogs=int(row[10]))
                except ValueError:
                    continue
                if nranks != ranks or lat <= 0 or (d and d["p50"] <= 0):
                    continue
                key = (impl, row[1], nbytes)
                lats[key].append(lat)
                for k, v in d.items():
                    DIST[key][k].append(v)
                BY_REPEAT[key][rep] = d["p50"] if d else lat
                if alg > 0:
                    factor[(impl, row[1])] = bus / alg
    return lats, factor


def medians(lats, factor, ranks):
    """{(impl, op, bytes): dict(ranks, lat, algbw, busbw, runs, min, max)}"""
    med = {}
    for (impl, op, nbytes), v in lats.items():
        lat = statistics.median(v)
        alg = nbytes / (lat * 1e-6) / 1e9 if nbytes else 0.0
        med[(impl, op, nbytes)] = dict(ranks=ranks, lat=lat, algbw=alg,
                                       busbw=alg * factor.get((impl, op), 1.0),
                                       runs=len(v), min=min(v), max=max(v))
        d = DIST.get((impl, op, nbytes))
        if d:
            med[(impl, op, nbytes)].update(
                {k: statistics.median(x) for k, x in d.items()},
                p50_min=min(d["p50"]), p50_max=max(d["p50"]))
    return med


def fmt_bytes(n):
    if n == 0:
        return "-"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def fmt_lat(us):
    if us < 1:
        return "%.3f" % us
    if us < 10:
        return "%.2f" % us
    if us < 1000:
        return "%.1f" % us
    return "%.0f" % us


def fmt_bw(op, gbps):
    return "-" if op == "barrier" else "%.2f" % gbps


def fastest(med, impls, op, b):
    return min((i for i in impls if (i, op, b) in med),
               key=lambda i: med[(i, op, b)][METRIC], default=None)


def second(op, m):
    """The cell after a latency in the comparison table: the bus bandwidth, or
    with --dist the p99."""
    if m is None:
        return "-"
    return fmt_lat(m["p99"]) if dist_mode() else fmt_bw(op, m["busbw"])


def summary_rows(med, op, impls):
    """One row per size of op: the cells of the comparison table, and the ratio
    (best MPI latency / shmcoll latency) or None. With interposed runs, three
    more cells: the fastest of them, its latency, and the best plain MPI's
    latency over it (what the interposer gains an unmodified program). When no
    MPI ran at all (--no-mpi), only the first three cells: shmcoll's figures. With
    --dist the latencies are p50s and the bandwidth cells give way to the p99s."""
    mpis = [i for i in impls if i != SHM and not interposed(i) and not against(i)]
    withs = [i for i in impls if interposed(i)]
    sizes = sorted({b for (i, o, b) in med if o == op})
    rows = []
    for b in sizes:
        s = med.get((SHM, op, b))
        best = fastest(med, mpis, op, b)
        m = med[(best, op, b)] if best else None
        ratio = m[METRIC] / s[METRIC] if s and m else None
        cells = [fmt_bytes(b),
                 fmt_lat(s[METRIC]) if s else "-",
                 second(op, s)]
        if not mpis and not withs:
            rows.append((cells, None))
            continue
        cells += [best or "-",
                  fmt_lat(m[METRIC]) if m else "-",
                  second(op, m),
                  "%.2fx" % ratio if ratio else "-"]
        if withs:
            w = fastest(med, withs, op, b)
            x = med[(w, op, b)] if w else None
            cells += [w or "-", fmt_lat(x[METRIC]) if x else "-",
                      "%.2fx" % (m[METRIC] / x[METRIC]) if m and x else "-"]
        rows.append((cells, ratio))
    return rows


HEAD = ["size", "shmcoll us", "busbw GB/s", "best MPI", "MPI us", "busbw GB/s",
        "MPI/shmcoll"]
HEAD_WITH = ["MPI+shmcoll", "us", "MPI/(MPI+shmcoll)"]
# With --dist: the best MPI is the one of the lowest p50, and the ratios are of p50s.
HEAD_DIST = ["size", "shmcoll p50 us", "p99 us", "best MPI", "MPI p50 us", "p99 us",
             "MPI/shmcoll p50"]
HEAD_WITH_DIST = ["MPI+shmcoll", "p50 us", "MPI/(MPI+shmcoll) p50"]


def head_of(rows):
    n = len(rows[0][0]) if rows else len(HEAD)
    if dist_mode():
        return (HEAD_DIST + HEAD_WITH_DIST)[:n]
    return (HEAD + HEAD_WITH)[:n]
# Run-to-run spread on the reference VM is 5-30 % (baseline README): a ratio
# closer to 1 than this is not a difference.
NOISE = 1.3


def verdict(rows):
    if rows and len(rows[0][0]) < len(HEAD):
        return None  # no MPI ran: nothing to compare shmcoll with
    ratios = [r for _, r in rows if r]
    if not ratios:
        return "no size has both shmcoll and an MPI"
    gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    faster = sum(r > NOISE for r in ratios)
    slower = sum(r < 1 / NOISE for r in ratios)
    text = ("of %d sizes, shmcoll is > %.1fx faster at %d, > %.1fx slower at %d, within"
            " noise at %d; geometric mean MPI/shmcoll %.2fx"
            % (len(ratios), NOISE, faster, NOISE, slower, len(ratios) - faster - slower, gm))
    if dist_mode():
        text = "in p50, " + text
    gains = [float(c[-1][:-1]) for c, _ in rows if len(c) > len(HEAD) and c[-1] != "-"]
    if gains:
        text += ("; through the interposer the MPI program is > %.1fx faster at %d sizes,"
                 " > %.1fx slower at %d, geometric mean %.2fx"
                 % (NOISE, sum(g > NOISE for g in gains), NOISE,
                    sum(g < 1 / NOISE for g in gains),
                    math.exp(sum(math.log(g) for g in gains) / len(gains))))
    return text


def fmt_text(head, body, left=()):
    """Plain-text table: the columns in left (the implementations' names)
    left-aligned, the numbers right-aligned."""
    cells = [head] + body
    width = [max(len(c[k]) for c in cells) for k in range(len(head))]
    return ["  ".join(c[k].ljust(width[k]) if k in left else c[k].rjust(width[k])
                      for k in range(len(c))).rstrip() for c in cells]


def fmt_md(head, body, left=()):
    align = "|" + "".join(":---|" if k in left else "---:|" for k in range(len(head)))
    return ["| " + " | ".join(head) + " |", align] + ["| " + " | ".join(r) + " |" for r in body]


def text_table(rows):
    return fmt_text(head_of(rows), [r for r, _ in rows], left=(3, 7))


def md_table(rows):
    return fmt_md(head_of(rows), [r for r, _ in rows], left=(3, 7))


# --against: two builds of shmcoll whose latencies differ by more than this
# factor either way are counted as apart. Below the run-to-run noise of single
# runs (NOISE), but interleaved repeats of the same benchmark code resolve it;
# an A/A run (--against HEAD on a clean tree) shows how far it can be trusted.
APART = 1.05


def paired_ratio(rev, op, b):
    """The median over the repeats of rev's latency over shmcoll's in the same repeat,
    or None. The two runs of a repeat are adjacent in time, so a change of the
    machine's state between repeats (this VM's slow mode comes and goes within a
    minute) cancels out, where a ratio of medians taken across repeats in different
    states would not."""
    r, s = BY_REPEAT.get((rev, op, b), {}), BY_REPEAT.get((SHM, op, b), {})
    pairs = [r[k] / s[k] for k in r if k in s]
    return statistics.median(pairs) if pairs else None


def against_rows(med, op, rev):
    """One row per size of op that either build ran: the cells (size, rev's median
    latency, shmcoll's, rev/shmcoll paired within repeats) and that ratio, or None
    where one is missing. > 1: the current build is faster."""
    rows = []
    for b in sorted({b for (i, o, b) in med if o == op and i in (rev, SHM)}):
        r, s = med.get((rev, op, b)), med.get((SHM, op, b))
        ratio = paired_ratio(rev, op, b) if r and s else None
        rows.append(([fmt_bytes(b), fmt_lat(r[METRIC]) if r else "-",
                      fmt_lat(s[METRIC]) if s else "-",
                      "%.2fx" % ratio if ratio else "-"], ratio))
    return rows


def against_head(rev):
    if dist_mode():
        return ["size", rev + " p50 us", "shmcoll p50 us", "%s/current p50" % rev_of(rev)]
    return ["size", rev + " us", "shmcoll us", "%s/current" % rev_of(rev)]


def against_stats(rows):
    """(sizes compared, geometric mean of rev/current, sizes where the current
    build is > APART faster, sizes where it is > APART slower), or None."""
    ratios = [r for _, r in rows if r]
    if not ratios:
        return None
    gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    return (len(ratios), gm, sum(r > APART for r in ratios),
            sum(r < 1 / APART for r in ratios))


def against_line(rev, stats):
    if stats is None:
        return "no size has both %s and shmcoll" % rev
    n, gm, faster, slower = stats
    pct = round((APART - 1) * 100)
    return ("%s/current over %d sizes: geometric mean %.3fx (> 1: the current build is"
            " faster); the current build is > %d%% faster at %d, > %d%% slower at %d,"
            " within %d%% at %d" % (rev_of(rev), n, gm, pct, faster, pct, slower, pct,
                                   n - faster - slower))


def against_summary(stats_of, rev, ops):
    """The head and rows of the one-line-per-op table of rev against shmcoll."""
    pct = round((APART - 1) * 100)
    head = ["op", "sizes", "%s/current geomean" % rev_of(rev),
            "current > %d%% faster" % pct, "current > %d%% slower" % pct]
    body = []
    for op in ops:
        st = stats_of.get((rev, op))
        if st is None:
            body.append([op, "0", "-", "-", "-"])
        else:
            n, gm, faster, slower = st
            body.append([op, str(n), "%.3fx" % gm, str(faster), str(slower)])
    return head, body


def write_csv(path, med, impls, ops):
    """The medians; with --dist, the benchmarks' columns p50_us, p99_us, calls and hogs
    (medians over the runs) after busbw_GBps, and p50_min_us, p50_max_us at the end."""
    dist = dist_mode()
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(FIELDS + (DIST_FIELDS if dist else []) + ["runs", "lat_min_us", "lat_max_us"]
                   + (["p50_min_us", "p50_max_us"] if dist else []))
        for op in ops:
            for impl in impls:
                for (i, o, b), m in sorted(med.items(), key=lambda kv: kv[0][2]):
                    if i == impl and o == op:
                        row = [impl, op, m["ranks"], b, "%.3f" % m["lat"],
                               "%.4f" % m["algbw"], "%.4f" % m["busbw"]]
                        if dist:
                            row += ["%.3f" % m["p50"], "%.3f" % m["p99"],
                                    "%.0f" % m["calls"], "%.0f" % m["hogs"]]
                        row += [m["runs"], "%.3f" % m["min"], "%.3f" % m["max"]]
                        if dist:
                            row += ["%.3f" % m["p50_min"], "%.3f" % m["p50_max"]]
                        w.writerow(row)


# A run during which other processes used this much of the CPUs is flagged.
DISTURBED = 10


def read_status(path):
    """Notes on the runs: those that failed (compare-mpi skips their later
    repeats) and those other processes disturbed."""
    notes, disturbed = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            run = "%s %s (repeat %s)" % (row["impl"], row["op"], row["rep"])
            if row["status"] != "ok":
                notes.append("%s: %s" % (run, row["note"]))
            if row["others"].isdigit() and int(row["others"]) >= DISTURBED:
                disturbed.append("%s %s%%" % (run, row["others"]))
    if disturbed:
        notes.append("other processes used >= %d%% of the CPUs during %d run(s), whose"
                     " timings are suspect: %s" % (DISTURBED, len(disturbed),
                                                   ", ".join(disturbed)))
    return notes


def gnuplot_terminal():
    """pngcairo where gnuplot has it (Debian's gnuplot-nox does), else png (libgd)."""
    for term in ("pngcairo", "png"):
        r = subprocess.run(["gnuplot", "-e", "set terminal " + term],
                           capture_output=True, text=True)
        if r.returncode == 0 and not r.stderr.strip():
            return term
    return None


def xtics(sizes):
    """At most 8 labelled sizes, counted back from the largest."""
    step = max(1, math.ceil(len(sizes) / 8))
    picks = sorted(sizes[::-step])
    return ", ".join('"%s" %d' % (fmt_bytes(b).replace(" ", ""), b) for b in picks)


def plots(med, impls, ops, out, work, tag, caption):
    """<op>-<tag>-lat.png and <op>-<tag>-busbw.png per op (barrier has one point
    and no bandwidth: no plot). Returns the names written, or a reason for none."""
    if shutil.which("gnuplot") is None:
        return [], "gnuplot is not installed: no plots"
    term = gnuplot_terminal()
    if term is None:
        return [], "gnuplot offers neither pngcairo nor png: no plots"
    font = ' font ",11"' if term == "pngcairo" else ""
    script = ["set terminal %s noenhanced size 900,560%s" % (term, font),
              "set grid", "set key top left", "set logscale x 2"]
    written = []
    for op in ops:
        if op == "barrier":
            continue
        series = []
        for impl in impls:
            pts = sorted((b, med[(impl, op, b)]) for (i, o, b) in med if i == impl and o == op)
            if not pts:
                continue
            dat = os.path.join(work, "%s.%s.dat" % (op, impl))
            with open(dat, "w") as f:
                for b, m in pts:
                    f.write("%d %.6g %.6g\n" % (b, m[METRIC], m["busbw"]))
            series.append((impl, dat))
        if not series:
            continue
        sizes = sorted({b for (i, o, b) in med if o == op})
        script.append("set xtics (%s)" % xtics(sizes))
        script.append("set xrange [%g:%g]" % (sizes[0] / 1.4, sizes[-1] * 1.4))
        script.append('set xlabel "size (bytes, as shmcoll-bench and mpi-bench count them)"')
        for kind, col, ylabel, logy in (("lat", 2, "p50 latency per call (us)" if dist_mode()
                                         else "latency (us)", True),
                                        ("busbw", 3, "bus bandwidth (GB/s)", False)):
            png = "%s-%s-%s.png" % (op, tag, kind)
            script.append('set output "%s"' % os.path.join(out, png))
            script.append("set logscale y" if logy else "unset logscale y")
            script.append('set ylabel "%s"' % ylabel)
            script.append('set title "%s, %s"' % (op, caption))
            script.append("plot " + ", ".join(
                '"%s" using 1:%d with linespoints %s title "%s"'
                % (dat, col, style(i, impls), NAMES.get(i, i))
                for i, dat in series))
            written.append(png)
    gp = os.path.join(work, "plots.gp")
    with open(gp, "w") as f:
        f.write("\n".join(script) + "\n")
    r = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return [], "gnuplot failed on %s: %s" % (gp, last)
    return written, None


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", required=True, help="directory of <impl>.<op>.<rep>.csv")
    p.add_argument("--status", required=True, help="status.tsv written by compare-mpi")
    p.add_argument("--meta", required=True, help="key<TAB>value lines for the markdown")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--repeat", type=int, required=True)
    p.add_argument("--sync", action="store_true")
    p.add_argument("--dist", action="store_true",
                   help="rows with p50_us,p99_us,calls,hogs: compare p50, show p99")
    p.add_argument("--hogs", type=int, default=0, help="busy processes in every run")
    p.add_argument("--hog-pin", action="store_true", help="the busy processes were pinned")
    p.add_argument("--unpinned", action="store_true", help="no implementation pinned its ranks")
    p.add_argument("--tag", required=True, help="file name part, e.g. P2 or P2-sync")
    p.add_argument("--out", required=True)
    p.add_argument("--stem", required=True, help="name of the .csv and .md")
    p.add_argument("--ops", required=True)
    p.add_argument("--impls", required=True)
    a = p.parse_args()
    global METRIC
    METRIC = "p50" if a.dist else "lat"
    ops = [o for o in OPS if o in a.ops.split()]
    impls = a.impls.split()
    mode = "OSU-style --sync" if a.sync else "back-to-back"
    if a.dist:
        mode += " calls timed one by one (--dist)"
        if a.hogs:
            mode += ", %d busy process%s (%s)" % (a.hogs, "" if a.hogs == 1 else "es",
                                                  "pinned" if a.hog_pin else "unpinned")
    if a.unpinned:
        mode += ", ranks unpinned"
    caption = "P=%d, %s, median of %d run%s" % (a.ranks, mode, a.repeat,
                                                "" if a.repeat == 1 else "s")

    lats, factor = read_runs(a.runs, a.ranks)
    med = medians(lats, factor, a.ranks)
    with open(a.meta) as f:
        meta = [line.rstrip("\n").split("\t", 1) for line in f if "\t" in line]
    notes = read_status(a.status)
    plotted, plot_note = plots(med, impls, ops, a.out, os.path.dirname(a.status), a.tag,
                               caption)
    if plot_note:
        notes.append(plot_note)

    revs = [i for i in impls if against(i)]
    any_mpi = any(i != SHM and not against(i) for i in impls)
    txt = []
    md = ["# shmcoll vs %s: %s" % (" and ".join((["MPI"] if any_mpi or not revs else []) + revs),
                                   caption), "",
          "Generated by `scripts/compare-mpi`. Every figure is the median over the runs of"
          " one implementation (`runs` in the CSV)"
          + (("; p50 and p99 are the median and the 99th percentile of the calls timed one by"
              " one (each the largest over the ranks), and the best MPI is the one of the"
              " lowest p50; MPI/shmcoll p50 is its p50 over shmcoll's" if a.dist else
              "; MPI/shmcoll is the best MPI's latency over shmcoll's")
             + ", so > 1 means shmcoll is"
             " faster. Differences under ~1.3x are within this machine's run-to-run noise."
             if any_mpi or not revs else ".")
          + (" MPI+shmcoll is the fastest MPI run with the shmcoll interposer preloaded"
             " (the same mpi-bench binary, unmodified), and MPI/(MPI+shmcoll) the best"
             " plain MPI's %s over it." % ("p50" if a.dist else "latency")
             if any(interposed(i) for i in impls) else "")
          + (" `shmcoll@<id>` is shmcoll built from commit <id> (--against), run interleaved"
             " with the others in every repeat; <id>/current is the median over the repeats of"
             " its %s over this tree's build's (`shmcoll`) in the same repeat (the two"
             " runs are adjacent, so the machine's changes of state between repeats cancel"
             " out), so > 1 means the current build is faster, and"
             " sizes more than %d%% apart either way are counted."
             % ("p50" if a.dist else "latency", round((APART - 1) * 100)) if revs else ""),
          ""]
    md += ["- **%s**: %s" % (k, v.replace("|", "\\|")) for k, v in meta]
    md.append("- **implementations**: " + ", ".join(
        "`%s` = %s" % (i, describe(i)) for i in impls)
        + (" (coll/sm only for allreduce, reduce, bcast and barrier, the only collectives"
           " Open MPI 4.1's coll/sm implements)" if "ompi-collsm" in impls else ""))
    md.append("- **sizes** as shmcoll-bench and mpi-bench count them: the buffer on every"
              " rank for allreduce, reduce, bcast; the total gathered or scattered data for allgather,"
              " gather, reduce_scatter, scatter; the per-rank send buffer for alltoall."
              " busbw = algbw x 2(P-1)/P for allreduce, x (P-1)/P for the gather/scatter"
              " family and alltoall, x 1 for bcast and reduce (nccl-tests)")
    md += ["- **medians of every implementation**: [%s.csv](%s.csv)" % (a.stem, a.stem), ""]

    stats_of = {}  # (rev, op): against_stats()
    for op in ops:
        rows = summary_rows(med, op, impls)
        if not rows:
            txt += ["", "%s: no results" % op]
            md += ["## %s" % op, "", "No results.", ""]
            continue
        txt += ["", "%s (%s)" % (op, caption)]
        txt += ["  " + line for line in text_table(rows)]
        md += ["## %s" % op, ""] + md_table(rows) + [""]
        v = verdict(rows)
        if v:
            txt.append("  " + v)
            md += [v + ".", ""]
        for rev in revs:
            arows = against_rows(med, op, rev)
            st = stats_of[(rev, op)] = against_stats(arows)
            head, body = against_head(rev), [c for c, _ in arows]
            txt += ["", "%s: %s against this build (shmcoll)" % (op, rev)]
            txt += ["  " + line for line in fmt_text(head, body)]
            txt.append("  " + against_line(rev, st))
            md += ["### %s: %s against shmcoll" % (op, rev), ""] + fmt_md(head, body)
            md += ["", against_line(rev, st) + ".", ""]
        pngs = ["%s-%s-%s.png" % (op, a.tag, kind) for kind in ("lat", "busbw")]
        md += ["![%s](%s)" % (png[:-4], png) for png in pngs if png in plotted] + [""]
    for rev in revs:
        head, body = against_summary(stats_of, rev, ops)
        title = ("%s against this build (shmcoll), per op: the geometric mean over the"
                 " sizes of %s/current (> 1: the current build is faster)" % (rev, rev_of(rev)))
        txt += ["", title + ":"] + ["  " + line for line in fmt_text(head, body, left=(0,))]
        md += ["## %s against shmcoll, per op" % rev, "", title + ".",
               ""] + fmt_md(head, body, left=(0,)) + [""]
    if notes:
        txt += ["", "Notes:"] + ["  " + n for n in notes]
        md += ["## Notes", ""] + ["- " + n for n in notes] + [""]

    print("\n".join(txt))
    write_csv(os.path.join(a.out, a.stem + ".csv"), med, impls, ops)
    with open(os.path.join(a.out, a.stem + ".md"), "w") as f:
        f.write("\n".join(md).rstrip("\n") + "\n")
    print("\nwrote %s.csv, %s.md and %d plots to %s/" % (a.stem, a.stem, len(plotted), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
