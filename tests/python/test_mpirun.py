"""mpirun -np 2 python3 SCRIPT: the two processes make one job. Each gets the
History, and the weights are bitwise those of the same two replicas in one
process (cpu:2), as mirrored_train's are."""
import json
import os
import shutil
import subprocess
import sys

import pytest

SCRIPT = """
import json, sys
import mirrored
from conftest import dense_cfg, separable
x, y = separable()
m = mirrored.Model.from_config(dense_cfg(epochs=2), name="tiny")
h = m.fit(x, y, validation_split=0.2, devices=sys.argv[1], verbose=0)
loss, accuracy = m.evaluate(x, y)
rank, size = mirrored.job()
with open(f"{sys.argv[2]}/rank{rank}.json", "w") as f:
    json.dump({"rank": rank, "size": size, "hash": h.params["params_hash"],
               "val_loss": h.history["val_loss"], "loss": loss}, f)
"""


def run(cmd, env, out):
    """Each process's figures, from its own file (mpirun may join the
    processes' lines on stdout)."""
    out.mkdir()
    done = subprocess.run(cmd + [str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(p.read_text()) for p in sorted(out.iterdir())]


def test_two_processes_are_one_job(tmp_path):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun not found (openmpi-bin)")
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    here = os.path.dirname(os.path.abspath(__file__))
    path = [here] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", MIRRORED_COMM_TIMEOUT="120")
    (want,) = run([sys.executable, str(script), "cpu:2"], env, tmp_path / "one")
    got = run([mpirun, "-q", "-np", "2", sys.executable, str(script), "cpu:1"], env,
              tmp_path / "two")
    assert sorted(g["rank"] for g in got) == [0, 1]
    for g in got:
        assert g["size"] == 2
        assert len(g["val_loss"]) == 2
        assert g["hash"] == want["hash"]
        assert g["val_loss"] == want["val_loss"]
        assert g["loss"] == want["loss"]


def mpirun_env():
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun not found (openmpi-bin)")
    here = os.path.dirname(os.path.abspath(__file__))
    path = [here] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    return mpirun, dict(os.environ, PYTHONPATH=os.pathsep.join(path), OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", MIRRORED_COMM_TIMEOUT="120")


CALLS = """
import json, sys
import numpy as np
import mirrored
from conftest import dense_cfg, separable
out = sys.argv[1]
rank, size = mirrored.job()
x, y = separable()
m = mirrored.Model.from_config(dense_cfg(epochs=1), name="tiny")
m.fit(x, y, devices="cpu:1", verbose=0)
p = m.predict(x, devices="cpu:1")
m.save(f"{out}/saved.keras")  # rank 0 writes it, every rank returns after
back = mirrored.load(f"{out}/saved.keras")
q = back.predict(x, devices="cpu:1")
np.save(f"{out}/rank{rank}-p.npy", p)
np.save(f"{out}/rank{rank}-q.npy", q)
"""


def test_predict_save_and_load_under_mpirun(tmp_path):
    """N5, N7: every process gets every row of predict, bit for bit those of
    one process; a .keras saved by the job loads on every process."""
    mpirun, env = mpirun_env()
    script = tmp_path / "calls.py"
    script.write_text(CALLS)
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    for cmd, out in (([sys.executable], one), ([mpirun, "-q", "-np", "2", sys.executable], two)):
        done = subprocess.run(cmd + [str(script), str(out)], env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    import numpy as np
    want = np.load(one / "rank0-p.npy")
    assert want.shape == (600, 3) and np.all(want.sum(axis=1) > 0.99)
    for r in (0, 1):
        # one process's fit on cpu:1 is not the job's on 2 replicas: the job's own
        # predict is compared across its ranks, and with its own reload
        got_p = np.load(two / f"rank{r}-p.npy")
        got_q = np.load(two / f"rank{r}-q.npy")
        assert np.all(got_p.sum(axis=1) > 0.99), f"rank {r}: rows missing from predict"
        assert got_p.tobytes() == np.load(two / "rank0-p.npy").tobytes()
        assert got_q.tobytes() == got_p.tobytes(), f"rank {r}: the reloaded model differs"


ONE_FAILS = """
import sys, time
import numpy as np
import mirrored
from conftest import dense_cfg, separable
rank, size = mirrored.job()
x, y = separable()
m = mirrored.Model.from_config(dense_cfg(epochs=1), name="tiny")
what, out = sys.argv[1], sys.argv[2]
t0 = time.monotonic()
try:
    if what == "shape":  # rank 1's x has a column too many
        m.evaluate(x if rank == 0 else np.pad(x, ((0, 0), (0, 1))), y, devices="cpu:1")
    elif what == "missing":  # rank 1's file is not there
        mirrored.load("tiny.cfg" if rank == 0 else "nowhere.cfg")
    else:  # the same call with other data
        m.predict(x if rank == 0 else x * 2, devices="cpu:1")
    line = f"rank {rank}: no error"
except Exception as e:
    line = f"rank {rank}: {type(e).__name__}: {e} ({time.monotonic() - t0:.0f} s)"
# a file each: mpirun may join the processes' lines on stdout
with open(f"{out}/rank{rank}.txt", "w") as f:
    f.write(line)
"""


@pytest.mark.parametrize("what,want", [
    ("shape", "rank 1 ("),
    ("missing", "rank 1 ("),
    ("other", "predict: rank 1 ("),
])
def test_one_rank_fails_every_rank_raises(tmp_path, what, want):
    """N6: a failure or other arguments on one rank is the same error on
    every rank, at once (not after the collective timeout)."""
    mpirun, env = mpirun_env()
    script = tmp_path / "fails.py"
    script.write_text(ONE_FAILS)
    (tmp_path / "tiny.cfg").write_text("[net]\n[input]\nshape = 8\n[dense]\nunits = 3\n"
                                       "activation = softmax\n")
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([mpirun, "-q", "-np", "2", sys.executable, str(script), what, str(out)],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [p.read_text() for p in sorted(out.iterdir())]
    assert len(lines) == 2, done.stdout + done.stderr
    for r, line in enumerate(lines):
        assert line.startswith(f"rank {r}: ") and want in line, line
        # at once: far from the collective timeout (120 s) a wait would take
        seconds = int(line.rsplit("(", 1)[1].split(" s)")[0])
        assert seconds < 60, line
    # the same message on both
    def text(line):
        return line.split(": ", 1)[1].rsplit(" (", 1)[0]
    assert text(lines[0]) == text(lines[1]), lines
