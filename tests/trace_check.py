#!/usr/bin/env python3
"""trace_check.py: checks --trace files (Chrome trace-event JSON) for the tests.

    trace_check.py FILE [FILE ...] [--layers a,b,c] [--common-origin] [--device]

Each FILE must be a JSON object {"traceEvents": [...], "displayTimeUnit":
"ms"}. Every event has ph, ts, pid and tid; every complete event ("X") a
name, a cat and a dur >= 0; a thread's complete events are nested (a child
inside its parent's [ts, ts + dur]) or disjoint; every thread of a process
and the process itself are named by metadata events ("M").

--layers: in each "step" event of each thread, exactly one "forward" and
one "backward" event per layer named (no other names), and at least one
"allreduce" event with args.bytes > 0; in a device thread (named
"... device": a GPU's device time), one "optimizer" event instead of the
all-reduces, which run on another stream.

--device: every replica's host thread "replica N (KIND)" has a device
thread "replica N (KIND) device" with the same steps, each inside the host
thread's step of that name (the host waits for the device before its step
ends).

--common-origin: the files' processes share a time origin: a step of the
same name overlaps in every process that has it (they meet in its
all-reduce). The processes take the origin as they leave a collective, so
their origins differ by that collective's latency, which a loaded machine
stretches: each process's times may be shifted against the first's, by one
shift for all its steps that makes every shared step overlap (one clock),
no longer than the longest step (a latency, where an origin that is not
common, such as each process's own start, is off by its start-up). Threads
of one process share its origin exactly: their steps overlap unshifted.

Prints one line, "ok: pids P threads T steps S events E", and exits 0; or
prints what is wrong and exits 1. Python's json module only.
"""
import bisect
import json
import sys

EPS = 0.002  # us: ts and dur are each rounded to 0.001 us


def fail(msg):
    print(f"trace_check: {msg}")
    sys.exit(1)


