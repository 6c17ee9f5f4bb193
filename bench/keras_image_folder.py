#!/usr/bin/env python3
"""mirrored's image folders against Keras's image_dataset_from_directory.

Run by hand (never by CI) with a Python that has Keras 3 and TensorFlow:

    ~/venv-tf/bin/python bench/keras_image_folder.py [--build build] [--out bench/out/image_folder]

Writes a folder of class folders from the first 60 Fashion-MNIST test
images (28x28): PNG and JPEG (quality 90) in turn, grey, RGB (the grey
tinted per image) and RGBA PNGs, some files with upper-case extensions, a
nested subfolder, a text file that both must skip. Then, for each
[input] shape below, reads it with
keras.utils.image_dataset_from_directory(shuffle=False, image_size,
color_mode) and with mirrored_train --write-data (scale 1: the values as
loaded), and reports the file count, whether the labels are equal, and the
largest |difference| of the pixels, for the PNG and the JPEG files apart
(JPEG decoders may differ in their last bit between libjpeg builds). Then
the same for the PNG seeds of tests/fuzz/corpus/image/ (grey 1, 8 and 16
bits, grey+alpha, palette with tRNS, RGB, RGBA) at their own size (3x2) in
each color_mode. Exits 1 unless the counts and labels agree and the PNG
pixels are within 1e-3.

--record does the same with the first 8 images and writes golden files
under tests/golden/keras/image_folder/ for tests/test_keras_golden.c (no
TensorFlow; bench/keras_golden.py records every check): the folders
(folder/, folder_png/, png_types/), a .cfg per case, and what
image_dataset_from_directory decoded (expected.h5, compressed), compared
with mirrored_train --write-data: the labels exactly, the PNG pixels
within 1e-3, the JPEG ones within the largest difference seen when
recorded plus one level (decoders differ in their last bits).

    ~/venv-tf/bin/python bench/keras_image_folder.py --record [--build build]
"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from keras_golden import Golden, run_ours  # noqa: E402
DATA = "/usr/share/datasets/fashion-mnist"
N = 60
# (height, width, color_mode, channels, PNG files only): down, up, same size
CASES = [
    (20, 24, "grayscale", 1, False),
    (40, 36, "rgb", 3, False),
    (28, 28, "rgb", 3, False),
    (17, 31, "rgba", 4, True),
]


def fashion(n):
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784].reshape(n, 28, 28)
    with gzip.open(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    return x, y


def write_folder(tf, root, png_only, n=N):
    """Returns {relative path: is_png} of the images written."""
    x, y = fashion(n)
    shutil.rmtree(root, ignore_errors=True)
    kinds = {}
    for i in range(n):
        cls = os.path.join(root, "class_%d" % y[i])
        if i % 7 == 3:
            cls = os.path.join(cls, "nested")
        os.makedirs(cls, exist_ok=True)
        g = x[i][:, :, None]
        mode = i % 3  # grey, RGB, RGBA
        tint = np.array([1.0, 0.6 + 0.01 * (i % 40), 0.3], np.float32)
        rgb = np.clip(g.astype(np.float32) * tint + 5 * (i % 5), 0, 255).astype(np.uint8)
        if mode == 0:
            img = g
        elif mode == 1:
            img = rgb
        else:
            a = np.full_like(g, 128 + i)
            img = np.concatenate([rgb, a], axis=2)
        jpeg = not png_only and i % 2 == 1
        if jpeg and img.shape[2] == 4:
            img = img[:, :, :3]
        ext = (".jpg" if i % 4 == 1 else ".JPEG") if jpeg else (".png" if i % 5 else ".PNG")
        name = os.path.join(cls, "img%03d%s" % (i, ext))
        data = tf.io.encode_jpeg(img, quality=90) if jpeg else tf.io.encode_png(img)
        with open(name, "wb") as f:
            f.write(data.numpy())
        kinds[os.path.relpath(name, root)] = not jpeg
    with open(os.path.join(root, "class_%d" % y[0], "notes.txt"), "w") as f:
        f.write("not an image\n")
    return kinds


def ours(build, out, root, h, w, c, classes=10):
    cfg = os.path.join(out, "folder.cfg")
    with open(cfg, "w") as f:
        f.write(
            "[net]\nbatch = 8\nepochs = 1\n[data]\ntrain_images = %s\nscale = 1\n"
            "[input]\nshape = %d,%d,%d\n[flatten]\n[dense]\nunits = %d\nactivation = softmax\n"
            % (root, h, w, c, classes)
        )
    h5 = os.path.join(out, "ours.h5")
    if os.path.exists(h5):
        os.remove(h5)
    exe = os.path.join(build, "launch", "mirrored_train")
    r = subprocess.run([exe, "--devices", "cpu", "--write-data", h5, cfg], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit("mirrored_train failed: %s%s" % (r.stdout, r.stderr))
    note = [line for line in r.stderr.splitlines() if "found" in line]
    import h5py

    with h5py.File(h5, "r") as f:
        return f["train_images"][()], f["train_labels"][()], note


RECORD_N = 8


def keras_decode(keras, root, h, w, mode):
    """image_dataset_from_directory's (file paths relative to root, images, labels)."""
    ds = keras.utils.image_dataset_from_directory(
        root, shuffle=False, image_size=(h, w), color_mode=mode, batch_size=None, verbose=False)
    paths = [os.path.relpath(p, root) for p in ds.file_paths]
    return paths, np.stack([im.numpy() for im, _ in ds]), np.array([int(lab.numpy())
                                                                   for _, lab in ds])


