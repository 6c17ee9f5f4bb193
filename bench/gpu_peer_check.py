#!/usr/bin/env python3
"""The meson test `gpu_peer`: bench/gpu_peer.py --quick on one emulated GPU.

    gpu_peer_check.py BUILD_DIR

1. `bench/gpu_peer.py --quick --table --build BUILD_DIR` with
   MIRRORED_EMULATED_GPUS=1 exits 0; its table has one row for each of the
   quick rows (gpu_peer.QUICK) with our images/s, a positive number; the
   PyTorch side printed one line: that it found no GPU (no torch, or torch
   without CUDA; then its cells are "-"), or the GPU it runs on (then its
   cells are numbers); the block is headed by the GPU's name and the commit.
2. With a PyTorch side that finds a GPU (a fake --python printing what
   gpu_peer_torch.py prints: two variants' figures and one variant's
   error), fashion_mlp's row has its images/s, the ratios and its peak
   memory, "-" for the failed variant, and the notes hold our trainable
   parameters against the twin's.
3. It can fail: with a mirrored_train that fails, and with one that writes
   no images/s, gpu_peer.py exits 1; with one that lists no GPU it says so
   in one line and exits 0 (fakes in a temporary build folder).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_peer  # noqa: E402

SCRIPT = os.path.join(HERE, "gpu_peer.py")
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(build, *extra):
    env = dict(os.environ, MIRRORED_EMULATED_GPUS="1")
    return subprocess.run([sys.executable, SCRIPT, "--quick", "--build", build, *extra], env=env,
                          capture_output=True, text=True, timeout=900)


def number(cell):
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return None


def check_run(build):
    r = run(build, "--table")
    sys.stdout.write(r.stdout + r.stderr)
    check(r.returncode == 0, f"gpu_peer.py --quick exits 0 (got {r.returncode})")
    ours = re.search(r"^ours: gpu:0: (.+)$", r.stderr, re.M)
    check(ours is not None, "it names our GPU (ours: gpu:0: ...)")
    peer = [l for l in r.stderr.splitlines() if l.startswith("pytorch side: ")]
    check(len(peer) == 1, f"the PyTorch side printed one status line (got {len(peer)})")
    no_gpu = bool(peer) and peer[0].startswith("pytorch side: found no GPU (")
    has_gpu = bool(peer) and re.match(r"pytorch side: torch \S+ on cuda:0: ", peer[0]) is not None
    check(no_gpu or has_gpu, "that line says it found no GPU, or which one it runs on")
    if ours:
        name = gpu_peer.gpu_name(ours.group(1))
        check(re.search(rf"^_`bench/gpu_peer.py --quick` on {re.escape(name)}, commit `\w+`, "
                        r"\d{4}-\d\d-\d\d", r.stdout, re.M) is not None,
              f"--table's block is headed by the GPU ({name}), the commit and the date")
    rows = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) > 2 and cells[1].isdigit():
            rows[(cells[0], int(cells[1]))] = cells
    for model, batch, _, _ in gpu_peer.QUICK:
        cells = rows.get((model, batch))
        check(cells is not None, f"a row for {model} at batch {batch}")
        if cells is None:
            continue
        ours_ips = number(cells[2])
        check(ours_ips is not None and ours_ips > 0, f"{model} {batch}: our images/s ({cells[2]})")
        peer_cells = cells[3:3 + len(gpu_peer.VARIANTS)]
        if no_gpu:
            check(all(c == "-" for c in peer_cells), f"{model} {batch}: PyTorch cells are '-'")
        elif has_gpu:
            check(all(number(c) for c in peer_cells), f"{model} {batch}: PyTorch's images/s")


FAKE_PYTHON = r'''#!/bin/sh
# a Python whose torch finds a GPU, printing what gpu_peer_torch.py prints
case " $* " in *" --probe "*)
    echo '{"torch": "0.0+fake", "gpu": "Fake GPU", "variants": {}}'; exit 0;; esac
echo '{"torch": "0.0+fake", "gpu": "Fake GPU", "params": 109386, "variants": {"eager":
{"images_per_sec": 1000.0, "peak_mib": 10.0}, "channels_last": {"images_per_sec": 2000.0,
"peak_mib": 12.0}, "graphs": {"error": "RuntimeError: fake"}}}' | tr -d '\n'
'''


def check_fake_peer(build):
    with tempfile.TemporaryDirectory() as tmp:
        py = os.path.join(tmp, "python")
        with open(py, "w") as f:
            f.write(FAKE_PYTHON)
        os.chmod(py, 0o755)
        r = run(build, "--models", "fashion_mlp", "--python", py)
    check(r.returncode == 0 and "pytorch side: torch 0.0+fake on cuda:0: Fake GPU" in r.stdout,
          f"a PyTorch side with a GPU: its line (exit {r.returncode})")
    row = [l for l in r.stdout.splitlines() if l.startswith("| fashion_mlp | 64 |")]
    cells = [c.strip() for c in row[0].strip("|").split("|")] if row else []
    check(len(cells) == 11, f"a PyTorch side with a GPU: fashion_mlp's row ({row})")
    if len(cells) == 11:
        check(cells[3:6] == ["1,000", "2,000", "-"], f"PyTorch's images/s ({cells[3:6]})")
        # ours / 1000 and ours / 2000, each rounded to 2 decimals; none against the error
        r1, r2 = (number(c[:-1]) if re.fullmatch(r"[0-9,]+\.\d\dx", c) else None
                  for c in cells[6:8])
        check(r1 is not None and r2 is not None and abs(r1 - 2 * r2) <= 0.011
              and cells[8] == "-", f"the ratios ({cells[6:9]})")
        check(cells[9:] == ["n/a", "10 / 12 / -"], f"the peak memory ({cells[9:]})")
    check("fashion_mlp 109,386 = 109,386" in r.stdout, "our trainable parameters against the "
          "twin's (mirrored_train's summary: Trainable params)")


FAKE = r'''#!/bin/sh
# a mirrored_train that lists one GPU and then {what}
if [ "$1" = --list-devices ]; then echo "gpu:0: Fake GPU, 1.0 GiB"; exit 0; fi
while [ $# -gt 0 ]; do [ "$1" = --json ] && out=$2; shift; done
{body}
'''


def check_fails(what, body):
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "launch"))
        exe = os.path.join(tmp, "launch", "mirrored_train")
        with open(exe, "w") as f:
            f.write(FAKE.format(what=what, body=body))
        os.chmod(exe, 0o755)
        r = run(tmp, "--models", "fashion_mlp")
        check(r.returncode == 1, f"with a mirrored_train that {what}, gpu_peer.py exits 1 "
                                 f"(got {r.returncode}: {r.stderr.strip()[-200:]})")


def main():
    build = os.path.abspath(sys.argv[1])
    check_run(build)
    check_fake_peer(build)
    check_fails("fails", "echo 'out of memory' >&2; exit 1")
    check_fails("writes no images/s",
                "echo '" + json.dumps({"images_per_sec": None}) + "' > \"$out\"; exit 0")
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "launch"))
        exe = os.path.join(tmp, "launch", "mirrored_train")
        with open(exe, "w") as f:
            f.write("#!/bin/sh\necho 'gpu: none (no NVIDIA driver)'\n")
        os.chmod(exe, 0o755)
        r = run(tmp)
        check(r.returncode == 0 and r.stdout.strip() == "gpu_peer: ours: found no GPU: no NVIDIA "
              "driver", f"without a GPU for ours: one line, exit 0 (got {r.returncode}: "
              f"{r.stdout.strip()[-200:]})")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
