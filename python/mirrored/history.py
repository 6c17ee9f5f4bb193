"""History: what Model.fit returns, as Keras's keras.callbacks.History."""
from __future__ import annotations

from typing import Any, Optional


class History:
    """history: {"loss": [...], "accuracy" or "mae": [...], "val_loss": ...}
    one value per epoch; epoch: the epochs' numbers (0-based, counting the
    model's earlier fits); params: the fit's settings and outcome
    (verbose, epochs, steps, replicas, updates, stopped, params_hash);
    model: the Model."""

    def __init__(self, model: Any = None, params: Optional[dict[str, Any]] = None):
        self.model = model
        self.params: dict[str, Any] = dict(params or {})
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []

    def on_epoch_end(self, epoch: int, logs: dict[str, float]) -> None:
        self.epoch.append(epoch)
        for key, value in logs.items():
            self.history.setdefault(key, []).append(value)

    def __repr__(self) -> str:
        return f"<mirrored.History epochs={len(self.epoch)} keys={list(self.history)}>"


def epoch_logs(logs: Any, metric: str) -> dict[str, float]:
    """The Keras logs dict of a mirrored_epoch_logs."""
    out = {"loss": logs.loss, metric: logs.metric}
    if logs.has_val:
        out["val_loss"] = logs.val_loss
        out["val_" + metric] = logs.val_metric
    return out
