#!/usr/bin/env python3
"""bench/report.py DIR [--quick] [--check]: turn bench/bench's raw results into tables and plots.

A cell is (fs, map, fill, place): the file system (ext4 made with a 2 MiB
stride; xfs made with a 2 MiB stripe unit; ext4-plain and xfs-plain, mkfs
defaults; ext4-aged and xfs-aged, mkfs defaults, 512 MiB, aged by
bench/agefs), the mapping (sync, shared,
msync-each, msync-end), the fill (faultbench's name: state, -random,
-sSTRIDE, -xHINT, -zZEROOUT, file size), the placement (pte: 4 KiB faults
only; pmd: 2 MiB faults; default: no MAP_FIXED).

A file *asked* for the MAP_SYNC allocation look-ahead of kernel-patches
0011/0012 when it has an xfs extent size hint, or is an ext4 fallocated
(unwritten) file; every other file did not ask, and there the patched
kernel must match stock: within the A/A noise floor (see aa(): with 4
or more repetitions each kernel's split into two arms, compared as
patched / stock is; with fewer, the spread of its boots), with the same
blocks.  A third kernel, no-lookahead (the series without 0011 and 0012),
splits what the look-ahead costs from what the rest of the series does.

--check also tests every boot's cells against the model and ends with
"N passed, N failed": synchronous faults and blocks allocated per cell
(exact where the kernel's behaviour is deterministic; blocks may add the
file's extent tree), 2 MiB faults where they must happen and none where
they cannot, and, for files nobody asked for, the same synchronous
faults and blocks on every kernel; a cell missing from a boot fails.

Reads DIR/bench.jsonl, DIR/boots.jsonl and DIR/raw/*.txt, and writes
results.json, results.csv (per kernel and cell: medians over repetitions,
spreads), report.md (printed too) and the plots (gnuplot).
"""
import csv
import functools
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
from collections import defaultdict

METRICS = ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "mean_ns", "max_ns", "faults_per_s",
           "msync_end_ns", "sync_faults", "pmd_faults", "pmd_tries", "blocks"]
FIELDS = ["state", "order", "stride_kb", "hint_kb", "zeroout_kb", "file_kb", "faults", "pages"]
FSES = ("ext4", "xfs", "ext4-plain", "xfs-plain", "ext4-aged", "xfs-aged")
FS_NAME = {"ext4": "ext4 (stride 2 MiB)", "xfs": "xfs (su=2m)", "ext4-plain": "ext4 (mkfs defaults)",
           "xfs-plain": "xfs (mkfs defaults)", "ext4-aged": "ext4 (mkfs defaults, 512 MiB, aged)",
           "xfs-aged": "xfs (mkfs defaults, 512 MiB, aged)"}


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cell_key(r):
    return (r["fs"], r["map"], r["fill"], r["place"])


def cell_name(c):
    return "-".join(c)


# what a figure's unit is: wall-clock µs (tcg, kvm), or thousands of guest
# instructions (icount: the guest clock advances 1 ns per instruction)
UNIT = "µs"


def us(ns):
    return f"{ns / 1000:.1f}"


def ratio(a, b):
    return a / b if b else float("nan")


def pct(v):
    if v is None:
        return "-"
    return f"{100 * v:.0f}%" if v >= 0.095 else f"{100 * v:.2f}%"


def asked(a):
    """A file that asked for the look-ahead: an xfs hint, an ext4 fallocated file."""
    return a["hint_kb"] > 0 or (a["fs"].startswith("ext4") and a["state"] == "unwritten")


def spread(xs):
    """Spread of one kernel's repetitions: max / min - 1 (None with one)."""
    if len(xs) < 2 or min(xs) <= 0:
        return None
    return max(xs) / min(xs) - 1


def aa(reps, m):
    """A/A of one kernel on metric m: its repetitions split into two arms
    in the pattern A B B A (repetitions 1 and 4 against 2 and 3, then 5 and
    8 against 6 and 7, ...: a drift of the host that is linear over the run
    hits both arms alike, as it hits stock and patched booted alternately),
    and max(arm / arm, arm / arm) - 1 of the arms' medians, the way patched
    / stock is taken.  With fewer than two boots an arm, the spread of all
    of them stands in (larger)."""
    a = [r[m] for r in reps if rep_no(r) % 4 in (0, 1)]
    b = [r[m] for r in reps if rep_no(r) % 4 in (2, 3)]
    if len(a) < 2 or len(b) < 2:
        return spread([r[m] for r in reps])
    ma, mb = statistics.median(a), statistics.median(b)
    if min(ma, mb) <= 0:
        return None
    return max(ma / mb, mb / ma) - 1


def rep_no(r):
    """The repetition of a result: its boot's label ends in -rN."""
    return int(r["label"].rsplit("-r", 1)[1])


def cv(xs):
    return statistics.pstdev(xs) / statistics.mean(xs) if len(xs) > 1 and statistics.mean(xs) else None


def aggregate(by, kernels, cells):
    agg = {}
    for k in kernels:
        for c in cells:
            reps = sorted(by[k].get(c, []), key=rep_no)
            if not reps:
                continue
            a = {m: statistics.median(r.get(m, -1) for r in reps) for m in METRICS}
            a.update({f: reps[0].get(f) for f in FIELDS})
            a["fs"], a["map"], a["fill"], a["place"] = c
            a["reps"] = len(reps)
            for m in ("p50_ns", "mean_ns", "p99_ns"):
                xs = [r[m] for r in reps]
                a[m[:-3] + "_cv"] = cv(xs)
                a[m[:-3] + "_aa"] = aa(reps, m)
                a[m[:-3] + "_spread"] = spread(xs)
                a[m[:-3] + "_reps"] = xs
            a["sync_set"] = sorted({r["sync_faults"] for r in reps})
            a["blocks_set"] = sorted({r.get("blocks", -1) for r in reps})
            agg[(k, c)] = a
    return agg


