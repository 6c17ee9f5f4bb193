"""The C fit on a worker thread. Its step and epoch callbacks run on a C
thread and only queue the logs; the main thread reads the queue, prints the
progress and fills the History.

Ctrl-C (SIGINT, a Jupyter interrupt) during a fit: for the whole fit call,
the model's lock included, a SIGINT handler of this module (SigintGuard,
installed where the fit is called from the main thread over Python's
default one) only asks the C fit to stop; the main thread goes on reading
the queue until the C fit has returned (its stop's checkpoint written), and
only then raises KeyboardInterrupt. A Ctrl-C while no C fit runs (before it
starts, after it ended) is raised once the model is free again. So a burst
of Ctrl-C cannot make fit() return while the C fit still runs, nor leave
the model held. Any other
exception in the main thread (a callback's, a KeyboardInterrupt raised by a
handler of the caller's) stops the fit the same way before it propagates.
A stop whose checkpoint could not be written raises that error (the
library's: RunError, as for a write failing during training) from the
KeyboardInterrupt, after a line with the updates made.

Keras's callbacks (_callbacks.CallbackList) are called on the main thread:
Model.fit calls on_train_begin and on_train_end outside the fit (the model
free: a callback may save or evaluate it there). Epoch 0's on_epoch_begin
comes before the C fit starts, a later epoch's when its first step's logs
arrive; batch hooks only where a callback has them: each step's logs then
wait in the queue for the main thread, at most _MAX_PENDING_STEPS of them
(the C thread waits for room only when the hooks are slower than the
steps); a model.stop_training set by a batch hook ends the fit after the
epoch. During on_epoch_end the C thread waits in its epoch callback, and
Model.save and get_weights run there (on_fit_thread).
A fit ended by max_steps inside an epoch ends its progress line, says so
and keeps that epoch's running means in the History."""
import ctypes
import queue
import signal
import sys
import threading

from . import _lib
from .errors import Error
from .history import epoch_logs

# Test hook: called in the main thread with each event (kind, payload)
# before it is handled; an exception it raises is handled as a Ctrl-C is.
_on_event = None
# Test hook: called on the C thread with the _Run after each update's logs
# are queued (a test holds the fit there until it has asked for a stop).
_on_c_step = None

# steps whose logs may wait for batch hooks before the C thread waits: a
# hook slower than a step slows the fit only once this many are queued
_MAX_PENDING_STEPS = 256


class SigintGuard:
    """SIGINT held for one fit call (a context manager; nothing off the
    main thread or where a handler of the caller's is in place)."""

    def __init__(self):
        self.run = None  # the _Run whose C fit is running
        self.pending = False  # a Ctrl-C while none was
        self.old = None

    def __enter__(self):
        self.old = _own_sigint(self._on_sigint)
        return self

    def _on_sigint(self, _signum, _frame):
        # a Python handler (main thread, between bytecodes): no lock taken,
        # nothing raised
        run = self.run
        if run is not None:
            run.on_sigint()
        else:
            self.pending = True

    def __exit__(self, kind, *_):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        if self.pending and kind is None:
            raise KeyboardInterrupt
        return False


