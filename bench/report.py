#!/usr/bin/env python3
"""bench/report.py DIR [--quick] [--check]: turn bench/bench's raw results into tables and plots.

--check also tests every boot's cells against the model of synchronous
faults and ends with "N passed, N failed": a MAP_SYNC write fault into a
hole or an unwritten extent syncs once, and with the allocation look-ahead
of kernel-patches 0011/0012 (sync_fault_alloc_kb, recorded per cell) once
per aligned range it allocates; nothing else syncs; a 2 MiB cell takes only
2 MiB faults.

Reads DIR/bench.jsonl (one line per cell and boot, from faultbench),
DIR/boots.jsonl (kernel, accelerator, version and series of each boot) and
DIR/raw/*.txt (every latency), and writes:
  results.json, results.csv   per kernel and cell: medians over repetitions,
                              coefficient of variation of the p50
  report.md                   the ratio tables (printed too)
  ratio-sync-vs-shared.png    p50 and p99 ratio MAP_SYNC / MAP_SHARED per cell
  cdf-<fs>-<map>-<state>-<size>.png   latency CDF, one line per kernel
"""
import csv
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

METRICS = ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "mean_ns", "max_ns",
           "faults_per_s", "msync_end_ns", "sync_faults", "pmd_faults"]
CV_FLAG = 0.10


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cell_key(r):
    return (r["fs"], r["map"], r["state"], r["size"])


def cell_name(c):
    return "-".join(c)


def us(ns):
    return f"{ns / 1000:.1f}"


def ratio(a, b):
    return a / b if b else float("nan")


