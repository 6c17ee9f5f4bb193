#!/usr/bin/env bash
# What a refactor must leave byte for byte as it is: for every shipped config, a short fixed run's
# params_hash, its --json (less the fields that time the run) and its --metrics CSV (less its time
# column), on CPU replicas, under mpirun -np 2, and on emulated GPUs where the build has them.
#   scripts/fingerprint.sh BUILD OUT [cpu|mpi|gpu ...]
# Compare two trees: diff -r OUT_BEFORE OUT_AFTER. A run is 2 epochs on the first 2048 training and
# 512 test examples of Fashion-MNIST (IDX files made here); the ResNets at a small global batch,
# ResNet-50 on --synthetic data (its own is ImageNet-sized).
set -euo pipefail
build=$(realpath "$1")
out=$(mkdir -p "$2" && realpath "$2")
shift 2
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(cpu mpi)
cd "$(dirname "$0")/.."
train=$build/launch/mirrored_train
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the fields of --json that time the run, and --metrics's time column
strip_json() { /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()
                if not any(t in k for t in ("sec", "time", "_s", "date", "host", "wall", "rss", "slowest"))}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
print(json.dumps(clean(d), indent=1, sort_keys=True))' "$1"; }
strip_csv() { /usr/bin/python3 -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if rows:
    keep = [i for i, h in enumerate(rows[0]) if "time" not in h and "sec" not in h]
    for r in rows:
        print(",".join(r[i] for i in keep))' "$1"; }
run() { # mode name cfg devices launcher-and-args...
    local mode=$1 name=$2 cfg=$3 dev=$4
    shift 4
    local o=$tmp/$mode-$name
    "$@" "$train" "$cfg" --devices "$dev" --quiet --epochs 2 --json "$o.json" --metrics "$o.csv" \
        ${extra[@]+"${extra[@]}"} > "$o.log" 2>&1 || { echo "$mode $name: failed"; cat "$o.log"; return 1; }
    strip_json "$o.json" > "$out/$mode-$name.json"
    strip_csv "$o.csv" > "$out/$mode-$name.csv"
    grep -o '"params_hash": *"[0-9a-f]*"' "$o.json" > "$out/$mode-$name.hash"
    echo "$mode $name $(cat "$out/$mode-$name.hash")"
}
# the first n examples of a Fashion-MNIST IDX file, as an uncompressed IDX file
/usr/bin/python3 - "$tmp" <<'PY'
import gzip, struct, sys
src = "/usr/share/datasets/fashion-mnist/"
for name, n in (("train-images-idx3-ubyte", 2048), ("train-labels-idx1-ubyte", 2048),
                ("t10k-images-idx3-ubyte", 512), ("t10k-labels-idx1-ubyte", 512)):
    b = gzip.open(src + name + ".gz").read()
    rank = b[3]
    dims = list(struct.unpack(">%dI" % rank, b[4:4 + 4 * rank]))
    row = 1
    for d in dims[1:]:
        row *= d
    dims[0] = n
    head = b[:4] + struct.pack(">%dI" % rank, *dims)
    open(sys.argv[1] + "/" + name, "wb").write(head + b[4 + 4 * rank:4 + 4 * rank + n * row])
PY
for cfg in models/configs/*.cfg; do
    name=$(basename "$cfg" .cfg)
    extra=()
    c=$tmp/$name.cfg
    sed "s|/usr/share/datasets/fashion-mnist/\([a-z0-9-]*\)\.gz|$tmp/\1|" "$cfg" > "$c"
    case $name in
    resnet50) sed -i 's/^global_batch = .*/global_batch = 4/' "$c"; extra=(--synthetic 16) ;;
    fashion_resnet20) sed -i 's/^global_batch = .*/global_batch = 32/' "$c" ;;
    esac
    for mode in "${modes[@]}"; do
        case $mode in
        cpu) run cpu "$name" "$c" cpu:2 env ;;
        mpi) run mpi "$name" "$c" cpu mpirun -np 2 --bind-to none ;;
        gpu) run gpu "$name" "$c" gpu env MIRRORED_EMULATED_GPUS=2 ;;
        esac
    done
done
