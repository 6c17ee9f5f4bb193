"""The C fit on a worker thread. Its step and epoch callbacks run on a C
thread and only queue the logs; the main thread reads the queue, prints the
progress and fills the History, so a KeyboardInterrupt (Ctrl-C, a Jupyter
interrupt) lands there: it asks the fit to stop (its checkpoint is written),
waits for it and is raised again."""
import ctypes
import queue
import sys
import threading

from . import _lib
from .history import epoch_logs

# Test hook: called in the main thread with each event (kind, payload)
# before it is handled; an exception it raises is handled as a Ctrl-C is.
_on_event = None
# Test hook: called on the C thread with the _Run after each update's logs
# are queued (a test holds the fit there until it has asked for a stop).
_on_c_step = None


class _Run:
    def __init__(self, model, metric, callbacks):
        self.model = model
        self.metric = metric
        self.callbacks = callbacks
        self.events = queue.Queue()
        self.replies = queue.Queue()  # main -> C thread: stop after this epoch?
        self.stopping = False
        self.step_fn = _lib.STEP_FN(self._on_step)
        self.epoch_fn = _lib.EPOCH_FN(self._on_epoch)
        self.result = _lib.FitResult()
        self.err = _lib.CError()
        self.status = _lib.ERR_RUNTIME

    # ---- on the C thread: queue only
    def _on_step(self, _user, p):
        s = p.contents
        self.events.put(("step", {"epoch": s.epoch, "step": s.step, "steps": s.steps,
                                  "loss": s.loss, "metric": s.metric}))
        if _on_c_step is not None:
            _on_c_step(self)

    def _on_epoch(self, _user, p):
        e = p.contents
        self.events.put(("epoch", (e.epoch, e.epochs, epoch_logs(e, self.metric), e.seconds)))
        if not self.callbacks or self.stopping:
            return 0
        return 1 if self.replies.get() else 0

    def _work(self, opts):
        try:
            self.status = _lib.lib.mirrored_model_fit(self.model._handle(), ctypes.byref(opts),
                                                      ctypes.byref(self.result),
                                                      ctypes.byref(self.err))
        finally:
            self.events.put(("done", None))

    # ---- on the main thread
    def _drain(self, progress, history):
        while True:
            try:
                kind, payload = self.events.get(timeout=0.2)
            except queue.Empty:
                continue
            if _on_event is not None:
                _on_event(kind, payload)
            if kind == "done":
                return
            if kind == "step":
                progress.step(payload)
                continue
            epoch, progress.epochs, logs, seconds = payload
            history.on_epoch_end(epoch, logs)
            progress.epoch_end(epoch, logs, seconds)
            if self.callbacks:
                self.replies.put(self._callbacks_epoch_end(epoch, logs))

    def _callbacks_epoch_end(self, epoch, logs):
        self.model.stop_training = False
        for cb in self.callbacks:
            if hasattr(cb, "on_epoch_end"):
                cb.on_epoch_end(epoch, dict(logs))
        return bool(self.model.stop_training)

    def _join(self, thread):
        while thread.is_alive():
            try:
                thread.join(0.2)
            except KeyboardInterrupt:
                print("mirrored: stopping: the update in flight finishes and its checkpoint "
                      "is written", file=sys.stderr, flush=True)

    def run(self, opts, progress, history):
        opts.on_step = self.step_fn
        opts.on_epoch = self.epoch_fn
        thread = threading.Thread(target=self._work, args=(opts,), name="mirrored-fit",
                                  daemon=True)
        thread.start()
        try:
            self._drain(progress, history)
        except BaseException:
            progress.interrupted()
            _lib.lib.mirrored_model_request_stop(self.model._handle())
            self.stopping = True
            self.replies.put(True)
            self._join(thread)
            _report_stop(self.result, opts.stop_checkpoint)
            raise
        thread.join()
        if self.status != _lib.OK:
            _lib.raise_error(self.status, self.err)
        return self.result


def _report_stop(result, checkpoint):
    if _lib.job()[0] != 0:
        return
    if result.stopped and checkpoint:
        where = f"its checkpoint is {checkpoint.decode()}"
    elif result.stopped:
        where = "no checkpoint written (stop_checkpoint=None)"
    else:
        where = "the fit had ended"
    print(f"mirrored: fit stopped after {result.updates} updates "
          f"({result.epochs} epochs done); {where}", file=sys.stderr, flush=True)


def run(model, opts, progress, history, metric, callbacks):
    """Runs mirrored_model_fit(opts); returns its FitResult."""
    return _Run(model, metric, callbacks).run(opts, progress, history)
