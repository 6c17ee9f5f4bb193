"""TensorFlow MirroredStrategy peer for bench/scaling.py (optional; never a
build dependency): the workflow our users come from, on the same model,
per-replica batch and data.

The CPU is split into R logical devices (tf.config's logical device
configuration) and tf.distribute.MirroredStrategy keeps one replica on each,
as a Keras user on a CPU machine would; the model (Keras 3, TensorFlow
backend) is built and compiled in the strategy's scope: Glorot-uniform
kernels, zero biases, Adam 1e-3, sparse categorical cross-entropy, the
layers of models/configs/fashion_mlp.cfg or fashion_cnn.cfg. The training
images (x / 255, NHWC) go into a tf.data pipeline that is cached, shuffled
and repeated, batched by the global batch (R x --batch), so input is not
what is measured. model.fit runs --warmup updates (tracing and the first
steps), then --steps timed updates; samples_per_sec counts global samples
over the timed epoch (a callback's perf_counter at its start and end).

Run it with a Python that has TensorFlow (a venv; see docs/performance.md):

    taskset -c 0,1 ~/venv-tf/bin/python bench/peer_tf.py --model cnn --batch 32 --replicas 2
"""
import argparse
import gzip
import json
import os
import time

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def load_idx(name):
    import numpy as np

    with gzip.open(os.path.join(DATA_DIR, name), "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def build_model(name):
    import keras
    from keras import layers

    if name == "mlp":
        ls = [layers.Flatten(), layers.Dense(128, activation="relu"),
              layers.Dense(64, activation="relu"), layers.Dense(10, activation="softmax")]
    elif name == "cnn":
        ls = [layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(2), layers.Flatten(),
              layers.Dense(10, activation="softmax")]
    else:
        raise ValueError(name)
    return keras.Sequential([keras.Input((28, 28, 1))] + ls)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--batch", type=int, default=32, help="per-replica batch")
    p.add_argument("--replicas", type=int, default=1, help="logical CPU devices, one replica each")
    p.add_argument("--threads", type=int, default=0,
                   help="TensorFlow intra-op threads (0: one per replica)")
    p.add_argument("--steps", type=int, default=200, help="timed updates")
    p.add_argument("--warmup", type=int, default=20, help="untimed updates first")
    args = p.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    threads = args.threads or args.replicas
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(args.replicas)])
    devices = [d.name for d in tf.config.list_logical_devices("CPU")][: args.replicas]
    strategy = tf.distribute.MirroredStrategy(devices)
    assert strategy.num_replicas_in_sync == args.replicas

    x = (load_idx("train-images-idx3-ubyte.gz").astype("float32") / 255.0)[..., None]
    y = load_idx("train-labels-idx1-ubyte.gz").astype("int32")
    gb = args.batch * args.replicas
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).cache().shuffle(60000, seed=1).repeat()
          .batch(gb, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
    with strategy.scope():
        import keras

        keras.utils.set_random_seed(1)
        model = build_model(args.model)
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss="sparse_categorical_crossentropy")

    times = {}

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            times[epoch] = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times[epoch] = time.perf_counter() - times[epoch]

    # epoch 0: the warm-up (its length set by the first fit), epoch 1 timed
    model.fit(ds, epochs=1, steps_per_epoch=args.warmup, verbose=0, shuffle=False)
    model.fit(ds, epochs=1, steps_per_epoch=args.steps, verbose=0, shuffle=False,
              callbacks=[Clock()])
    sec = times[0]
    print(json.dumps({"peer": "tensorflow", "tf": tf.__version__, "keras": keras.__version__,
                      "model": args.model, "replicas": args.replicas, "batch": args.batch,
                      "threads": threads, "steps": args.steps, "seconds": sec,
                      "samples_per_sec": gb * args.steps / sec}))


if __name__ == "__main__":
    main()