# the guest clock's resolution (ns): the largest step every latency is a
# multiple of (main() sets it; the hpet clocksource: 10 ns)
TICK = 1


def twin_same_code(c, agg):
    """Does the twin kernel run the patched kernel's code in cell c?  All but
    ext4's MAP_SYNC fills of fallocated files: the twin does not mark a file
    it maps with MAP_SYNC (kernel-patches/twin.patch), so their faults
    convert one block each instead of looking ahead."""
    a = agg.get(("patched", c))
    return not (c[0].startswith("ext4") and c[1] == "sync" and a and a["state"] == "unwritten")


def aa_prime(agg, kernels, c, m):
    """The A/A' term of a cell's metric, for a comparison that involves the
    patched kernel: twin against patched, max(r, 1/r) - 1 of their medians,
    where the twin runs the same code (twin_same_code); what a different
    binary of the same code moved the cell by.  One draw, so a verdict it
    decides is "rebuild" (as far as a rebuild moves it), never "within".
    None without a twin, or for a comparison without patched."""
    a, b = agg.get(("twin", c)), agg.get(("patched", c))
    if "patched" not in kernels or not a or not b or not twin_same_code(c, agg) \
            or min(a[m + "_ns"], b[m + "_ns"]) <= 0:
        return None
    r = a[m + "_ns"] / b[m + "_ns"]
    return max(r, 1 / r) - 1


def floor(agg, kernels, c, m):
    """The A/A noise floor of a cell's metric for two kernels: the larger of
    their A/As (aa()), and at least one tick of the guest clock for a
    percentile (a p50 is a multiple of it)."""
    vs = [agg[(k, c)].get(m + "_aa") for k in kernels if (k, c) in agg]
    vs = [v for v in vs if v is not None]
    if not vs:
        return None
    if m != "mean":
        vs += [TICK / agg[(k, c)][m + "_ns"] for k in kernels if (k, c) in agg and agg[(k, c)][m + "_ns"] > 0]
    return max(vs)


def perm_p(xs, ys):
    """Exact randomisation test of "the kernel makes no difference": of every
    way to split the pooled repetitions of the two kernels into groups of
    their sizes, the share whose ratio of group means is at least as far
    from 1 as the one measured (p; with 4 + 4 repetitions there are 70 ways,
    so p is at least 2/70; a ratio of medians of 4 could not go below 4/70).
    None when a kernel has fewer than 2 repetitions."""
    if len(xs) < 2 or len(ys) < 2 or min(xs + ys) <= 0:
        return None
    pool, k = xs + ys, len(xs)
    dist = lambda a, b: abs(math.log(statistics.mean(a) / statistics.mean(b)))
    seen = dist(xs, ys)
    splits = list(itertools.combinations(range(len(pool)), k))
    far = sum(1 for g in splits
              if dist([pool[i] for i in g], [pool[i] for i in range(len(pool)) if i not in g]) >= seen - 1e-12)
    return far / len(splits)


def within(r, f):
    return f is not None and max(r, 1 / r) - 1 <= f + 1e-9


def pstr(p):
    return "-" if p is None else f"{p:.2f}"


def syncs_per_mib(a):
    return a["sync_faults"] / (a["pages"] / 256) if a["pages"] else float("nan")


def space(a):
    return a["blocks"] / a["pages"] if a["pages"] else float("nan")


def space_s(a):
    return f"{space(a):.2f}" if a["pages"] else "-"