def record_case(a, keras, golden, tmp, name, folder, h, w, c, mode, kinds):
    """One [input] shape of one folder: its .cfg, our run, Keras's decode; returns the case's
    largest PNG and JPEG differences now."""
    classes = len([d for d in os.listdir(golden.path(folder))
                   if os.path.isdir(golden.path(folder, d))])
    with open(golden.path(name + ".cfg"), "w") as f:
        f.write("[net]\nbatch = 4\nepochs = 1\n[data]\ntrain_images = %s\nscale = 1\n"
                "[input]\nshape = %d,%d,%d\n[flatten]\n[dense]\nunits = %d\n"
                "activation = softmax\n" % (folder, h, w, c, classes))
    run = ["mirrored_train", "--devices", "cpu", "--quiet", "--write-data",
           f"{{out}}/{name}.h5", f"{{golden}}/{name}.cfg"]
    run_ours(a.build, run, golden.dir, tmp)
    paths, kx, ky = keras_decode(keras, golden.path(folder), h, w, mode)
    import h5py
    with h5py.File(os.path.join(tmp, name + ".h5"), "r") as f:
        ox, oy = f["train_images"][()], f["train_labels"][()]
    is_png = np.array([kinds.get(p, True) for p in paths])
    d = np.abs(kx.astype(np.float64) - ox.reshape(kx.shape)).reshape(len(kx), -1).max(1)
    png_rows = [int(i) for i in np.flatnonzero(is_png)]
    jpeg_rows = [int(i) for i in np.flatnonzero(~is_png)]
    ours = f"{{out}}/{name}.h5:/train_"
    compare = [{"name": "labels", "array": ours + "labels",
                "keras": golden.array(name + "/labels", ky), "abs": 0},
               {"name": f"PNG pixels ({len(png_rows)} files)", "array": ours + "images",
                "keras": golden.array(name + "/images", kx, compress=True), "abs": 1e-3,
                "rows": png_rows}]
    if jpeg_rows:
        compare.append({"name": f"JPEG pixels ({len(jpeg_rows)} files)", "array": ours + "images",
                        "keras": name + "/images", "abs": float(d[~is_png].max()) + 1,
                        "rows": jpeg_rows})
    golden.case(name, [run], compare)
    same = np.array_equal(ky, oy)
    print(f"{name:26} {len(kx)} files, labels {'equal' if same else 'DIFFER'}; max |diff| PNG "
          f"{d[is_png].max():.3g}" + (f", JPEG {d[~is_png].max():.3g}" if jpeg_rows else ""))
    return (d[is_png].max() if same else np.inf), (d[~is_png].max() if jpeg_rows else 0)


