#!/usr/bin/env python3
"""make_golden.py - TensorFlow golden vectors for the cuDNN emulation's test
(test_cudnn_emu.cc). Run once by hand, never in CI:

    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0
    /tmp/tfvenv/bin/python tests/gpu_emu/make_golden.py

TensorFlow is the outside oracle: tf.nn.conv2d (NHWC input, HWIO filter,
cross-correlation) and its two gradients from tf.GradientTape. Each case is
what the project hands cuDNN (backends/cuda/conv2d_cuda.cu): cuDNN only pads
symmetrically, so a Keras SAME layer whose padding is odd (the extra row or
column at the bottom/right) pads the input itself and has cuDNN convolve it
unpadded; such a case stores that padded input, after checking that TF's
SAME convolution of the unpadded input gives the same y.

Writes golden/<case>_{x,w,dy,y,dx,dw}.npy (float32, little-endian; w and dw
HWIO) and golden/index.txt, one line per case:
    name pad_h pad_w stride_h stride_w dilation_h dilation_w
(pads are cuDNN's symmetric pads; shapes are in the .npy headers).
"""
import os
import sys

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden")

# name, input (N, H, W, C), filter (kh, kw, C, K), strides, dilations, padding:
#   ("sym", ph, pw): cuDNN's symmetric pads
#   ("same_explicit",): Keras SAME with odd total padding; the input is
#     padded here (more at the bottom/right) and convolved VALID
CASES = [
    ("valid_s1", (2, 5, 6, 3), (3, 3, 3, 4), (1, 1), (1, 1), ("sym", 0, 0)),
    ("same_sym_s1", (2, 5, 5, 3), (3, 3, 3, 4), (1, 1), (1, 1), ("sym", 1, 1)),
    ("same_k4_explicit", (2, 6, 6, 3), (4, 4, 3, 4), (1, 1), (1, 1), ("same_explicit",)),
    ("same_s2_even_explicit", (2, 6, 6, 3), (3, 3, 3, 4), (2, 2), (1, 1), ("same_explicit",)),
    ("same_s2_sym", (2, 7, 7, 3), (3, 3, 3, 4), (2, 2), (1, 1), ("sym", 1, 1)),
    ("valid_s2", (2, 7, 7, 3), (3, 3, 3, 4), (2, 2), (1, 1), ("sym", 0, 0)),
    ("valid_s21_k23", (2, 7, 6, 3), (2, 3, 3, 4), (2, 1), (1, 1), ("sym", 0, 0)),
    ("dil2_same_sym", (2, 7, 7, 3), (3, 3, 3, 4), (1, 1), (2, 2), ("sym", 2, 2)),
    ("dil2_valid_pad1", (2, 8, 7, 3), (3, 2, 3, 4), (1, 1), (2, 2), ("sym", 1, 0)),
]


def same_pads(size, k, s, d):
    """TF/Keras SAME: (before, after) for one spatial dimension."""
    eff = (k - 1) * d + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def conv(x, w, strides, dilations, ph, pw):
    return tf.nn.conv2d(x, w, strides=[1, strides[0], strides[1], 1],
                        padding=[[0, 0], [ph, ph], [pw, pw], [0, 0]],
                        dilations=[1, dilations[0], dilations[1], 1])


def dilate(w, d, axis):
    """w with d-1 zero taps between its taps along axis (0 or 1), by TF ops
    so that gradients flow back to w."""
    if d == 1:
        return w
    k = w.shape[axis]
    z = tf.zeros_like(w)
    parts = tf.stack([w] + [z] * (d - 1), axis=axis + 1)  # (.., k, d, ..)
    shape = list(w.shape)
    shape[axis] = k * d
    full = tf.reshape(parts, shape)
    return full[: (k - 1) * d + 1] if axis == 0 else full[:, : (k - 1) * d + 1]


def conv_for_grad(x, w, strides, dilations, ph, pw):
    """The same convolution, differentiable on TF's CPU: its backprop kernels
    refuse dilation > 1, so a dilated case convolves with the zero-inserted
    filter instead (checked against tf.nn.conv2d's own dilated forward)."""
    wd = dilate(dilate(w, dilations[0], 0), dilations[1], 1)
    return conv(x, wd, strides, (1, 1), ph, pw)


def save(name, what, a):
    a = np.ascontiguousarray(a, dtype="<f4")
    np.save(os.path.join(OUT, f"{name}_{what}.npy"), a)
    assert a.nbytes < 10 * 1024, (name, what, a.nbytes)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(20240601)
    lines = []
    for name, xs, ws, strides, dil, pad in CASES:
        x = rng.uniform(-1, 1, size=xs).astype(np.float32)
        w = rng.uniform(-1, 1, size=ws).astype(np.float32)
        if pad[0] == "sym":
            ph, pw = pad[1], pad[2]
        else:
            (pt, pb) = same_pads(xs[1], ws[0], strides[0], dil[0])
            (pl, pr) = same_pads(xs[2], ws[1], strides[1], dil[1])
            assert (pt, pl) != (pb, pr), name + ": padding is symmetric"
            y_same = tf.nn.conv2d(x, w, strides=[1, strides[0], strides[1], 1], padding="SAME",
                                  dilations=[1, dil[0], dil[1], 1]).numpy()
            x = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
            ph = pw = 0
        xt, wt = tf.constant(x), tf.constant(w)
        with tf.GradientTape() as tape:
            tape.watch([xt, wt])
            y = conv_for_grad(xt, wt, strides, dil, ph, pw)
        np.testing.assert_allclose(y.numpy(), conv(xt, wt, strides, dil, ph, pw).numpy(),
                                   rtol=1e-5, atol=1e-5)
        dy = rng.uniform(-1, 1, size=y.shape).astype(np.float32)
        dx, dw = tape.gradient(y, [xt, wt], output_gradients=tf.constant(dy))
        if pad[0] != "sym":
            np.testing.assert_allclose(y.numpy(), y_same, rtol=1e-5, atol=1e-5)
        for what, a in (("x", x), ("w", w), ("dy", dy), ("y", y.numpy()), ("dx", dx.numpy()),
                        ("dw", dw.numpy())):
            save(name, what, a)
        lines.append(f"{name} {ph} {pw} {strides[0]} {strides[1]} {dil[0]} {dil[1]}")
        print(name, "x", x.shape, "w", w.shape, "y", tuple(y.shape))
    with open(os.path.join(OUT, "index.txt"), "w") as f:
        f.write(f"# TensorFlow {tf.__version__} goldens (make_golden.py): "
                "name pad_h pad_w stride_h stride_w dilation_h dilation_w\n")
        f.write("\n".join(lines) + "\n")
    print("tensorflow", tf.__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