def main():
    out = sys.argv[1]
    quick = "--quick" in sys.argv
    rows = load(os.path.join(out, "bench.jsonl"))
    boots = {b["label"]: b for b in load(os.path.join(out, "boots.jsonl"))}
    if not rows:
        sys.exit("report: no results in " + out)
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[boots[r["label"]]["kernel"]][cell_key(r)].append(r)
    every = sorted(by, key=lambda k: (k != "stock", k))
    cells = sorted({c for k in by for c in by[k]}, key=lambda c: (FSES.index(c[0]) if c[0] in FSES else 9, c[3], c[2], c[1]))
    agg = aggregate(by, every, cells)
    # the twin only decides the "rebuild" verdict (aa_prime()); the tables
    # compare the others
    kernels = [k for k in every if k != "twin"] or every
    base, new = kernels[0], kernels[-1]
    global TICK
    TICK = functools.reduce(math.gcd, (int(r[m]) for r in rows for m in ("p50_ns", "p90_ns", "p99_ns")
                                       if r.get(m, 0) > 0), 0) or 1
    nreps = {k: max(a["reps"] for (kk, _), a in agg.items() if kk == k) for k in every}
    fewest = min(nreps[k] for k in kernels)

    accels = sorted({b["accel"] for b in boots.values()})
    global UNIT
    UNIT = "k instr" if accels == ["icount"] else "µs"
    meta = {
        "accelerator": accels,
        "unit": "guest virtual ns (icount: 1 per instruction)" if accels == ["icount"] else "ns",
        "host_cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                          if l.startswith("model name")), "?"),
        "kernels": {b["kernel"]: {kk: v for kk, v in b.items() if kk in ("version", "series_sha1", "patches")}
                    for b in boots.values()},
        "repetitions": nreps,
        "quick": quick,
    }
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "cells": [dict(kernel=k, **a) for (k, c), a in agg.items()]}, f, indent=1)
    cols = ["kernel", "fs", "map", "fill", "place", "reps"] + FIELDS + METRICS + \
        ["p50_cv", "mean_cv", "p99_cv", "p50_aa", "mean_aa", "p99_aa", "p50_spread", "mean_spread", "p99_spread"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for (k, c), a in agg.items():
            w.writerow([k] + [a.get(x) for x in cols[1:]])

    md = ["# Fault-path benchmark" + (" (quick)" if quick else ""), ""]
    md.append(f"Accelerator: **{', '.join(accels)}**. Host CPU: {meta['host_cpu']}. "
              + "; ".join(f"{k}: {v.get('version', '?')}, {v.get('patches', 0)} patches, series "
                          f"{v.get('series_sha1', '?')}, {nreps.get(k, 0)} repetitions"
                          for k, v in meta["kernels"].items()) + ".")
    if "tcg" in accels:
        md += ["", "Under TCG every guest instruction is emulated: absolute microseconds are not "
               "hardware figures. Read the ratios."]
    if accels == ["icount"]:
        md += ["", "Under icount (TCG, `-icount shift=0,sleep=off`) the guest's clock advances 1 ns per "
               "instruction the guest runs (a `rep` string instruction once per iteration) and, when the "
               "one vCPU idles, jumps to the next timer deadline: a figure in ns is guest virtual time, "
               f"instructions plus any idle wait (µs: thousands, written \"{UNIT}\"). A fault's figure "
               "includes the work of the threads it waited for (a journal commit, a log force) and the "
               "clock reads around it (the hpet clocksource: a system call and a device read, alike in "
               "every cell). It repeats closely from boot to boot where the kernel does the same work, "
               "not everywhere (the A/A floor of each cell shows how closely). It weighs work, not "
               "hardware time: zeroing counts per iteration, a cache flush or a pmem write next to "
               "nothing, memory latency nothing; so the ratios of files that asked (commits against "
               "zeroing) are not hardware results: read them beside a wall-clock run (--accel tcg)."]
    clocks = sorted(r["clock_ns"] for r in rows if "clock_ns" in r)
    if clocks:
        md += ["", f"Two clock reads with nothing between them (faultbench's clock_ns, in every latency "
               f"alike): median {clocks[len(clocks) // 2]} ns over every cell of every boot, range "
               f"{clocks[0]}-{clocks[-1]} ns" + (" (guest virtual ns: instructions)." if UNIT != "µs" else ".")]
    md += ["", "Every figure is the median over the repetitions of a kernel. A/A floor of a cell, for a "
           "comparison of two kernels: "
           + ("each kernel's boots split into two arms (repetitions 1 and 4 against 2 and 3: a linear drift "
              "of the host hits both alike), the ratio of the arms' medians, |ratio - 1|, the larger of "
              "the two kernels'" if fewest >= 4 else
              f"with {fewest} repetitions a kernel, the spread (max / min - 1) of each kernel's boots, the "
              "larger of the two kernels'")
           + f"; for a percentile at least one step of the guest clock (every latency here is a multiple of "
           f"{TICK} ns)"
           + ". \"within\" means the ratio of the two kernels is inside it."
           + (" The twin kernel (the series with ext4's MAP_SYNC mark never set, so that ext4's MAP_SYNC "
              "faults into unwritten extents convert one block each, kernel-patches/twin.patch) runs the "
              "patched kernel's code in another binary on every cell but ext4's MAP_SYNC fills of "
              "fallocated files: in a comparison with patched, a cell outside "
              "the A/A floor but no farther from 1 than twin / patched is \"rebuild\": as far as a "
              "rebuild alone moves it." if "twin" in every else
              " No twin kernel in this run: what a rebuild alone moves a cell by is not measured "
              "(make bench TWIN=1).")]
    md += table_nobody(agg, kernels, cells, base, new)
    if "no-lookahead" in kernels:
        md += table_nobody(agg, kernels, cells, "no-lookahead", new,
                           "what the look-ahead itself costs: the series against the series without 0011 and 0012")
        md += table_nobody(agg, kernels, cells, base, "no-lookahead",
                           "what the rest of the series costs: the series without 0011 and 0012 against stock")
    md += table_asked(agg, kernels, cells, base, new)
    md += table_default(agg, kernels, cells)
    md += goals(agg, kernels, cells, base, new)
    md += fio_crosscheck(out, boots, agg, kernels)
    md += table_all(agg)
    plots = plot(out, agg, kernels, cells, base, new)
    md += ["", "Plots: " + ", ".join(os.path.basename(p) for p in plots) + f" in {out}."]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    if "--check" in sys.argv:
        sys.exit(check(rows, boots, quick))


def table_nobody(agg, kernels, cells, base, new, what=""):
    md = ["", f"## Files nobody asked for: {new} / {base}" + (f" ({what})" if what else ""), ""]
    if len(kernels) < 2:
        return md + ["One kernel only: nothing to compare."]
    md.append(f"No extent size hint, not an ext4 fallocated file: {new} must behave as {base}. "
              f"Ratios {new} / {base} of the medians; the A/A floor of the mean and of the p50 ({base}'s "
              f"and {new}'s boots); blocks allocated per page written, and synchronous faults, on each "
              f"kernel; the difference of the mean per fault.")
    md.append("")
    twin = any(k == "twin" for k, _ in agg) and "patched" in (base, new)
    md.append(f"| fs | map | fill | place | mean ratio | A/A floor (mean) | p (mean) | p50 ratio | A/A floor (p50) | "
              f"p (p50) | p99 ratio | within A/A? | unchanged? | blocks / pages {base} → {new} | "
              f"sync faults {base} → {new} | {new} − {base}, mean per fault ({'instructions' if UNIT != 'µs' else 'ns'}) |"
              + (" twin / patched, mean; p50 |" if twin else ""))
    md.append("| --- " * (17 if twin else 16) + "|")
    n = nin = nsame = nsig = nreb = 0
    nd = 4 if UNIT != "µs" else 2	# icount: differences of a few parts in 10,000 are measurable
    outside, dearer, cheaper = [], [], []
    # boots a kernel (the fewest of the two): with fewer than 4 the
    # randomisation test cannot reach p < 0.05 (3 + 3: p >= 0.1), with 1
    # there is no A/A floor
    reps = min((len(agg[(k, c)]["mean_reps"]) for k in (base, new) for c in cells if (k, c) in agg), default=0)
    for c in cells:
        a, b = agg.get((new, c)), agg.get((base, c))
        if not a or not b or asked(a):
            continue
        rm, r50, r99 = ratio(a["mean_ns"], b["mean_ns"]), ratio(a["p50_ns"], b["p50_ns"]), ratio(a["p99_ns"], b["p99_ns"])
        fm, f50 = floor(agg, (base, new), c, "mean"), floor(agg, (base, new), c, "p50")
        ok = within(rm, fm) and within(r50, f50)
        tm, t50 = aa_prime(agg, (base, new), c, "mean"), aa_prime(agg, (base, new), c, "p50")
        # outside the A/A floor, but no farther than the twin from patched
        reb = not ok and fm is not None and tm is not None and t50 is not None and \
            within(rm, max(fm, tm)) and within(r50, max(f50, t50))
        same = same_counts({(x, y, a["faults"]) for x in a["sync_set"] + b["sync_set"]
                            for y in a["blocks_set"] + b["blocks_set"]}, aged_slack(c))
        pm, p50 = (perm_p(b["mean_reps"], a["mean_reps"]), perm_p(b["p50_reps"], a["p50_reps"])) if reps >= 4 \
            else (None, None)
        sig = pm is not None and p50 is not None and min(pm, p50) < 0.05
        n += 1
        nin += ok
        nreb += reb
        nsame += same
        nsig += sig
        verdict = "no A/A (1 repetition)" if fm is None else ("within" if ok else "rebuild" if reb else "outside")
        if fm is not None and not ok:
            # how far the metrics that are outside lie from 1
            outside.append(max([abs(math.log(rm))] * (not within(rm, fm)) + [abs(math.log(r50))] * (not within(r50, f50))))
            # which way: the metrics outside, dearer on new if any of them is above 1
            up = [x for x, f in ((rm, fm), (r50, f50)) if not within(x, f)]
            (dearer if max(up) > 1 else cheaper).append((max(up) if max(up) > 1 else min(up),
                                                         a["mean_ns"] - b["mean_ns"], " ".join(c)))
        unchanged = "-" if pm is None or p50 is None else ("**no**" if sig else "yes")
        md.append(f"| {' | '.join(c)} | {rm:.{nd}f} | {pct(fm)} | {pstr(pm)} | {r50:.{nd}f} | {pct(f50)} | {pstr(p50)} | "
                  f"{r99:.{nd}f} | {verdict} | {unchanged} | "
                  f"{space_s(b)} → {space_s(a)} | {b['sync_faults']:.0f} → {a['sync_faults']:.0f} | "
                  f"{a['mean_ns'] - b['mean_ns']:+.0f} |"
                  + ((f" {pct(tm)}; {pct(t50)} |" if tm is not None and t50 is not None else " - |") if twin else ""))
    if not n:
        return md + ["", "No cell of a file nobody asked for in this run."]
    if reps < 4:
        md += ["", "No randomisation test (\"unchanged?\", p): it needs at least 4 boots of each kernel "
               f"(with 3 + 3 the smallest p is 0.1; this run: {reps})."]
    else:
        md += ["", f"{n - nsig} of {n} cells unchanged: no difference in the mean or the p50 at p < 0.05 "
               f"(exact randomisation test over the repetitions; with no effect at all, about {0.1 * n:.0f} of "
               f"{n} would show one by chance, two tests a cell at 5% each)."]
    how = ("the spread max / min - 1 of each kernel's boots, the larger" if reps < 4 else
           "a single A/A draw per kernel in arms of 2, so with no effect about a third fall outside it by chance")
    how += f"; the p50's at least one {TICK} ns step of the guest clock"
    how += ("" if twin else "; no twin kernel in this comparison (make bench TWIN=1)")
    if reps < 2:
        md += ["", f"One boot a kernel: no A/A floor. The same blocks and synchronous faults on both kernels "
               f"(data blocks; the extent tree may differ by a block) in {nsame} of {n}."]
        return md
    md += ["", f"{nin} of {n} cells within the A/A floor (mean and p50: {how})"
           + (f"; the {len(outside)} outside it differ by at most {100 * (math.exp(max(outside)) - 1):.2f}% "
              "(the metric outside)" if outside else "")
           + (f" ({len(dearer)} dearer on {new}, by at most {100 * (max(x[0] for x in dearer) - 1):.2f}%: "
              + ", ".join(f"{x[2]} {x[1]:+.0f}" for x in sorted(dearer, key=lambda x: -x[0]))
              + f" {'instructions' if UNIT != 'µs' else 'ns'} a fault (mean); {len(cheaper)} cheaper)"
              if dearer else f" (all {len(cheaper)} cheaper on {new})" if cheaper else "")
           + (f"; of those, {nreb} no farther from 1 than the twin is from patched (\"rebuild\": as far as "
              "another binary of the same code moves the cell, so no cost of the change can be told there; "
              "one twin boot set per cell, not a floor)" if twin else "")
           + "; the same blocks and synchronous "
           f"faults on both kernels (data blocks; the extent tree may differ by a block) in {nsame} of {n}."]
    return md


def pairs(agg, kernels, cells, want):
    """(fs, fill, place) of sync cells with a shared twin that satisfy want(a)."""
    got = []
    for c in cells:
        fs, m, fill, place = c
        if m != "sync" or (fs, "shared", fill, place) not in {cc for cc in cells}:
            continue
        a = next((agg[(k, c)] for k in kernels if (k, c) in agg), None)
        if a and want(a):
            got.append((fs, fill, place))
    return got


def table_asked(agg, kernels, cells, base, new):
    md = ["", "## Files that asked: MAP_SYNC / MAP_SHARED, same file layout, same boot", ""]
    md.append("xfs files with an extent size hint (-x), ext4 fallocated files with extent_max_zeroout_kb "
              "(-z); stock runs the same layouts (same hint, same fallocate, same knob). PTE-only fills "
              "(pte: 4 KiB faults only), in order unless -random, one page per STRIDE with -s. Ratios of "
              "the means (every fault counts in full: the few that allocate, zero and commit) and of the "
              "p99s; space: blocks allocated per page written.")
    md.append("")
    md.append(f"| fs | fill | kernel | MAP_SYNC mean {UNIT} | MAP_SHARED mean {UNIT} | mean ratio | p99 ratio | p50 ratio | "
              f"MAP_SYNC mean / {base}'s | sync faults per MiB | space MAP_SYNC | space MAP_SHARED | CV of mean, MAP_SYNC |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for fs, fill, place in pairs(agg, kernels, cells, lambda a: asked(a) and a["place"] == "pte"):
        for k in kernels:
            a, b = agg.get((k, (fs, "sync", fill, place))), agg.get((k, (fs, "shared", fill, place)))
            s0 = agg.get((base, (fs, "sync", fill, place)))
            if not a or not b:
                continue
            md.append(f"| {fs} | {fill} | {k} | {us(a['mean_ns'])} | {us(b['mean_ns'])} | "
                      f"{ratio(a['mean_ns'], b['mean_ns']):.2f} | {ratio(a['p99_ns'], b['p99_ns']):.2f} | "
                      f"{ratio(a['p50_ns'], b['p50_ns']):.2f} | "
                      f"{ratio(a['mean_ns'], s0['mean_ns']) if s0 else float('nan'):.2f} | "
                      f"{syncs_per_mib(a):.1f} | {space(a):.2f} | {space(b):.2f} | {pct(a['mean_cv'])} |")
    return md


def table_default(agg, kernels, cells):
    md = ["", "## Default placement (no MAP_FIXED): 2 MiB faults and the fill", ""]
    md.append("One store per 4 KiB over the whole file, mapped where the kernel puts it. 2 MiB faults: "
              "fs_dax:dax_pmd_fault_done events that were not FALLBACK, of the 2 MiB ranges of the file.")
    md.append("")
    md.append(f"| fs | fill | kernel | 2 MiB faults, MAP_SYNC | 2 MiB faults, MAP_SHARED | MAP_SYNC mean {UNIT} | "
              f"MAP_SHARED mean {UNIT} | mean ratio | p99 ratio | sync faults | space MAP_SYNC |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for fs, fill, place in pairs(agg, kernels, cells, lambda a: a["place"] == "default"):
        for k in kernels:
            a, b = agg.get((k, (fs, "sync", fill, place))), agg.get((k, (fs, "shared", fill, place)))
            if not a or not b:
                continue
            ranges = a["file_kb"] // 2048
            md.append(f"| {fs} | {fill} | {k} | {a['pmd_faults']:.0f} of {ranges} | {b['pmd_faults']:.0f} of {ranges} | "
                      f"{us(a['mean_ns'])} | {us(b['mean_ns'])} | {ratio(a['mean_ns'], b['mean_ns']):.2f} | "
                      f"{ratio(a['p99_ns'], b['p99_ns']):.2f} | {a['sync_faults']:.0f} | {space(a):.2f} |")
    return md


GOAL_FILLS = [("xfs", "hole-x64k"), ("xfs", "hole-x128k"), ("xfs", "hole-x512k"), ("xfs", "hole-x2m"),
              ("xfs-plain", "hole-x64k"), ("xfs-plain", "hole-x128k"), ("xfs-plain", "hole-x512k"),
              ("xfs-plain", "hole-x2m"), ("xfs-aged", "hole-x128k"), ("xfs-aged", "hole-x512k"),
              ("xfs-aged", "hole-x2m"), ("ext4-plain", "unwritten-z32k"), ("ext4-plain", "unwritten-z128k"),
              ("ext4-plain", "unwritten-z2m"), ("ext4-aged", "unwritten-z128k"), ("ext4-aged", "unwritten-z2m"), ("ext4", "unwritten-z32k"),
              ("ext4", "unwritten-z64k"), ("ext4", "unwritten-z128k"), ("ext4", "unwritten-z2m")]


def goals(agg, kernels, cells, base, new):
    md = ["", f"## Issue #16's goals ({new} kernel)", ""]
    md.append("A file that asked: MAP_SYNC / MAP_SHARED mean fill ratio at most 1.3, p99 ratio at most 3 "
              "(PTE-only sequential fill, same layout, same boot)."
              + (" Measured in guest instructions (icount): a commit's work against the zeroing's, not "
                 "hardware time; the goal is judged on a wall-clock run too (bench --accel tcg)."
                 if UNIT != "µs" else ""))
    md.append("")
    md.append("| fs | fill | mean ratio | ≤ 1.3 | p99 ratio | ≤ 3 | stock mean ratio |")
    md.append("| --- | --- | --- | --- | --- | --- | --- |")
    for fs, fill in GOAL_FILLS:
        a, b = agg.get((new, (fs, "sync", fill, "pte"))), agg.get((new, (fs, "shared", fill, "pte")))
        s, t = agg.get((base, (fs, "sync", fill, "pte"))), agg.get((base, (fs, "shared", fill, "pte")))
        if not a or not b:
            continue
        rm, r99 = ratio(a["mean_ns"], b["mean_ns"]), ratio(a["p99_ns"], b["p99_ns"])
        md.append(f"| {fs} | {fill} | {rm:.2f} | {'yes' if rm <= 1.3 else 'NO'} | {r99:.2f} | "
                  f"{'yes' if r99 <= 3 else 'NO'} | {ratio(s['mean_ns'], t['mean_ns']) if s and t else float('nan'):.2f} |")
    return md


def table_all(agg):
    md = ["", "## Every cell (medians over repetitions)", ""]
    md.append(f"| kernel | fs | map | fill | place | reps | faults | p50 {UNIT} | p99 {UNIT} | mean {UNIT} | CV p50 | "
              f"CV mean | A/A p50 | A/A mean | sync faults | 2 MiB faults / tries | blocks / pages | msync at end {UNIT} |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (k, c), a in sorted(agg.items()):
        md.append(f"| {k} | {' | '.join(c)} | {a['reps']} | {a['faults']} | {us(a['p50_ns'])} | {us(a['p99_ns'])} | "
                  f"{us(a['mean_ns'])} | {pct(a['p50_cv'])} | {pct(a['mean_cv'])} | {pct(a['p50_aa'])} | "
                  f"{pct(a['mean_aa'])} | {a['sync_faults']:.0f} | {a['pmd_faults']:.0f} / {a['pmd_tries']:.0f} | "
                  f"{a['blocks']:.0f} / {a['pages']} | {us(a['msync_end_ns']) if a['msync_end_ns'] > 0 else '-'} |")
    return md


def kb_name(kb):
    return f"{kb // 1024}m" if kb >= 1024 and kb % 1024 == 0 else f"{kb}k"


def expected_cells(quick):
    """Every cell bench/run-guest runs in each boot (fs, map, fill, place);
    written out here, not taken from the results, so that a cell that
    went missing is seen.  Mirrors bench/run-guest."""
    sizes = (64, 1024, 8192) if quick else (64, 1024, 8192, 65536)
    both = lambda fs, fill, place="pte": [(fs, m, fill, place) for m in ("sync", "shared")]
    cells = []
    for fs in ("ext4", "xfs"):
        for st in ("hole", "written", "read", "hole-random", "hole-s128k"):
            cells += both(fs, st)
        if fs == "xfs":
            cells += both(fs, "unwritten")
            cells += [c for x in ("64k", "128k", "2m") for c in both(fs, "hole-x" + x)]
            cells += both(fs, "unwritten-x128k")
            cells += both(fs, "hole-x512k")
            for fill in ("hole-s64k-x64k", "hole-s128k-x64k", "hole-s128k-x128k", "hole-s256k-x128k",
                         "hole-s512k-x512k", "hole-s1m-x512k", "hole-s2m-x2m", "hole-s4m-x2m"):
                cells += both(fs, fill)
        else:
            cells += both(fs, "hole-z128k")
            cells += [c for z in ("32k", "64k", "128k", "2m") for c in both(fs, "unwritten-z" + z)]
            for fill in ("unwritten-s32k-z32k", "unwritten-s64k-z32k", "unwritten-s128k-z128k",
                         "unwritten-s256k-z128k", "unwritten-s2m-z2m", "unwritten-s4m-z2m"):
                cells += both(fs, fill)
        cells += both(fs, "hole", "pmd")
        cells += [c for kb in sizes for c in both(fs, "hole-" + kb_name(kb), "default")]
        if fs == "xfs":
            cells += [c for kb in sizes for c in both(fs, "hole-x2m-" + kb_name(kb), "default")]
        cells += [(fs, m, st, "pte") for st in ("hole", "written") for m in ("msync-each", "msync-end")]
    fs = "xfs-plain"
    for fill in ("hole", "hole-x64k", "hole-x128k", "hole-x512k", "hole-x2m"):
        cells += both(fs, fill)
    cells += [c for kb in sizes for c in both(fs, "hole-" + kb_name(kb), "default")]
    cells += [c for kb in sizes for c in both(fs, "hole-x2m-" + kb_name(kb), "default")]
    fs = "ext4-plain"
    for fill in ("hole", "unwritten-z32k", "unwritten-z128k", "unwritten-z2m"):
        cells += both(fs, fill)
    cells += [c for kb in sizes for c in both(fs, "hole-" + kb_name(kb), "default")]
    fs = "xfs-aged"
    for fill in ("hole", "hole-x128k", "hole-x512k", "hole-x2m"):
        cells += both(fs, fill)
    cells += [c for kb in sizes for c in both(fs, "hole-" + kb_name(kb), "default")]
    cells += [c for kb in sizes for c in both(fs, "hole-x2m-" + kb_name(kb), "default")]
    fs = "ext4-aged"
    for fill in ("hole", "unwritten-z128k", "unwritten-z2m"):
        cells += both(fs, fill)
    cells += [c for kb in sizes for c in both(fs, "hole-" + kb_name(kb), "default")]
    return cells


def unit_pages(r, stock):
    """Pages one synchronous fault allocates or converts (0011/0012; 1 on stock)."""
    if stock or r["state"] not in ("hole", "unwritten"):
        return 1
    if r["fs"].startswith("xfs") and r["hint_kb"] > 0:
        return max(1, min(r["hint_kb"], 2048) // 4)
    if r["fs"].startswith("ext4") and r["state"] == "unwritten":
        z = min(r["zeroout_kb"] if r["zeroout_kb"] >= 0 else 32, 2048)
        return 1 if z <= 4 else (1 << (z.bit_length() - 1)) // 4
    return 1


def model(r, stock):
    """(sync faults, blocks) the kernel must report; None where not deterministic."""
    n, s = r["faults"], r["stride_kb"] // 4
    fpages = r["file_kb"] // 4
    syncs = blocks = None
    alloc = r["state"] in ("hole", "unwritten") and r["map"] in ("sync", "shared")
    if r["map"] in ("msync-each", "msync-end"):
        return 0, None
    if r["place"] == "pmd":
        return (n if r["map"] == "sync" else 0), fpages
    if r["state"] in ("written", "read", "unwritten"):
        blocks = fpages
    u = unit_pages(r, stock)
    if r["place"] == "pte" or r["file_kb"] < 2048:
        syncs = n if u <= s else -(-n * s // u)
        # ext4 (stock too) converts an unwritten extent of at most
        # extent_max_zeroout_kb whole on its first write: one fallocated
        # extent that short is one synchronous fault
        if r["fs"].startswith("ext4") and r["state"] == "unwritten" and fpages <= max(r["zeroout_kb"], 0) // 4:
            syncs = 1
        if r["state"] == "hole":
            blocks = n * u if u <= s else min(fpages, -(-n * s // u) * u)
    elif r["state"] == "hole" and s == 1:
        blocks = fpages       # every page written
    # on an aged ext4 a fallocated file is many short unwritten extents,
    # and ext4 (stock too) converts one of at most extent_max_zeroout_kb
    # whole on its first write: the faults that sync depend on where the
    # holes fell (between 1 and one per fault; the blocks stay exact).  On
    # xfs the look-ahead allocates its range extent by extent within the
    # fault, so the count stays exact there.
    if r["fs"] == "ext4-aged" and r["state"] == "unwritten" and syncs:
        syncs = None
    if r["map"] != "sync" or not alloc:
        syncs = 0
    return syncs, blocks


def check(rows, boots, quick):
    """KTAP lines and a tally: the kernel's counts against the model; the
    same counts on every kernel for files nobody asked for; a cell missing
    from a boot's results fails."""
    npass = nfail = 0
    print("\nTAP version 13")
    seen = {(r["label"], cell_key(r)) for r in rows}
    for label in sorted(boots):
        for c in expected_cells(quick):
            if (label, c) not in seen:
                nfail += 1
                print(f"not ok - bench.{boots[label]['kernel']}.{'.'.join(c)} # missing: boot {label} "
                      "has no result for this cell")
    nobody = defaultdict(set)
    for i, r in enumerate(rows, 1):
        # the series without its look-ahead (bench's no-lookahead kernel) allocates as stock does;
        # so does the twin on ext4 (its MAP_SYNC faults take ext4_iomap_begin()), not on xfs
        k = boots[r["label"]]["kernel"]
        stock = k in ("stock", "no-lookahead") or (k == "twin" and r["fs"].startswith("ext4"))
        want_sync, want_blocks = model(r, stock)
        problems = []
        if want_sync is not None and r["sync_faults"] != want_sync:
            problems.append(f"sync faults {r['sync_faults']}, model {want_sync}")
        if want_sync is None and r["map"] == "sync" and not (1 <= r["sync_faults"] <= r["faults"]):
            problems.append(f"sync faults {r['sync_faults']}, not between 1 and {r['faults']}")
        # st_blocks also counts the extent tree (ext4) or bmap btree (xfs)
        # blocks of a file with many extents: at most one per 64 extents
        # (of a page each, at worst), plus two
        if want_blocks is not None and not want_blocks <= r["blocks"] <= want_blocks + r["faults"] // 64 + 2:
            problems.append(f"blocks {r['blocks']}, model {want_blocks} (+ extent tree blocks)")
        ranges = r["file_kb"] // 2048 if r["place"] == "default" else 0
        if r["place"] == "pmd":
            if r["pmd_faults"] != r["faults"]:
                problems.append(f"2 MiB faults {r['pmd_faults']} of {r['faults']}")
        elif r["map"] in ("sync", "shared") and not 0 <= r["pmd_faults"] <= ranges:
            problems.append(f"2 MiB faults {r['pmd_faults']}, at most {ranges} possible")
        if not asked(r) and r["map"] in ("sync", "shared"):
            nobody[cell_key(r)].add((r["sync_faults"], r["blocks"], r["faults"]))
        name = f"bench.{boots[r['label']]['kernel']}.{r['fs']}.{r['map']}.{r['fill']}.{r['place']}"
        if problems:
            nfail += 1
            print(f"not ok {i} {name} # " + "; ".join(problems))
        else:
            npass += 1
            print(f"ok {i} {name} # sync faults {r['sync_faults']} of {r['faults']}, blocks {r['blocks']}, "
                  f"2 MiB faults {r['pmd_faults']} of {r['pmd_tries']}")
    kernels = {b["kernel"] for b in boots.values()}
    for c, got in sorted(nobody.items()):
        name = f"bench.nobody-asked.{'.'.join(c)}"
        if len(kernels) < 2:
            continue
        if not same_counts(got, aged_slack(c)):
            nfail += 1
            print(f"not ok - {name} # (sync faults, blocks) differ between boots: "
                  f"{sorted((s, b) for s, b, _ in got)}")
        else:
            npass += 1
            print(f"ok - {name} # the same sync faults and data blocks on every boot: "
                  f"{sorted((s, b) for s, b, _ in got)}")
    print(f"{npass} passed, {nfail} failed, 0 skipped")
    return 1 if nfail else 0


def same_counts(got, sync_slack=0):
    """(sync faults, blocks, faults) of one cell over boots: the same
    synchronous faults (within sync_slack), and blocks that differ by no
    more than the extent tree's slack (a random fill's xfs bmap btree took
    4,115 blocks in one boot and 4,116 in another, on both kernels alike)."""
    blocks = [b for _, b, _ in got]
    syncs = [s for s, _, _ in got]
    return max(syncs) - min(syncs) <= sync_slack and \
        max(blocks) - min(blocks) <= max(f for _, _, f in got) // 64 + 2


def aged_slack(c):
    """Synchronous faults a nobody-asked cell may differ by between boots:
    on an aged xfs a 2 MiB fault that falls back has allocated as much of
    its range as the holes it met gave, and the aged layout is not the
    same to the block in every boot (a 64 MiB fill: 7,539 synchronous
    faults in some boots, 7,541 in others, on stock and patched alike), so
    up to one per 2 MiB range of the file; exact everywhere else."""
    fs, _, fill, place = c
    if not fs.endswith("-aged") or place != "default":
        return 0
    size = fill.rsplit("-", 1)[1]
    kb = int(size[:-1]) * (1024 if size.endswith("m") else 1)
    return kb // 2048


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
    """Markdown: our shared PTE cells against fio on the same faults."""
    fio = load_fio(out, boots)
    md = ["", "## Cross-check with fio (ioengine=mmap)", ""]
    if not fio:
        md.append("No fio results in this run (fio missing on the host, or it failed in the guest).")
        return md
    md.append("fio writes each 4 KiB page of 1 MiB files once through MAP_SHARED (files under 2 MiB: "
              "4 KiB faults only): sparse files (hole, the faults of the shared / hole / pte cell) and "
              "files fio wrote out first (written: overwrite faults). Per I/O, fio adds its own work "
              "(a 4 KiB memcpy, its accounting) to the fault, so its throughput is lower; the "
              "written run measures that. The cost of the allocating fault itself, hole minus "
              "written, must agree within 20%.")
    md.append("")
    md.append(f"| kernel | fs | faultbench MiB/s (hole) | fio MiB/s (hole) | allocating fault, faultbench {UNIT} "
              f"| allocating fault, fio {UNIT} | faultbench / fio | agrees |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for k in kernels:
        for fs in ("ext4", "xfs"):
            h, w = fio.get(k, {}).get((fs, "hole")), fio.get(k, {}).get((fs, "written"))
            a = agg.get((k, (fs, "shared", "hole", "pte")))
            b = agg.get((k, (fs, "shared", "written", "pte")))
            if not (h and w and a and b):
                continue
            ours = (a["mean_ns"] - b["mean_ns"]) / 1000
            theirs = statistics.median(h) - statistics.median(w)
            r = ratio(ours, theirs)
            md.append(f"| {k} | {fs} | {a['faults_per_s'] * 4096 / 2**20:.1f} | "
                      f"{4096 / statistics.median(h) * 1e6 / 2**20:.1f} | {ours:.1f} | {theirs:.1f} | {r:.2f} | "
                      f"{'yes' if abs(r - 1) <= 0.20 else 'NO'} |")
    return md


CDF_CELLS = [("xfs-plain", "sync", "hole-x128k", "pte"), ("xfs-plain", "sync", "hole", "pte"),
             ("ext4", "sync", "unwritten-z128k", "pte"), ("xfs", "sync", "hole", "pte"),
             ("xfs-plain", "sync", "hole-64m", "default"), ("xfs-plain", "sync", "hole-x2m-64m", "default"),
             ("ext4-aged", "sync", "unwritten-z2m", "pte"), ("xfs-aged", "sync", "hole-x2m", "pte")]


def plot(out, agg, kernels, cells, base, new):
    """gnuplot PNGs; returns their paths (none if gnuplot is missing)."""
    made = []
    if subprocess.call(["sh", "-c", "command -v gnuplot >/dev/null"]) != 0:
        return made
    # asked PTE fills: MAP_SYNC / MAP_SHARED mean and p99 ratio, each kernel
    data = os.path.join(out, "asked.dat")
    with open(data, "w") as f:
        for fs, fill, place in pairs(agg, kernels, cells, lambda a: asked(a) and a["place"] == "pte"):
            vals = []
            for k in (base, new):
                a, b = agg.get((k, (fs, "sync", fill, place))), agg.get((k, (fs, "shared", fill, place)))
                vals += [ratio(a["mean_ns"], b["mean_ns"]), ratio(a["p99_ns"], b["p99_ns"])] if a and b else [float("nan")] * 2
            f.write(f"{fs}:{fill} " + " ".join(f"{v:.4f}" for v in vals) + "\n")
    png = os.path.join(out, "ratio-asked.png")
    script = f"""
set terminal pngcairo size 1300,560 noenhanced
set output '{png}'
set title 'Files that asked: MAP_SYNC / MAP_SHARED per 4 KiB PTE-only fill (log scale; lines at 1.3 and 3)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -35
set ylabel 'ratio'
set logscale y
set grid ytics
set arrow from graph 0, first 1.3 to graph 1, first 1.3 nohead dt 2 lw 2
set arrow from graph 0, first 3 to graph 1, first 3 nohead dt 3 lw 2
plot '{data}' using 2:xtic(1) title 'mean, {base}', '' using 3 title 'p99, {base}', '' using 4 title 'mean, {new}', '' using 5 title 'p99, {new}'
"""
    if len(kernels) > 1 and os.path.getsize(data) and run_gnuplot(script):
        made.append(png)
    # nobody asked: patched / stock mean ratio against the A/A floor
    data = os.path.join(out, "nobody.dat")
    with open(data, "w") as f:
        for c in cells:
            a, b = agg.get((new, c)), agg.get((base, c))
            if not a or not b or asked(a) or c[1] not in ("sync", "shared"):
                continue
            fl = floor(agg, (base, new), c, "mean") or 0
            r = ratio(a["mean_ns"], b["mean_ns"])
            f.write(f"{cell_name(c)} {100 * (r - 1):.4f} {-100 * fl:.4f} {100 * fl:.4f}\n")
    png = os.path.join(out, "nobody-asked.png")
    script = f"""
set terminal pngcairo size 1300,560 noenhanced
set output '{png}'
set title 'Files nobody asked for: {new} / {base} - 1, mean per fault (points), A/A floor (bars), {UNIT}'
set xtics rotate by -60 font ',7'
set ylabel 'difference of the mean, %'
set grid ytics
set offsets 0.5, 0.5, 0, 0
plot '{data}' using 0:(0):3:4:xtic(1) with yerrorbars lw 2 title 'A/A floor', '' using 0:2 with points pt 7 ps 1.2 title '{new} / {base} - 1'
"""
    if len(kernels) > 1 and os.path.getsize(data) and run_gnuplot(script):
        made.append(png)
    for c in CDF_CELLS if os.path.isdir(os.path.join(out, "raw")) else []:
        series = []
        for k in kernels:
            raws = sorted(f for f in os.listdir(os.path.join(out, "raw"))
                          if f.startswith(k + "-r") and f.endswith(f"-{c[0]}-{c[1]}-{c[2]}-{c[3]}.txt"))
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
set xlabel 'latency ({UNIT}, log)'
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