def record(a):
    """The check on RECORD_N images, written as golden files; returns the exit status."""
    import tempfile
    import keras
    import tensorflow as tf

    golden = Golden("image_folder")
    worst = 0.0
    kinds = {False: write_folder(tf, golden.path("folder"), False, RECORD_N),
             True: write_folder(tf, golden.path("folder_png"), True, RECORD_N)}
    seeds = os.path.join(ROOT, "tests", "fuzz", "corpus", "image")
    os.makedirs(golden.path("png_types", "all"))
    for f in sorted(os.listdir(seeds)):
        if f.endswith(".png"):
            shutil.copy(os.path.join(seeds, f), golden.path("png_types", "all", f))
    with tempfile.TemporaryDirectory() as tmp:
        for h, w, mode, c, png_only in CASES:
            folder = "folder_png" if png_only else "folder"
            png, _ = record_case(a, keras, golden, tmp, f"{folder}_{h}x{w}_{mode}", folder, h, w,
                                 c, mode, kinds[png_only])
            worst = max(worst, png)
        for mode, c in [("grayscale", 1), ("rgb", 3), ("rgba", 4)]:
            png, _ = record_case(a, keras, golden, tmp, f"png_types_{mode}", "png_types", 2, 3, c,
                                 mode, {})
            worst = max(worst, png)
    golden.write()
    print("PASS" if worst <= 1e-3 else "FAIL")
    return 0 if worst <= 1e-3 else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "image_folder"))
    ap.add_argument("--record", action="store_true",
                    help="8 images, written as golden files (tests/golden/keras/image_folder/)")
    a = ap.parse_args()
    if a.record:
        return record(a)
    import keras
    import tensorflow as tf

    os.makedirs(a.out, exist_ok=True)
    ok = True
    print("keras %s, tensorflow %s, %d Fashion-MNIST images" % (keras.__version__,
                                                                  tf.__version__, N))
    for h, w, mode, c, png_only in CASES:
        root = os.path.join(a.out, "folder_png" if png_only else "folder")
        kinds = write_folder(tf, root, png_only)
        ds = keras.utils.image_dataset_from_directory(
            root, shuffle=False, image_size=(h, w), color_mode=mode, batch_size=None,
            verbose=False)
        paths = [os.path.relpath(p, root) for p in ds.file_paths]
        kx = np.stack([im.numpy() for im, _ in ds])
        ky = np.array([int(lab.numpy()) for _, lab in ds])
        ox, oy, note = ours(a.build, a.out, root, h, w, c)
        same_n = len(kx) == len(ox)
        same_y = same_n and np.array_equal(ky, oy)
        is_png = np.array([kinds[p] for p in paths])
        line = "%dx%d %-9s n %d/%d labels %s" % (h, w, mode, len(kx), len(ox),
                                                 "equal" if same_y else "DIFFER")
        if same_n:
            d = np.abs(kx.astype(np.float64) - ox.reshape(kx.shape)).reshape(len(kx), -1).max(1)
            dp = d[is_png].max()
            line += "; max |diff| PNG %.3g (%d files)" % (dp, is_png.sum())
            if (~is_png).any():
                dj = d[~is_png]
                line += ", JPEG %.3g (%d files, %d exact)" % (dj.max(), len(dj), (dj == 0).sum())
            ok = ok and dp <= 1e-3
        print(line)
        ok = ok and same_y
    # every PNG colour type, not resized (uint8 on our side)
    root = os.path.join(a.out, "png_types")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "all"))
    seeds = os.path.join(ROOT, "tests", "fuzz", "corpus", "image")
    for f in sorted(os.listdir(seeds)):
        if f.endswith(".png"):
            shutil.copy(os.path.join(seeds, f), os.path.join(root, "all", f))
    for mode, c in [("grayscale", 1), ("rgb", 3), ("rgba", 4)]:
        ds = keras.utils.image_dataset_from_directory(
            root, shuffle=False, image_size=(2, 3), color_mode=mode, batch_size=None,
            verbose=False)
        kx = np.stack([im.numpy() for im, _ in ds])
        ox, _, _ = ours(a.build, a.out, root, 2, 3, c, classes=1)
        d = np.abs(kx.astype(np.float64) - ox.reshape(kx.shape)).max()
        print("PNG colour types (%s) %-9s max |diff| %.3g" % (
            ", ".join(os.path.basename(p)[:-4] for p in ds.file_paths), mode, d))
        ok = ok and d <= 1e-3
    if note:
        print("mirrored_train's note: " + note[0])
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
