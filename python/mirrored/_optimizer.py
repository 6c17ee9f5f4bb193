"""Model.optimizer: the optimizer's name and its learning rate as the fit
ran it, for Keras's callbacks that read them (ReduceLROnPlateau adds the
rate to its logs).

The rate is read-only: the C fit fixes its schedule ([net] learning_rate,
warmup, lr_schedule) when it starts, and the C API has no call that
changes it between epochs, so a callback's assignment is refused rather
than ignored."""
from __future__ import annotations

from typing import Optional


class Optimizer:
    def __init__(self, name: str):
        self.name = name
        self._lr: Optional[float] = None

    @property
    def learning_rate(self) -> Optional[float]:
        """The rate at the end of the last epoch trained (None before one)."""
        return self._lr

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        raise NotImplementedError(
            f"optimizer.learning_rate = {value!r}: mirrored cannot change the learning rate of "
            f"a fit (its schedule is fixed when the fit starts: [net] learning_rate)")

    def __repr__(self) -> str:
        return f"<mirrored.Optimizer {self.name!r} learning_rate={self._lr}>"
