#!/usr/bin/env python3
"""Checks a mirrored checkpoint against Keras's legacy .h5 layout, as h5py
users (and keras.models.load_model) read it. Used by tests/test_resume.c
(a Sequential) and tests/keras_functional.py (a Functional):

    python3 tests/h5_layout.py FILE.h5 LAYER:CLASS[:SHAPE;SHAPE...[:IN+IN]] ...

Each argument names a layer in order, its Keras class and the shapes of its
weights (e.g. dense:Dense:64x16;16). A Functional's list starts with its
InputLayer (input_layer:InputLayer) and each layer may name the layers its
inbound node takes (add:Add::c3+conv2d), as Keras 3.15 writes them: weights
at <layer>/<layer>/<weight>, not sequential/<layer>/<weight>, and the last
layer the model's output. Exit 0 when everything is where Keras puts it;
otherwise a line saying what is not, exit 1. Exit 77 (skip) when h5py is
missing."""
import json
import sys

try:
    import h5py
except ImportError:
    print("SKIPPED: python3-h5py is not installed")
    sys.exit(77)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def fail(msg):
    print(f"h5_layout: {msg}")
    sys.exit(1)


def main():
    path, specs = sys.argv[1], sys.argv[2:]
    f = h5py.File(path, "r")
    for key in ("backend", "keras_version", "model_config", "training_config"):
        if key not in f.attrs:
            fail(f"no root attribute {key}")
    config = json.loads(text(f.attrs["model_config"]))
    functional = specs[0].split(":")[1] == "InputLayer"
    if config["class_name"] != ("Functional" if functional else "Sequential"):
        fail(f"model_config is a {config['class_name']}")
    layers = config["config"]["layers"]
    if layers[0]["class_name"] != "InputLayer":
        fail("model_config does not start with its InputLayer")
    if functional:
        # a Functional's layer list has its InputLayer, as layer_names has
        layers = [None] + layers
        ends = [specs[0].split(":")[0], specs[-1].split(":")[0]]
        for key, name in zip(("input_layers", "output_layers"), ends):
            if config["config"][key] != [name, 0, 0]:
                fail(f"{key} {config['config'][key]}, expected [{name!r}, 0, 0]")
    training = json.loads(text(f.attrs["training_config"]))
    if "optimizer_config" not in training or "loss" not in training:
        fail("training_config has no optimizer_config or loss")
    mw = f["model_weights"]
    for key in ("backend", "keras_version", "layer_names"):
        if key not in mw.attrs:
            fail(f"/model_weights has no attribute {key}")
    names = [text(n) for n in mw.attrs["layer_names"]]
    want = [s.split(":") for s in specs]
    if names != [w[0] for w in want]:
        fail(f"layer_names {names}, expected {[w[0] for w in want]}")
    if len(layers) != len(want) + 1:
        fail(f"model_config has {len(layers) - 1} layers, expected {len(want)}")
    for (name, cls, *shapes), entry in zip(want, layers[1:]):
        if entry["class_name"] != cls or entry["config"]["name"] != name:
            fail(f"model_config has {entry['class_name']} {entry['config']['name']} for {cls} {name}")
        if functional:
            if entry.get("name") != name:
                fail(f"{name}: the layer's name key is {entry.get('name')}")
            nodes = entry["inbound_nodes"]
            args = nodes[0]["args"] if nodes else []
            tensors = args[0] if args and isinstance(args[0], list) else args
            took = [t["config"]["keras_history"] for t in tensors]
            inputs = shapes[1].split("+") if len(shapes) > 1 else None
            if cls == "InputLayer":
                inputs = []
            if inputs is not None and took != [[i, 0, 0] for i in inputs]:
                fail(f"{name}: inbound_nodes take {took}, expected {inputs}")
            if any(t["class_name"] != "__keras_tensor__" for t in tensors):
                fail(f"{name}: an inbound node's args are not __keras_tensor__s")
        group = mw[name]
        weight_names = [text(w) for w in group.attrs["weight_names"]]
        expected = [tuple(int(d) for d in s.split("x")) for s in shapes[0].split(";")] \
            if shapes and shapes[0] else []
        if len(weight_names) != len(expected):
            fail(f"{name}: {len(weight_names)} weights, expected {len(expected)}")
        prefix = f"{name}/" if functional else f"sequential/{name}/"
        for w, shape in zip(weight_names, expected):
            if not w.startswith(prefix):
                fail(f"{name}: weight name {w}")
            ds = group[w]
            if ds.shape != shape or ds.dtype != "float32":
                fail(f"{name}/{w}: {ds.dtype} {ds.shape}, expected float32 {shape}")
    if "optimizer_weights" not in f or "weight_names" not in f["optimizer_weights"].attrs:
        fail("no /optimizer_weights with weight_names")
    for w in f["optimizer_weights"].attrs["weight_names"]:
        if text(w) not in f["optimizer_weights"]:
            fail(f"optimizer weight {text(w)} missing")
    if "mirrored" not in f or "cfg" not in f["mirrored"]:
        fail("no /mirrored group with the .cfg")
    print(f"{path}: Keras legacy layout, {len(names)} layers")


if __name__ == "__main__":
    main()
