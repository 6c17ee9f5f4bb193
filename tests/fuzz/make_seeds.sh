#!/usr/bin/env bash
# Makes the generated seeds of tests/fuzz/corpus/ (the committed ones were
# made by it; run again only to regenerate them): small IDX, NPY and HDF5
# arrays of every dtype the readers accept, small PNGs of every colour type
# (written here: signature, IHDR, PLTE/tRNS, zlib'd IDAT) and JPEGs (grey,
# RGB, progressive; through TensorFlow, when $TF_PYTHON names a Python that
# has it), a checkpoint and a --metrics CSV
# from a one-epoch run of the model fuzz_checkpoint.c reads into, that
# checkpoint without /mirrored (as Keras writes weights), and the shipped
# .cfg files. Needs a release build in build/ (mirrored_train) and
# python3-h5py. Usage: tests/fuzz/make_seeds.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p $out/{config,idx,npy,npz,image,h5,checkpoint,metrics_csv,keras_archive}
cp models/configs/*.cfg $out/config/
cp tests/golden/keras_models/{cnn,residual}.keras $out/keras_archive/
/usr/bin/python3 - "$out" <<'PY'
import sys
import numpy as np
out = sys.argv[1] + '/npz'
r = np.random.default_rng(1)
x = r.integers(0, 255, (4, 3, 3, 1), dtype=np.uint8)
y = np.arange(4, dtype=np.uint8) % 3
np.savez(f'{out}/stored.npz', x_train=x, y_train=y, x_test=x[:2], y_test=y[:2])
np.savez_compressed(f'{out}/deflated.npz', x_train=x.astype('<f4'), y_train=y.astype('<i8'))
np.savez(f'{out}/other_names.npz', images=x, labels=y)
PY
/usr/bin/python3 - "$out" "$tmp" <<'PY'
import gzip, struct, sys
import numpy as np, h5py
out, tmp = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(1)
def idx(name, code, a, big):
    body = struct.pack('>BBBB', 0, 0, code, a.ndim) + struct.pack('>%dI' % a.ndim, *a.shape)
    body += a.astype(big).tobytes()
    open(f'{out}/idx/{name}', 'wb').write(body)
    return body
u8 = rng.integers(0, 256, (4, 3, 3)).astype(np.uint8)
b = idx('images_u8.idx', 0x08, u8, 'u1')
open(f'{out}/idx/images_u8.idx.gz', 'wb').write(gzip.compress(b, mtime=0))
idx('labels_u8.idx', 0x08, np.array([0, 1, 2, 1], np.uint8), 'u1')
idx('i32.idx', 0x0C, rng.integers(-9, 9, (3, 2)), '>i4')
idx('f32.idx', 0x0D, rng.standard_normal((2, 2, 2)), '>f4')
for name, a in [('u1', u8), ('i4', np.array([0, 2, 1, 1], '<i4')),
                ('i8', rng.integers(0, 9, (2, 3)).astype('<i8')),
                ('f4', rng.standard_normal((2, 2)).astype('<f4'))]:
    np.save(f'{out}/npy/{name}.npy', a)
# NPY 2.0 (4-byte header length)
hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
hdr += b' ' * ((64 - (12 + len(hdr) + 1) % 64) % 64) + b'\n'
open(f'{out}/npy/v2.npy', 'wb').write(b'\x93NUMPY\x02\x00' + struct.pack('<I', len(hdr)) + hdr
                                     + np.arange(3, dtype='<f4').tobytes())
for name, a, kw in [('u8', u8, {}), ('i32', np.arange(6, dtype='<i4').reshape(3, 2), {}),
                    ('i16', np.arange(4, dtype='<i2'), {}), ('f64', rng.standard_normal(3), {}),
                    ('f32_gzip', rng.standard_normal((4, 2)).astype('<f4'),
                     {'chunks': (2, 2), 'compression': 'gzip'})]:
    with h5py.File(f'{out}/h5/{name}.h5', 'w', libver='latest') as f:
        f.create_dataset('x', data=a, **kw)
# PNGs: 3x2, 8-bit grey, grey+alpha, RGB, RGBA, palette with tRNS, 16-bit
# grey, 1-bit grey; each row filtered with filter type 0
import zlib
def png(name, w, h, depth, ctype, rows, extra=b''):
    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
    ihdr = struct.pack('>IIBBBBB', w, h, depth, ctype, 0, 0, 0)
    raw = b''.join(b'\x00' + r for r in rows)
    body = (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', ihdr) + extra
            + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
    open(f'{out}/image/{name}', 'wb').write(body)
    return chunk
def px(n):
    return bytes(rng.integers(0, 256, n).astype(np.uint8))
png('grey.png', 3, 2, 8, 0, [px(3), px(3)])
png('grey_alpha.png', 3, 2, 8, 4, [px(6), px(6)])
png('rgb.png', 3, 2, 8, 2, [px(9), px(9)])
chunk = png('rgba.png', 3, 2, 8, 6, [px(12), px(12)])
png('palette_trns.png', 3, 2, 8, 3, [bytes([0, 1, 2]), bytes([2, 1, 0])],
    chunk(b'PLTE', px(9)) + chunk(b'tRNS', bytes([0, 128])))
png('grey16.png', 3, 2, 16, 0, [px(6), px(6)])
png('grey1.png', 3, 2, 1, 0, [bytes([0xa0]), bytes([0x40])])
# training data of the checkpoint seeds: (16, 4, 4, 1) float32, labels 0..2
np.save(f'{tmp}/x.npy', rng.standard_normal((16, 4, 4, 1)).astype('<f4'))
np.save(f'{tmp}/y.npy', (np.arange(16) % 3).astype('u1'))
PY
if [ -n "${TF_PYTHON:-}" ]; then
    "$TF_PYTHON" - "$out" <<'PY'
import sys
import numpy as np, tensorflow as tf
out = sys.argv[1]
rng = np.random.default_rng(2)
for name, c, kw in [('grey.jpg', 1, {}), ('rgb.jpg', 3, {}),
                    ('progressive.jpg', 3, {'progressive': True})]:
    img = rng.integers(0, 256, (9, 11, c)).astype(np.uint8)
    open(f'{out}/image/{name}', 'wb').write(tf.io.encode_jpeg(img, quality=90, **kw).numpy())
PY
fi
# fuzz_checkpoint.c's MODEL, with its data
cat > "$tmp/model.cfg" <<'CFG'
[net]
batch=4
epochs=1
optimizer=adam
learning_rate=0.01
[data]
train_images=x.npy
train_labels=y.npy
standardize=true
[input]
shape=4,4,1
[conv2d]
filters=2
size=3
stride=1
padding=same
[batchnorm]
[activation]
activation=relu
[flatten]
[dense]
units=3
activation=softmax
CFG
cp "$tmp/model.cfg" $out/config/checkpoint_model.cfg
build/launch/mirrored_train "$tmp/model.cfg" --devices cpu --quiet \
    --save $out/checkpoint/model.h5 --metrics $out/metrics_csv/run.csv
/usr/bin/python3 - "$out" <<'PY'
import sys, h5py
out = sys.argv[1]
# the weights alone, as Keras writes them (--init-weights, mirrored_eval --cfg)
with h5py.File(f'{out}/checkpoint/model.h5', 'r') as src, \
        h5py.File(f'{out}/checkpoint/weights_only.h5', 'w', libver='latest') as dst:
    for k, v in src.attrs.items():
        dst.attrs[k] = v
    src.copy('model_weights', dst)
PY
# a Keras CSVLogger file: its columns, in its order
printf 'epoch,accuracy,loss,val_accuracy,val_loss\r\n0,0.5,1.25,0.4,1.5\r\n1,"0.75",0.5,0.5,1e0\r\n' \
    > $out/metrics_csv/keras.csv
ls -l $out/*
