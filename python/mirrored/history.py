"""History: what Model.fit returns, as Keras's keras.callbacks.History."""


class History:
    """history: {"loss": [...], "accuracy" or "mae": [...], "val_loss": ...}
    one value per epoch; epoch: the epochs' numbers (0-based, counting the
    model's earlier fits); params: the fit's settings and outcome
    (verbose, epochs, steps, replicas, updates, stopped, params_hash);
    model: the Model."""

    def __init__(self, model=None, params=None):
        self.model = model
        self.params = dict(params or {})
        self.history = {}
        self.epoch = []

    def on_epoch_end(self, epoch, logs):
        self.epoch.append(epoch)
        for key, value in logs.items():
            self.history.setdefault(key, []).append(value)

    def __repr__(self):
        return f"<mirrored.History epochs={len(self.epoch)} keys={list(self.history)}>"


def epoch_logs(logs, metric):
    """The Keras logs dict of a mirrored_epoch_logs."""
    out = {"loss": logs.loss, metric: logs.metric}
    if logs.has_val:
        out["val_loss"] = logs.val_loss
        out["val_" + metric] = logs.val_metric
    return out