class _Run:
    def __init__(self, model, handle, metric, callbacks):
        self.model = model
        self.handle = handle
        self.interrupted = False  # SIGINT came while the fit ran
        self.metric = metric
        self.callbacks = callbacks
        self.events = queue.Queue()
        # main -> C thread: stop after this epoch? (a bool), or ("call",
        # fn) from an epoch callback, answered in `saved` (on_fit_thread)
        self.replies = queue.Queue()
        self.saved = queue.Queue()
        self.caller = threading.current_thread()  # the thread calling the callbacks
        self.stopping = False
        self.batch_stop = False  # a batch hook set model.stop_training
        self.begun = -1  # the last epoch whose on_epoch_begin was called
        self.last_step = None  # the last step's logs
        self.ended = -1  # the last epoch whose end was handled
        self.last_logs = None  # the last epoch's logs (on_train_end's)
        # room for step logs where batch hooks take them (None: no hooks,
        # the C thread never waits for a step)
        self.slots = (threading.Semaphore(_MAX_PENDING_STEPS)
                      if callbacks and callbacks.batch_hooks else None)
        self.step_fn = _lib.STEP_FN(self._on_step)
        self.epoch_fn = _lib.EPOCH_FN(self._on_epoch)
        self.result = _lib.FitResult()
        self.err = _lib.CError()
        self.status = _lib.ERR_RUNTIME

    # ---- on the C thread: queue only
    def _on_step(self, _user, p):
        s = p.contents
        if self.slots is not None:
            while not self.slots.acquire(timeout=0.1):
                if self.stopping:  # the main thread no longer takes steps
                    break
        self.events.put(("step", {"epoch": s.epoch, "step": s.step, "steps": s.steps,
                                  "loss": s.loss, "metric": s.metric}))
        if _on_c_step is not None:
            _on_c_step(self)

    def _on_epoch(self, _user, p):
        e = p.contents
        self.events.put(("epoch", (e.epoch, e.epochs, epoch_logs(e, self.metric), e.seconds,
                                  e.lr)))
        if not self.callbacks or self.stopping:
            return 0
        while True:
            reply = self.replies.get()
            if not isinstance(reply, tuple):
                return 1 if reply else 0
            # the library's calls from its epoch callback, on this thread
            try:
                self.saved.put((reply[1](), None))
            except BaseException as e:  # raised in the caller's thread
                self.saved.put((None, e))

    def _work(self, opts):
        try:
            self.status = _lib.lib.mirrored_model_fit(self.handle, ctypes.byref(opts),
                                                      ctypes.byref(self.result),
                                                      ctypes.byref(self.err))
        finally:
            self.events.put(("done", None))

    # ---- on the main thread
    def on_sigint(self):
        """SigintGuard's: _drain sees the flag."""
        self.interrupted = True
        _lib.lib.mirrored_model_request_stop(self.handle)

    def _stop(self):
        """Asks the C fit to stop after the update in flight."""
        _lib.lib.mirrored_model_request_stop(self.handle)
        if not self.stopping:
            self.stopping = True
            self.replies.put(True)  # an epoch callback waiting for its answer

    def _drain(self, progress, history):
        told = False
        while True:
            if self.interrupted and not told:
                told = True
                self._stop()
                progress.interrupted()
                print("mirrored: stopping: the update in flight finishes and its checkpoint "
                      "is written", file=sys.stderr, flush=True)
            try:
                kind, payload = self.events.get(timeout=0.2)
            except queue.Empty:
                continue
            if _on_event is not None:
                _on_event(kind, payload)
            if kind == "done":
                return
            if kind == "step":
                self._step(payload, progress)
                continue
            epoch, progress.epochs, logs, seconds, self.model.optimizer._lr = payload
            self._epoch_begin(epoch)
            self.ended, self.last_logs = epoch, logs
            history.on_epoch_end(epoch, logs)
            progress.epoch_end(epoch, logs, seconds)
            if self.callbacks and not self.stopping:
                self.replies.put(self._callbacks_epoch_end(epoch, logs))

    def _epoch_begin(self, epoch):
        if self.callbacks and epoch > self.begun:
            self.begun = epoch
            self.callbacks.call("on_epoch_begin", epoch, {})

    def _step(self, logs, progress):
        self.last_step = logs
        progress.step(logs)
        if self.slots is None:
            return
        self._epoch_begin(logs["epoch"])
        try:
            if not self.stopping:
                self.callbacks.train_batch(logs["step"] - 1, {"loss": logs["loss"],
                                                              self.metric: logs["metric"]})
                self.batch_stop = self.batch_stop or bool(self.model.stop_training)
        finally:
            self.slots.release()

    def _callbacks_epoch_end(self, epoch, logs):
        self.model.stop_training = self.batch_stop
        self.model._epoch_run = self  # the C thread waits: Model.save goes through it
        try:
            self.callbacks.call("on_epoch_end", epoch, logs)
        finally:
            self.model._epoch_run = None
        return bool(self.model.stop_training)

    def on_fit_thread(self, fn):
        """fn() on the C thread, waiting in its epoch callback (Model.save
        and get_weights from on_epoch_end: the library takes them there, the
        weights of the epoch just ended); its result, or its exception
        raised here."""
        self.replies.put(("call", fn))
        result, error = self.saved.get()
        if error is not None:
            raise error
        return result

    def _partial_epoch(self, opts, progress, history):
        """A fit ended by max_steps inside an epoch: the line ended, a
        message, the epoch's running means in the History (partial_epoch
        in its params). Returns the logs, or None where the fit ended at an
        epoch's end."""
        s = self.last_step
        if s is None or s["epoch"] <= self.ended or not opts.max_steps:
            return None
        logs = {"loss": s["loss"], self.metric: s["metric"]}
        history.on_epoch_end(s["epoch"], logs)
        history.params["partial_epoch"] = s["epoch"]
        progress.interrupted()
        if _lib.job()[0] == 0:
            print(f"mirrored: fit ended at max_steps={opts.max_steps}: epoch {s['epoch'] + 1} "
                  f"stopped after {s['step']}/{s['steps']} updates; the History has its running "
                  f"means", file=sys.stderr, flush=True)
        return logs

    def _join(self, thread):
        # with our SIGINT handler in place nothing interrupts this; without
        # it (a fit on another thread, a handler of the caller's), a
        # KeyboardInterrupt here only asks for the stop again
        while thread.is_alive():
            try:
                thread.join(0.2)
            except KeyboardInterrupt:
                _lib.lib.mirrored_model_request_stop(self.handle)

    def _raise_failure(self, cause):
        """The C fit's failure (cause: what stopped it, or None), else cause.
        A Ctrl-C's stop that failed (its checkpoint unwritable) raises the
        library's error from the KeyboardInterrupt; another exception (a
        callback's) is raised as it is, the failure in _report_stop's line."""
        if self.status == _lib.OK or (cause is not None
                                      and not isinstance(cause, KeyboardInterrupt)):
            if cause is not None:
                raise cause
            return
        if cause is None:
            _lib.raise_error(self.status, self.err)
        try:
            _lib.raise_error(self.status, self.err)
        except Error as e:
            raise e from cause

    def run(self, opts, progress, history, guard):
        opts.on_step = self.step_fn
        opts.on_epoch = self.epoch_fn
        thread = threading.Thread(target=self._work, args=(opts,), name="mirrored-fit",
                                  daemon=True)
        if guard.pending:  # a Ctrl-C before the fit: it stops at its first update
            self.interrupted, guard.pending = True, False
        self._epoch_begin(0)
        guard.run = self
        try:
            thread.start()
            try:
                self._drain(progress, history)
            except BaseException as e:
                if not self.interrupted:
                    progress.interrupted()
                self._stop()
                self._join(thread)
                _report_stop(self.result, opts.stop_checkpoint, self.status, self.err)
                self._raise_failure(e)
            self._join(thread)
        finally:
            guard.run = None
        if self.interrupted:
            _report_stop(self.result, opts.stop_checkpoint, self.status, self.err)
            self._raise_failure(KeyboardInterrupt())
        self._raise_failure(None)
        partial = self._partial_epoch(opts, progress, history)
        return self.result, partial or self.last_logs or {}


def _own_sigint(handler):
    """Installs handler for SIGINT where Python's default one is in place
    and this is the main thread; returns the one to restore (None: none
    installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    return signal.signal(signal.SIGINT, handler)


def _report_stop(result, checkpoint, status, err):
    if _lib.job()[0] != 0:
        return
    if status != _lib.OK:
        where = "failed: " + err.message.decode("utf-8", "replace")
    elif result.stopped and checkpoint:
        where = f"its checkpoint is {checkpoint.decode()}"
    elif result.stopped:
        where = "no checkpoint written (stop_checkpoint=None)"
    else:
        where = "the fit had ended"
    print(f"mirrored: fit stopped after {result.updates} updates "
          f"({result.epochs} epochs done); {where}", file=sys.stderr, flush=True)


def run(model, handle, guard, opts, progress, history, metric, callbacks):
    """Runs mirrored_model_fit(opts) on handle (model's) under guard (a
    SigintGuard entered); returns its FitResult and the logs of its last
    epoch (on_train_end's)."""
    return _Run(model, handle, metric, callbacks).run(opts, progress, history, guard)
