"""Plots the CSV of bench/python/torch_allreduce.py with gnuplot: the median time of
all_reduce against message size, shmcoll and gloo, one line per setting (P, pinned, hog), with
the p10-p99 range as error bars.

    python3 bench/python/plot_torch.py torch.csv torch.png"""

import csv
import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, png = sys.argv[1], sys.argv[2]
    series = {}
    with open(src) as f:
        for row in csv.DictReader(f):
            if row.get("mode", "allreduce") != "allreduce":
                continue
            key = "%s P=%s%s%s" % (row["impl"], row["nproc"],
                                   " pinned" if row["pin"] == "1" else "",
                                   " +%s hog" % row["hog"] if row["hog"] != "0" else "")
            series.setdefault(key, []).append(
                (int(row["bytes"]), float(row["p50_us"]), float(row["p10_us"]),
                 float(row["p99_us"])))
    if not series:
        sys.exit("plot_torch: no all_reduce rows in %s" % src)
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for i, (key, pts) in enumerate(sorted(series.items())):
            data = os.path.join(tmp, "s%d.dat" % i)
            with open(data, "w") as f:
                for b, p50, p10, p99 in sorted(pts):
                    f.write("%d %g %g %g\n" % (b, p50, p10, p99))
            dash = "dt 1" if key.startswith("shmcoll") else "dt 2"
            plots.append("'%s' using 1:2:3:4 with yerrorlines %s title '%s'" % (data, dash, key))
        script = "\n".join([
            "set terminal pngcairo size 1000,650 noenhanced",
            "set output '%s'" % png,
            "set logscale xy",
            "set grid",
            "set key left top",
            "set xlabel 'message (bytes, float32)'",
            "set ylabel 'all_reduce time per call (us): median, bars p10-p99'",
            "set title 'torch.distributed.all_reduce: shmcoll (solid) against gloo (dashed)'",
            "set format x '%.0s%cB'",
            "plot " + ", ".join(plots),
        ])
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
