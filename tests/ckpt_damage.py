#!/usr/bin/env python3
"""Damaged checkpoints are refused, never silently used.

    python3 tests/ckpt_damage.py BUILD_DIR [COPIES]

Trains a small CNN (BatchNormalization, Adam: weights, moving statistics and
optimizer slots) for one epoch on generated 8x8 images, then:

1. Targeted: flips one bit in a Dense kernel, in an Adam slot, in a dataset
   of /mirrored and in the .cfg text (/mirrored/cfg); each copy
   must be refused by mirrored_eval and by mirrored_train --resume with
   one line naming that dataset, exit != 0.
2. Random: COPIES (default 40) copies with seeded random truncations, bit
   flips and zeroed blocks (seed 20). Each must either be refused (exit != 0, one line
   naming the file) or behave exactly as the intact file: mirrored_eval's
   class probabilities bitwise equal, and a resume that trains one more
   epoch ends with the same params_hash (so the weights, the optimizer
   slots and the training state all read back the same).
3. --resume auto with the newest checkpoint damaged resumes from the one
   before, says so, and ends as a resume from that one does.
4. h5py reads every dataset and attribute of the intact file.

Prints "N of COPIES refused, M loaded identical"; exit 1 on any copy that
loads differently, crashes or prints more than one line. Exit 77 (skip)
without numpy or h5py."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError:
    print("SKIPPED: python3-numpy or python3-h5py is not installed")
    sys.exit(77)

CFG = """[net]
global_batch=16
epochs=1
seed=5
checkpoint=ck/run.h5
checkpoint_every=5 steps
optimizer=adam
[data]
train_images=x.npy
train_labels=y.npy
test_images=x.npy
test_labels=y.npy
scale=1/255
[input]
shape=8,8,1
[conv2d]
filters=4
size=3
[batchnorm]
[activation]
activation=relu
[maxpool]
size=2
[flatten]
[dense]
units=16
activation=relu
[dense]
units=4
activation=softmax
"""

failures = []


def fail(msg):
    print(f"FAIL: {msg}")
    failures.append(msg)


def run(args, cwd):
    try:
        p = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    except subprocess.TimeoutExpired:  # HDF5 can loop forever on a damaged file
        return -1, "", f"{os.path.basename(args[0])} hung (killed after 120 s)"
    return p.returncode, p.stdout, p.stderr


class Tools:
    def __init__(self, build, work):
        self.train = os.path.join(build, "launch", "mirrored_train")
        self.eval = os.path.join(build, "launch", "mirrored_eval")
        self.work = work

    def evaluate(self, ck):
        """(rc, stderr, probabilities bytes or None)"""
        out = os.path.join(self.work, "p.npy")
        if os.path.exists(out):
            os.unlink(out)
        rc, _, err = run([self.eval, ck, "--devices", "cpu", "--quiet", "--predict", out],
                         self.work)
        data = open(out, "rb").read() if rc == 0 and os.path.exists(out) else None
        return rc, err, data

    def resume(self, ck):
        """(rc, stderr, params_hash or None): one more epoch from ck"""
        js = os.path.join(self.work, "r.json")
        if os.path.exists(js):
            os.unlink(js)
        rc, _, err = run([self.train, "m.cfg", "--devices", "cpu", "--epochs", "2", "--resume",
                          ck, "--json", js], self.work)
        h = json.load(open(js))["params_hash"] if rc == 0 else None
        return rc, err, h


def one_line(err):
    lines = [l for l in err.splitlines() if l.strip()]
    return len(lines) == 1


def write_data(work):
    rng = np.random.default_rng(1)
    n, classes = 160, 4
    y = (np.arange(n) % classes).astype(np.uint8)
    x = (rng.random((n, 8, 8)) * 100).astype(np.uint8)
    x[:, :, :][np.arange(64).reshape(8, 8)[None] % classes == y[:, None, None]] += 120
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    with open(os.path.join(work, "m.cfg"), "w") as f:
        f.write(CFG)


def flip_at(src, dst, offset, bit=0):
    b = bytearray(open(src, "rb").read())
    b[offset] ^= 1 << bit
    open(dst, "wb").write(b)


def targeted(tools, ck):
    """One flipped bit in each kind of object, named in the refusal."""
    f = h5py.File(ck, "r")
    cases = []
    for name in ("/model_weights/dense/sequential/dense/kernel",
                 "/optimizer_weights/adam/sequential_dense_kernel_momentum",
                 "/mirrored/preprocessing/scale", "/mirrored/position"):
        off = f[name].id.get_offset() if name in f else None
        if off is None:
            fail(f"no contiguous dataset {name} in the checkpoint")
            continue
        cases.append((name, off))
    f.close()
    raw = open(ck, "rb").read()
    at = raw.find(b"units=16")
    if at < 0:
        fail("the .cfg text is not in the file as bytes")
    else:
        cases.append(("/mirrored/cfg", at + 6))
    for name, off in cases:
        bad = os.path.join(tools.work, "flip.h5")
        flip_at(ck, bad, off, 1)
        for what, (rc, err, _) in (("mirrored_eval", tools.evaluate(bad)),
                                   ("mirrored_train --resume", tools.resume(bad))):
            if rc == 0 or not one_line(err) or name not in err or "flip.h5" not in err:
                fail(f"{what} on a flipped bit in {name}: exit {rc}, {err!r}")
        print(f"flipped bit in {name}: refused: {err.strip()}")


def random_copies(tools, ck, copies, good_probs, good_hash):
    raw = open(ck, "rb").read()
    rng = random.Random(20)
    refused = same = 0
    for i in range(copies):
        b = bytearray(raw)
        kind = ("truncate", "flip", "zero")[i % 3]
        if kind == "truncate":
            b = b[:rng.randrange(0, len(b))]
            what = f"truncated to {len(b)} bytes"
        elif kind == "flip":
            offs = [rng.randrange(len(b)) for _ in range(rng.randint(1, 3))]
            for o in offs:
                b[o] ^= 1 << rng.randrange(8)
            what = f"bits flipped at {offs}"
        else:
            o, n = rng.randrange(len(b)), rng.choice((16, 64, 512))
            b[o:o + n] = bytes(len(b[o:o + n]))
            what = f"{n} bytes zeroed at {o}"
        if bytes(b) == raw:
            what += " (bytes unchanged)"
        bad = os.path.join(tools.work, "copy.h5")
        open(bad, "wb").write(b)
        rc_e, err_e, probs = tools.evaluate(bad)
        rc_r, err_r, h = tools.resume(bad)
        outcome = []
        for tool, rc, err, ok in (("mirrored_eval", rc_e, err_e, probs == good_probs),
                                  ("resume", rc_r, err_r, h == good_hash)):
            if rc < 0 or rc > 125:
                fail(f"copy {i} ({what}): {tool} crashed or hung (status {rc}): {err[-300:]!r}")
                outcome.append("CRASHED")
            elif rc != 0:
                if not one_line(err) or "copy.h5" not in err:
                    fail(f"copy {i} ({what}): {tool} refused without one line naming the file: "
                         f"{err!r}")
                outcome.append("refused")
            elif not ok:
                fail(f"copy {i} ({what}): {tool} exit 0 with different results")
                outcome.append("DIFFERENT")
            else:
                outcome.append("same")
        if outcome == ["refused", "refused"]:
            refused += 1
        elif outcome == ["same", "same"]:
            same += 1
        else:
            fail(f"copy {i} ({what}): eval {outcome[0]}, resume {outcome[1]}")
        print(f"copy {i:2d} {what}: eval {outcome[0]}, resume {outcome[1]}"
              + (f" ({err_e.strip()})" if rc_e else ""))
    print(f"{refused} of {copies} refused, {same} loaded identical, "
          f"{copies - refused - same} otherwise")


def resume_auto(tools):
    """The newest checkpoint damaged: --resume auto takes the one before."""
    orig, ck = os.path.join(tools.work, "orig"), os.path.join(tools.work, "ck")
    files = sorted(os.listdir(orig))
    if len(files) < 2:
        fail(f"want two checkpoints, have {files}")
        return
    _, _, want = tools.resume(os.path.join(orig, files[-2]))
    # the resumes above wrote checkpoints of their own: back to the two
    shutil.rmtree(ck)
    shutil.copytree(orig, ck)
    newest, prev = (os.path.join(ck, n) for n in files[-2:][::-1])
    b = bytearray(open(newest, "rb").read())
    off = h5py.File(newest, "r")["/mirrored/position"].id.get_offset()
    b[off] ^= 4
    open(newest, "wb").write(b)
    rc, out, err = run([tools.train, "m.cfg", "--devices", "cpu", "--epochs", "2", "--resume",
                        "auto", "--json", "auto.json"], tools.work)
    text = out + err
    if rc != 0:
        fail(f"--resume auto with a damaged newest: exit {rc}: {text[-500:]!r}")
        return
    got = json.load(open(os.path.join(tools.work, "auto.json")))["params_hash"]
    if os.path.basename(newest) not in text or os.path.basename(prev) not in text:
        fail(f"--resume auto does not name the damaged {newest} and the one used: {text!r}")
    if got != want:
        fail(f"--resume auto ended with {got}, a resume from {prev} with {want}")
    print(f"--resume auto: {[l for l in text.splitlines() if 'damaged' in l]}")


def main():
    build = sys.argv[1]
    copies = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    work = tempfile.mkdtemp(prefix="ckpt_damage.")
    try:
        write_data(work)
        tools = Tools(os.path.abspath(build), work)
        # checkpoints after 5 and 10 updates (one epoch: 160 / 16)
        rc, out, err = run([tools.train, "m.cfg", "--devices", "cpu", "--quiet"], work)
        if rc != 0:
            print(f"training failed: {out}{err}")
            return 1
        shutil.copytree(os.path.join(work, "ck"), os.path.join(work, "orig"))
        names = sorted(os.listdir(os.path.join(work, "orig")))
        intact = os.path.join(work, "intact.h5")
        shutil.copy(os.path.join(work, "orig", names[-1]), intact)
        # h5py reads everything
        with h5py.File(intact, "r") as f:
            f.visititems(lambda n, o: o[()] if isinstance(o, h5py.Dataset) else None)
            for o in [f] + [f[n] for n in ("mirrored", "model_weights")]:
                dict(o.attrs)
        rc, err, good_probs = tools.evaluate(intact)
        rc2, err2, good_hash = tools.resume(intact)
        if rc or rc2 or good_probs is None or good_hash is None:
            print(f"the intact checkpoint does not load: {err}{err2}")
            return 1
        targeted(tools, intact)
        random_copies(tools, intact, copies, good_probs, good_hash)
        resume_auto(tools)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