def main(argv):
    files = [a for a in argv if not a.startswith("--")]
    layers = None
    for a in argv:
        if a.startswith("--layers="):
            layers = a.split("=", 1)[1].split(",")
    common = "--common-origin" in argv
    device = "--device" in argv
    if not files:
        fail("no file")
    threads = {}  # (pid, tid) -> [events]
    named_pids, named_threads = set(), {}
    n_events = 0
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"{path}: not valid JSON: {e}")
        if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
            fail(f"{path}: no traceEvents array")
        if doc.get("displayTimeUnit") != "ms":
            fail(f"{path}: displayTimeUnit is {doc.get('displayTimeUnit')!r}")
        for e in doc["traceEvents"]:
            n_events += 1
            for k in ("ph", "ts", "pid", "tid"):
                if k not in e:
                    fail(f"{path}: event without {k}: {e}")
            if e["ph"] == "M":
                if e.get("name") == "process_name":
                    named_pids.add(e["pid"])
                elif e.get("name") == "thread_name":
                    named_threads[(e["pid"], e["tid"])] = e.get("args", {}).get("name", "")
                continue
            if e["ph"] != "X":
                fail(f"{path}: unexpected ph: {e}")
            for k in ("name", "cat", "dur"):
                if k not in e:
                    fail(f"{path}: complete event without {k}: {e}")
            if e["dur"] < 0 or e["ts"] < 0:
                fail(f"{path}: negative ts or dur: {e}")
            threads.setdefault((e["pid"], e["tid"]), []).append(e)
    if not threads:
        fail("no complete events")
    for key, evs in threads.items():
        if key[0] not in named_pids:
            fail(f"pid {key[0]} has no process_name")
        if key not in named_threads:
            fail(f"thread {key} has no thread_name")
        # nested or disjoint: walk in start order (longer first) with a stack
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS:
                stack.pop()
            if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + EPS:
                fail(f"thread {key}: {e} overlaps {stack[-1]} without nesting")
            stack.append(e)
    steps = {k: [e for e in evs if e["cat"] == "step"] for k, evs in threads.items()}
    n_steps = sum(len(v) for v in steps.values())
    if layers is not None:
        for key, evs in threads.items():
            if not steps[key]:
                fail(f"thread {key}: no step events")
            starts = [e["ts"] for e in evs]  # evs is in start order (above)
            for s in steps[key]:
                lo = bisect.bisect_left(starts, s["ts"] - EPS)
                hi = bisect.bisect_right(starts, s["ts"] + s["dur"] + EPS)
                inside = [e for e in evs[lo:hi] if e is not s and
                          e["ts"] + e["dur"] <= s["ts"] + s["dur"] + EPS]
                for cat in ("forward", "backward"):
                    names = sorted(e["name"] for e in inside if e["cat"] == cat)
                    if names != sorted(layers):
                        fail(f"thread {key} {s['name']}: {cat} events {names}, "
                             f"want one per layer {sorted(layers)}")
                if named_threads[key].endswith(" device"):
                    opt = [e for e in inside if e["cat"] == "optimizer"]
                    if len(opt) != 1:
                        fail(f"thread {key} {s['name']}: optimizer events {opt}, want one")
                    continue
                ar = [e for e in inside if e["cat"] == "allreduce"]
                if not ar or not all(e.get("args", {}).get("bytes", 0) > 0 for e in ar):
                    fail(f"thread {key} {s['name']}: allreduce events {ar}, want some with bytes")
    if device:
        by_label = {(k[0], name): k for k, name in named_threads.items()}
        hosts = [k for k, name in named_threads.items()
                 if name.startswith("replica ") and not name.endswith(" device")]
        if not hosts:
            fail("--device: no replica threads")
        for hk in hosts:
            dk = by_label.get((hk[0], named_threads[hk] + " device"))
            if dk is None or dk not in steps:
                fail(f"--device: thread {hk} ({named_threads[hk]}) has no device thread")
            host_steps = {s["name"]: s for s in steps.get(hk, [])}
            if sorted(host_steps) != sorted(s["name"] for s in steps[dk]):
                fail(f"--device: thread {dk}'s steps are not those of {hk}")
            for s in steps[dk]:
                h = host_steps[s["name"]]
                if s["ts"] < h["ts"] - EPS or s["ts"] + s["dur"] > h["ts"] + h["dur"] + EPS:
                    fail(f"--device: {dk} {s} is not inside {hk}'s {h}")
    if common:
        pids = {k[0] for k in threads}
        if len(pids) < 2:
            fail(f"--common-origin: one process only ({pids})")
        by_name = {}
        for key, v in steps.items():
            for s in v:
                by_name.setdefault(s["name"], []).append(s)
        shared = [v for v in by_name.values() if len({s["pid"] for s in v}) == len(pids)]
        if not shared:
            fail("--common-origin: no step in every process")
        ref = min(pids)
        longest = max(s["dur"] for v in shared for s in v)
        for p in sorted(pids):
            # [lo, hi]: the shifts of p's times that make each shared step
            # overlap the first process's (0 for the first process itself)
            lo, hi = (0.0, 0.0) if p == ref else (-float("inf"), float("inf"))
            for v in shared:
                mine = [s for s in v if s["pid"] == p]
                if len(mine) > 1 and max(s["ts"] for s in mine) > \
                        min(s["ts"] + s["dur"] for s in mine) + EPS:
                    fail(f"{mine[0]['name']}: process {p}'s threads do not overlap: {mine}")
                for x in (s for s in v if s["pid"] == ref):
                    for y in mine:
                        lo = max(lo, x["ts"] - y["ts"] - y["dur"] - EPS)
                        hi = min(hi, x["ts"] + x["dur"] - y["ts"] + EPS)
            if lo > hi:
                fail(f"--common-origin: no one shift of process {p}'s times makes its steps "
                     f"overlap process {ref}'s: not one clock")
            off = 0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))
            if off > longest:
                fail(f"--common-origin: process {p}'s times are {off:.3f} us off process "
                     f"{ref}'s, more than the longest step ({longest:.3f} us)")
    print(f"ok: pids {len({k[0] for k in threads})} threads {len(threads)} steps {n_steps} "
          f"events {n_events}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
