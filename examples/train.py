#!/usr/bin/env python3
"""Fashion-MNIST's small CNN trained from Python, on every core or every GPU,
or as one job of several processes:

    python3 examples/train.py --epochs 2 --devices cpu:2
    mpirun -np 2 python3 examples/train.py --epochs 2 --devices cpu:1

Under mpirun every process runs this same script; they make the same calls
with the same arrays, and their replicas train one model. The first process
prints and writes the files."""
import argparse
import gzip

import numpy as np

import mirrored

MODEL = """
[net]
optimizer = adam
learning_rate = 0.002
loss = sparse_categorical_crossentropy
seed = 1

[InputLayer]
shape = (28, 28, 1)

[Rescaling]
scale = 1/255

[Conv2D]
filters = 32
kernel_size = (3, 3)
activation = "relu"

[MaxPooling2D]
pool_size = (2, 2)

[Flatten]

[Dense]
units = 10
activation = "softmax"
"""


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def load(root, n):
    """(x_train, y_train), (x_test, y_test): uint8 images (n, 28, 28, 1) and class ids."""
    x = read_idx(f"{root}/train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1)[:n]
    y = read_idx(f"{root}/train-labels-idx1-ubyte.gz", 8)[:n]
    xt = read_idx(f"{root}/t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1)
    yt = read_idx(f"{root}/t10k-labels-idx1-ubyte.gz", 8)
    return (x, y), (xt, yt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default="auto", help="auto, cpu:N, gpu, gpu:0,1")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64, help="the global batch")
    ap.add_argument("--examples", type=int, default=60000, help="training examples to use")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                    help="folder of the IDX files (Debian: dataset-fashion-mnist)")
    ap.add_argument("--save", help="write the trained model: PATH.h5 (a checkpoint) or PATH.keras")
    a = ap.parse_args()
    (x, y), (xt, yt) = load(a.data, a.examples)
    model = mirrored.Model.from_config(MODEL, name="fashion_cnn")
    history = model.fit(x, y, batch_size=a.batch_size, epochs=a.epochs, validation_split=0.1,
                        devices=a.devices)
    loss, accuracy = model.evaluate(xt, yt)
    rank, _ = mirrored.job()
    if rank == 0:
        print(f"test loss {loss:.4f}, test accuracy {accuracy:.4f}, "
              f"val_accuracy by epoch {[round(v, 4) for v in history.history['val_accuracy']]}")
    if a.save:
        model.save(a.save)


if __name__ == "__main__":
    main()
