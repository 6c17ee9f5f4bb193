"""Keras-style progress of a fit, printed by the main thread.

verbose 1 ("auto"): on a terminal or in a Jupyter kernel, one line per epoch
rewritten in place ('\\r') as updates land, at most 10 times a second, then
ended with the epoch's validation figures and time; elsewhere, and with
verbose 2, one line per epoch; 0: nothing."""
import sys
import time

_MIN_INTERVAL = 0.1  # seconds between two in-place rewrites


def _live(stream):
    if "ipykernel" in sys.modules:
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    def __init__(self, verbose, epochs, metric, stream=None):
        self.stream = stream or sys.stdout
        if verbose == "auto":
            verbose = 1
        self.on = bool(verbose)
        self.live = verbose == 1 and _live(self.stream)
        self.epochs = epochs
        self.metric = metric
        self.steps = 0
        self.last = 0.0
        self.width = 0

    def _head(self, epoch, step):
        total = f"/{self.epochs}" if self.epochs else ""
        width = len(str(self.steps))
        return f"Epoch {epoch + 1}{total}  {step:>{width}}/{self.steps}"

    def _write(self, text, end):
        pad = " " * max(0, self.width - len(text)) if self.live else ""
        self.stream.write(("\r" if self.live else "") + text + pad + end)
        self.width = 0 if end else len(text)
        self.stream.flush()

    def step(self, logs):
        """logs: dict epoch, step, steps, loss, metric."""
        self.steps = logs["steps"]
        if not (self.on and self.live):
            return
        now = time.monotonic()
        if now - self.last < _MIN_INTERVAL and logs["step"] != logs["steps"]:
            return
        self.last = now
        self._write(f"{self._head(logs['epoch'], logs['step'])} - loss: {logs['loss']:.4f}"
                    f" - {self.metric}: {logs['metric']:.4f}", "")

    def epoch_end(self, epoch, logs, seconds):
        """logs: the History's dict of the epoch."""
        if not self.on:
            return
        figures = " - ".join(f"{k}: {v:.4f}" for k, v in logs.items())
        self._write(f"{self._head(epoch, self.steps)} - {figures} - {seconds:.1f}s", "\n")

    def interrupted(self):
        """Ends a line left open by an in-place update."""
        if self.on and self.live and self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0