def main():
    out = sys.argv[1]
    quick = "--quick" in sys.argv
    rows = load(os.path.join(out, "bench.jsonl"))
    boots = {b["label"]: b for b in load(os.path.join(out, "boots.jsonl"))}
    if not rows:
        sys.exit("report: no results in " + out)

    # kernel -> cell -> list of rows (one per repetition)
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[boots[r["label"]]["kernel"]][cell_key(r)].append(r)
    kernels = sorted(by, key=lambda k: (k != "stock", k))
    cells = sorted({c for k in by for c in by[k]})

    agg = {}
    for k in kernels:
        for c in cells:
            reps = by[k].get(c, [])
            if not reps:
                continue
            a = {m: statistics.median(r[m] for r in reps) for m in METRICS}
            p50s = [r["p50_ns"] for r in reps]
            a["reps"] = len(reps)
            a["faults"] = reps[0]["faults"]
            a["alloc_kb"] = reps[0].get("alloc_kb", -1)
            a["p50_cv"] = (statistics.pstdev(p50s) / statistics.mean(p50s)) if len(p50s) > 1 else 0.0
            agg[(k, c)] = a

    accels = sorted({b["accel"] for b in boots.values()})
    meta = {
        "accelerator": accels,
        "host_cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                          if l.startswith("model name")), "?"),
        "kernels": {k: {kk: v for kk, v in b.items() if kk in ("version", "series_sha1", "patches")}
                    for b in boots.values() for k in [b["kernel"]]},
        "quick": quick,
    }
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "cells": [dict(kernel=k, fs=c[0], map=c[1], state=c[2], size=c[3], **a)
                                           for (k, c), a in sorted(agg.items())]}, f, indent=1)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kernel", "fs", "map", "state", "size", "reps", "faults"] + METRICS + ["p50_cv"])
        for (k, c), a in sorted(agg.items()):
            w.writerow([k, *c, a["reps"], a["faults"]] + [a[m] for m in METRICS] + [f"{a['p50_cv']:.3f}"])

    md = []
    md.append("# Fault-path benchmark" + (" (quick)" if quick else ""))
    md.append("")
    md.append(f"Accelerator: **{', '.join(accels)}**. Host CPU: {meta['host_cpu']}. "
              + "; ".join(f"{k}: {v.get('version', '?')}, {v.get('patches', 0)} patches, series {v.get('series_sha1', '?')}"
                          for k, v in meta["kernels"].items()) + ".")
    if "tcg" in accels:
        md.append("")
        md.append("Under TCG every guest instruction is emulated: the absolute microseconds below are "
                  "not hardware figures. Read the ratios.")
    md.append("")
    md.append("## MAP_SYNC / MAP_SHARED on DAX (ratio of medians over repetitions)")
    md.append("")
    md.append("| fs | state | size | kernel | p50 ratio | p99 ratio | mean ratio | sync faults per 1000 (MAP_SYNC) | p50 MAP_SYNC µs | p50 MAP_SHARED µs |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    bars = []
    for c in cells:
        fs, m, st, sz = c
        if m != "sync":
            continue
        other = (fs, "shared", st, sz)
        for k in kernels:
            a, b = agg.get((k, c)), agg.get((k, other))
            if not a or not b:
                continue
            r50, r99 = ratio(a["p50_ns"], b["p50_ns"]), ratio(a["p99_ns"], b["p99_ns"])
            md.append(f"| {fs} | {st} | {sz} | {k} | {r50:.2f} | {r99:.2f} | "
                      f"{ratio(a['mean_ns'], b['mean_ns']):.2f} | {1000 * a['sync_faults'] / a['faults']:.0f} | "
                      f"{us(a['p50_ns'])} | {us(b['p50_ns'])} |")
            if k == kernels[-1]:
                bars.append((f"{fs}-{st}-{sz}", r50, r99))
    if len(kernels) > 1:
        base, new = kernels[0], kernels[-1]
        md.append("")
        md.append(f"## {new} / {base}, per cell (ratio of medians; CV = spread of the p50 over repetitions)")
        md.append("")
        md.append("| fs | map | state | size | p50 ratio | p99 ratio | sync faults per MiB " + base + " → " + new
                  + " | CV " + base + " | CV " + new + " |")
        md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for c in cells:
            a, b = agg.get((new, c)), agg.get((base, c))
            if not a or not b:
                continue
            flag = lambda v: f"{100 * v:.0f}%" + (" ⚠" if v > CV_FLAG else "")
            md.append(f"| {' | '.join(c)} | {ratio(a['p50_ns'], b['p50_ns']):.2f} | "
                      f"{ratio(a['p99_ns'], b['p99_ns']):.2f} | "
                      f"{syncs_per_mib(b, c[3]):.1f} → {syncs_per_mib(a, c[3]):.1f} | "
                      f"{flag(b['p50_cv'])} | {flag(a['p50_cv'])} |")
        md.append("")
        md.append(f"⚠: coefficient of variation above {int(CV_FLAG * 100)}%: the cell's p50 moved that much "
                  "between repetitions; read its ratio with care.")
    fills = [(fs, st) for fs in sorted({c[0] for c in cells})
             for st in ("hole", "unwritten", "hole-random", "hole-stride", "hole-extsize64k")
             if any(c == (fs, "sync", st, "4k") for c in cells)]
    if fills:
        md.append("")
        md.append("## PTE-only first-write fills: the MAP_SYNC allocation look-ahead (0011/0012)")
        md.append("")
        md.append("Every page (hole-stride: one page per 64 KiB) written once through a mapping that "
                  "cannot take 2 MiB faults. Means, so that the rare faults that allocate and commit "
                  "count in full.")
        md.append("")
        md.append("| fs | fill | kernel | sync_fault_alloc_kb | MAP_SYNC mean µs | MAP_SHARED mean µs | "
                  "MAP_SYNC / MAP_SHARED | MAP_SYNC mean vs " + kernels[0] + " | sync faults per MiB |")
        md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for fs, st in fills:
            for k in kernels:
                a, b = agg.get((k, (fs, "sync", st, "4k"))), agg.get((k, (fs, "shared", st, "4k")))
                s0 = agg.get((kernels[0], (fs, "sync", st, "4k")))
                if not a:
                    continue
                md.append(f"| {fs} | {st} | {k} | {'-' if a['alloc_kb'] < 0 else a['alloc_kb']} | "
                          f"{us(a['mean_ns'])} | {us(b['mean_ns']) if b else '-'} | "
                          f"{ratio(a['mean_ns'], b['mean_ns']) if b else float('nan'):.2f} | "
                          f"{ratio(a['mean_ns'], s0['mean_ns']) if s0 else float('nan'):.2f} | "
                          f"{syncs_per_mib(a, '4k'):.1f} |")
    md += fio_crosscheck(out, boots, agg, kernels)
    md.append("")
    md.append("## Every cell (medians over repetitions)")
    md.append("")
    md.append("| kernel | fs | map | state | size | faults | p50 µs | p90 µs | p99 µs | p99.9 µs | mean µs | max µs | faults/s | sync faults | 2 MiB faults | msync at end µs |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (k, c), a in sorted(agg.items()):
        md.append(f"| {k} | {' | '.join(c)} | {a['faults']} | {us(a['p50_ns'])} | {us(a['p90_ns'])} | "
                  f"{us(a['p99_ns'])} | {us(a['p999_ns'])} | {us(a['mean_ns'])} | {us(a['max_ns'])} | "
                  f"{a['faults_per_s']:.0f} | {a['sync_faults']:.0f} | "
                  f"{'-' if a['pmd_faults'] < 0 else int(a['pmd_faults'])} | "
                  f"{us(a['msync_end_ns']) if a['msync_end_ns'] else '-'} |")

    plots = plot(out, kernels, cells, bars)
    md.append("")
    md.append("Plots: " + ", ".join(os.path.basename(p) for p in plots[:3])
              + (f" and {len(plots) - 3} more" if len(plots) > 3 else "") + f" in {out}.")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    if "--check" in sys.argv:
        sys.exit(check(rows, boots))


def stride_pages(state):
    """4 KiB pages between two faults of a cell (faultbench's -stride: 64 KiB)."""
    return 16 if state.endswith("-stride") else 1


def model_syncs(r):
    """Synchronous faults the kernel should report for a cell."""
    if r["map"] != "sync" or r["state"].split("-")[0] not in ("hole", "unwritten"):
        return 0
    kb = min(r.get("alloc_kb", -1), 2048)
    if r["size"] != "4k" or kb <= 4:
        return r["faults"]
    cluster = (1 << (kb.bit_length() - 1)) // 4      # pages, a power of two
    stride = stride_pages(r["state"])
    if cluster <= stride:
        return r["faults"]
    return -(-r["faults"] * stride // cluster)         # clusters touched


def syncs_per_mib(a, size):
    """synchronous faults per MiB written (each fault writes one 4 KiB page or 2 MiB)"""
    return a["sync_faults"] / (a["faults"] * (512 if size == "2m" else 1) / 256)


def load_fio(out, boots):
    """kernel -> (fs, state) -> [fio write µs per I/O, one per boot], from raw/<label>-<fs>-fio-<state>.json"""
    got = defaultdict(lambda: defaultdict(list))
    raw = os.path.join(out, "raw")
    for label, b in boots.items():
        for fs in ("ext4", "xfs"):
            for st in ("hole", "written"):
                path = os.path.join(raw, f"{label}-{fs}-fio-{st}.json")
                if not os.path.exists(path):
                    continue
                text = open(path).read()
                try:
                    job = json.loads(text[text.index("{"):])["jobs"][0]["write"]
                except (ValueError, KeyError, IndexError):
                    continue
                if job.get("iops"):
                    got[b["kernel"]][(fs, st)].append(1e6 / job["iops"])
    return got


def fio_crosscheck(out, boots, agg, kernels):
    """Markdown: our shared 4k cells against fio on the same faults."""
    fio = load_fio(out, boots)
    md = ["", "## Cross-check with fio (ioengine=mmap)", ""]
    if not fio:
        md.append("No fio results in this run (fio missing on the host, or it failed in the guest).")
        return md
    md.append("fio writes each 4 KiB page of 1 MiB files once through MAP_SHARED (files under 2 MiB: "
              "4 KiB faults only): sparse files (hole, the faults of the shared / hole / 4k cell) and "
              "files fio wrote out first (written: overwrite faults). Per I/O, fio adds its own work "
              "(a 4 KiB memcpy, its accounting) to the fault, so its throughput is lower; the "
              "written run measures that. The cost of the allocating fault itself, hole minus "
              "written, must agree within 20%.")
    md.append("")
    md.append("| kernel | fs | faultbench MiB/s (hole) | fio MiB/s (hole) | allocating fault, faultbench µs "
              "| allocating fault, fio µs | faultbench / fio | agrees |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for k in kernels:
        for fs in ("ext4", "xfs"):
            h, w = fio.get(k, {}).get((fs, "hole")), fio.get(k, {}).get((fs, "written"))
            a = agg.get((k, (fs, "shared", "hole", "4k")))
            b = agg.get((k, (fs, "shared", "written", "4k")))
            if not (h and w and a and b):
                continue
            ours = (a["mean_ns"] - b["mean_ns"]) / 1000
            theirs = statistics.median(h) - statistics.median(w)
            r = ratio(ours, theirs)
            md.append(f"| {k} | {fs} | {a['faults_per_s'] * 4096 / 2**20:.1f} | "
                      f"{4096 / statistics.median(h) * 1e6 / 2**20:.1f} | {ours:.1f} | {theirs:.1f} | {r:.2f} | "
                      f"{'yes' if abs(r - 1) <= 0.20 else 'NO'} |")
    return md


def expected_cells():
    """Every cell bench/run-guest runs in each boot (fs, map, state, size);
    written out here, not taken from the results, so that a cell that
    went missing is seen."""
    cells = []
    for fs in ("ext4", "xfs"):
        for state in ("hole", "unwritten", "written", "read"):
            cells += [(fs, m, state, "4k") for m in ("sync", "shared")]
        for state in ("hole-random", "hole-stride") + (("hole-extsize64k",) if fs == "xfs" else ()):
            cells += [(fs, m, state, "4k") for m in ("sync", "shared")]
        for state in ("hole", "written"):
            cells += [(fs, m, state, "4k") for m in ("msync-each", "msync-end")]
        cells += [(fs, m, "hole", "2m") for m in ("sync", "shared")]
    return cells


def check(rows, boots):
    """KTAP lines and a tally: the kernel's counts against the model; a cell
    missing from a boot's results fails."""
    npass = nfail = 0
    print("\nTAP version 13")
    seen = {(r["label"], cell_key(r)) for r in rows}
    missing = [(label, c) for label in sorted(boots) for c in expected_cells() if (label, c) not in seen]
    for label, c in missing:
        nfail += 1
        print(f"not ok - bench.{boots[label]['kernel']}.{'.'.join(c)} # missing: boot {label} has no result for this cell")
    for i, r in enumerate(rows, 1):
        want_sync = model_syncs(r)
        problems = []
        if r["sync_faults"] != want_sync:
            problems.append(f"sync faults {r['sync_faults']}, model {want_sync}")
        if r["size"] == "2m" and r["pmd_faults"] != r["faults"]:
            problems.append(f"2 MiB faults {r['pmd_faults']} of {r['faults']}")
        name = f"bench.{boots[r['label']]['kernel']}.{r['fs']}.{r['map']}.{r['state']}.{r['size']}"
        if problems:
            nfail += 1
            print(f"not ok {i} {name} # " + "; ".join(problems))
        else:
            npass += 1
            print(f"ok {i} {name} # sync faults {r['sync_faults']} of {r['faults']} "
                  f"(sync_fault_alloc_kb {r.get('alloc_kb', -1)})")
    print(f"{npass} passed, {nfail} failed, 0 skipped")
    return 1 if nfail else 0


def plot(out, kernels, cells, bars):
    """gnuplot PNGs; returns their paths (none if gnuplot is missing)."""
    made = []
    if subprocess.call(["sh", "-c", "command -v gnuplot >/dev/null"]) != 0:
        return made
    data = os.path.join(out, "ratios.dat")
    with open(data, "w") as f:
        for name, r50, r99 in bars:
            f.write(f"{name} {r50:.4f} {r99:.4f}\n")
    png = os.path.join(out, "ratio-sync-vs-shared.png")
    script = f"""
set terminal pngcairo size 1100,500 noenhanced
set output '{png}'
set title 'MAP_SYNC / MAP_SHARED fault latency on DAX ({kernels[-1]} kernel)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -30
set ylabel 'ratio'
set logscale y
set grid ytics
plot '{data}' using 2:xtic(1) title 'p50', '' using 3 title 'p99'
"""
    if bars and run_gnuplot(script):
        made.append(png)
    for c in cells:
        series = []
        for k in kernels:
            raws = sorted(f for f in os.listdir(os.path.join(out, "raw"))
                          if f.startswith(k + "-r") and f.endswith(f"-{cell_name(c)}.txt"))
            lat = []
            for f in raws:
                with open(os.path.join(out, "raw", f)) as fh:
                    lat += [int(x) / 1000 for x in fh if x.strip()]
            if not lat:
                continue
            lat.sort()
            dat = os.path.join(out, "raw", f"cdf-{k}-{cell_name(c)}.dat")
            with open(dat, "w") as fh:
                step = max(1, len(lat) // 2000)
                for i in range(0, len(lat), step):
                    fh.write(f"{lat[i]} {(i + 1) / len(lat)}\n")
                fh.write(f"{lat[-1]} 1\n")
            series.append(f"'{dat}' using 1:2 with lines lw 2 title '{k}'")
        if not series:
            continue
        png = os.path.join(out, f"cdf-{cell_name(c)}.png")
        script = f"""
set terminal pngcairo size 700,450 noenhanced
set output '{png}'
set title 'fault latency CDF: {" ".join(c)}'
set xlabel 'latency (µs, log)'
set ylabel 'fraction of faults'
set logscale x
set grid
set key bottom right
plot {", ".join(series)}
"""
        if run_gnuplot(script):
            made.append(png)
    return made


def run_gnuplot(script):
    p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if p.returncode:
        print("report: gnuplot failed: " + p.stderr.strip()[:300], file=sys.stderr)
    return p.returncode == 0


if __name__ == "__main__":
    main()
