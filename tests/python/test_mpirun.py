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
