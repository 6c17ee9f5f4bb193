#!/usr/bin/env python3
"""train_gpu_emu.py: mirrored_train on emulated GPUs, as a user runs it.

Run by meson (suites 'slow' and 'gpu') in a build with -Dgpu_emulation=true:
the CUDA backend's own code (its .cu kernels built as C++, the host code,
NCCL) on 2 emulated GPUs (tests/gpu_emu), against the CPU.

1. fashion_cnn.cfg, one epoch on Fashion-MNIST: --devices gpu reaches the
   test accuracy of --devices cpu:2 within 0.005 (the two differ only in
   float rounding: summation order in cuDNN's and OpenBLAS's convolutions,
   NCCL's and the local all-reduce's; 938 steps of it move the accuracy by
   well under 0.005, while a wrong kernel or a missing wait costs far more),
   and the JSON names the emulated GPUs.
2. The checkpoint trained on the GPUs, evaluated by mirrored_eval on the
   CPU: the test loss and accuracy the GPU run printed.
3. fashion_mlp.cfg on the GPUs under the adversarial schedules of the
   emulator (every stream operation delayed at random, three seeds; copy
   streams held as late as their dependencies allow): the same bits
   (params_hash) as in FIFO order. A missing event or wait between streams
   changes what a kernel reads under these schedules.
4. --synthetic on the GPUs (fashion_cnn.cfg, 1024 random examples): the
   GPUs make every batch themselves (the --trace file has only "synthetic
   batch" data events, one per replica and update), and a delayed schedule
   gives FIFO's bits: the ids' upload and the kernel that reads them are
   ordered.
5. The same runs' --trace files have device-time lanes (CUDA timing
   events): per replica, the host lane's steps, each inside the host's,
   with a forward and a backward span per layer and the update
   (tests/trace_check.py --device).

Prints one line per check and 'N passed, N failed' at the end; exits 1 on a
failure. Usage: train_gpu_emu.py BUILD_DIR SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

BUILD, SRC = sys.argv[1], sys.argv[2]
TRAIN = os.path.join(BUILD, 'launch', 'mirrored_train')
EVAL = os.path.join(BUILD, 'launch', 'mirrored_eval')
CFG = os.path.join(SRC, 'models', 'configs')
results = []


def check(ok, what):
    results.append(bool(ok))
    print(('ok   ' if ok else 'FAIL ') + what, flush=True)


def train(cfg, devices, out, schedule='fifo', extra=()):
    env = dict(os.environ, MIRRORED_EMULATED_GPUS='2', MIRRORED_EMU_SCHEDULE=schedule,
               OPENBLAS_NUM_THREADS='1')
    js = out + '.json'
    cmd = [TRAIN, os.path.join(CFG, cfg), '--devices', devices, '--epochs', '1', '--quiet',
           '--json', js, *extra]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        print(' '.join(cmd) + '\n' + r.stdout + r.stderr)
        return None
    return json.load(open(js))


def main():
    tmp = tempfile.mkdtemp(prefix='mr_train_gpu_emu.')
    ck = os.path.join(tmp, 'gpu.h5')
    gpu = train('fashion_cnn.cfg', 'gpu', os.path.join(tmp, 'cnn_gpu'), extra=('--save', ck))
    cpu = train('fashion_cnn.cfg', 'cpu:2', os.path.join(tmp, 'cnn_cpu'))
    check(gpu is not None and cpu is not None, 'fashion_cnn.cfg trains on gpu and on cpu:2')
    if gpu and cpu:
        d = abs(gpu['test_accuracy'] - cpu['test_accuracy'])
        check(d <= 0.005, 'fashion_cnn.cfg test accuracy: gpu %.4f, cpu:2 %.4f (|diff| %.4f <= '
              '0.005)' % (gpu['test_accuracy'], cpu['test_accuracy'], d))
        check(gpu['devices'] == ['gpu:0', 'gpu:1'] and gpu['communicator'] == 'nccl',
              'the JSON names the GPUs: %s over %s' % (gpu['devices'], gpu['communicator']))
        env = dict(os.environ, OPENBLAS_NUM_THREADS='1')
        r = subprocess.run([EVAL, ck, '--json', os.path.join(tmp, 'eval.json')], env=env,
                           capture_output=True, text=True, timeout=600)
        ev = json.load(open(os.path.join(tmp, 'eval.json'))) if r.returncode == 0 else None
        check(ev is not None and abs(ev['test_accuracy'] - gpu['test_accuracy']) < 5e-4 and
              abs(ev['test_loss'] - gpu['test_loss']) < 5e-4,
              'the GPU checkpoint evaluated on the CPU: %s' %
              ('accuracy %.4f, loss %.4f' % (ev['test_accuracy'], ev['test_loss']) if ev
               else r.stderr.strip()))
    fifo = train('fashion_mlp.cfg', 'gpu', os.path.join(tmp, 'mlp_fifo'))
    for sched in ('delay:1', 'delay:2', 'delay:3', 'late:1'):
        adv = train('fashion_mlp.cfg', 'gpu', os.path.join(tmp, 'mlp_' + sched.replace(':', '')),
                    schedule=sched)
        check(fifo is not None and adv is not None and adv['params_hash'] == fifo['params_hash'],
              'fashion_mlp.cfg on gpu under MIRRORED_EMU_SCHEDULE=%s: params_hash %s, fifo %s' %
              (sched, adv and adv['params_hash'], fifo and fifo['params_hash']))
    runs = {}
    for sched in ('fifo', 'delay:1', 'late:1'):
        out = os.path.join(tmp, 'syn_' + sched.replace(':', ''))
        runs[sched] = train('fashion_cnn.cfg', 'gpu', out, schedule=sched,
                            extra=('--synthetic', '1024', '--trace', out + '.trace.json'))
    fifo = runs['fifo']
    check(fifo is not None, 'fashion_cnn.cfg --synthetic 1024 trains on gpu')
    if fifo is not None:
        events = json.load(open(os.path.join(tmp, 'syn_fifo.trace.json')))
        events = events['traceEvents'] if isinstance(events, dict) else events
        data = [e['name'] for e in events if e.get('cat') == 'data' and e.get('ph') == 'X']
        made = data.count('synthetic batch')
        # 1024 examples at global batch 64 (32 a replica): 16 updates x 2 replicas
        check(made == 2 * 16 and len(data) == made,
              '--synthetic on gpu: %d "synthetic batch" data events (want 32) of %d' %
              (made, len(data)))
        for sched in ('delay:1', 'late:1'):
            adv = runs[sched]
            check(adv is not None and adv['params_hash'] == fifo['params_hash'],
                  '--synthetic on gpu under MIRRORED_EMU_SCHEDULE=%s: params_hash %s, fifo %s' %
                  (sched, adv and adv['params_hash'], fifo['params_hash']))
        # 5. device time: each replica's device lane has the steps of its
        # host lane, each inside the host's, with a forward and a backward
        # span per layer and the update (CUDA timing events), also when the
        # emulator delays every stream operation at random
        layers = ','.join(['conv2d', 'max_pooling2d', 'flatten', 'dense'])
        for sched in ('fifo', 'delay:1'):
            path = os.path.join(tmp, 'syn_' + sched.replace(':', '') + '.trace.json')
            r = subprocess.run([sys.executable, os.path.join(SRC, 'tests', 'trace_check.py'), path,
                                '--device', '--layers=' + layers], capture_output=True, text=True)
            events = json.load(open(path))['traceEvents'] if runs[sched] else []
            dev = [e for e in events if e.get('ph') == 'X' and e['tid'] >= 1000]
            busy = sum(e['dur'] for e in dev if e['cat'] in ('forward', 'backward'))
            check(r.returncode == 0 and busy > 0,
                  '--trace on gpu under %s: device lanes checked (%s), %d device events, '
                  '%.0f us of layer device time' % (sched, (r.stdout + r.stderr).strip(),
                                                    len(dev), busy))
    passed = sum(results)
    print('%d passed, %d failed' % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == '__main__':
    sys.exit(main())
