"""The classifier head: a small multilayer perceptron (or a linear layer) over clause features, with its weights in
a NumPy file shipped in the package (`clause_head.npz`, written by `clauses/train.py`). Inference is a few matrix
products in NumPy, so the package needs neither scikit-learn nor pickle at run time to use it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HEAD_FILE = Path(__file__).with_name("clause_head.npz")
#: The change head (clauses/train_change.py): the same features, two labels, "holds" and "change".
CHANGE_HEAD_FILE = Path(__file__).with_name("change_head.npz")


@dataclass(frozen=True)
class ClauseHead:
    """Layers `(weights, bias)` applied in order, ReLU between them and softmax after the last."""

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    kinds: tuple[str, ...]
    #: Per kind, the least probability at which that kind is predicted (lasting kinds are held to a higher bar
    #: chosen on the training split by cross-validation); below it the best kind that clears its bar wins.
    min_probability: dict[str, float]
    meta: dict

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """(n, len(kinds)) class probabilities."""
        x = np.asarray(features, dtype=np.float32)
        for i, (w, b) in enumerate(self.layers):
            x = x @ w + b
            if i < len(self.layers) - 1:
                x = np.maximum(x, 0.0)
        x = x - x.max(axis=1, keepdims=True)
        e = np.exp(x)
        return e / e.sum(axis=1, keepdims=True)

    @classmethod
    def averaged(cls, members: list[ClauseHead], min_probability: dict[str, float], meta: dict) -> ClauseHead:
        """One head whose logits are the mean of the members' (one hidden layer each, the same kinds in the same
        order): their hidden layers side by side, each output layer scaled by 1/len(members). The result is again a
        plain `ClauseHead`, so loading and inference do not change."""
        if any(len(m.layers) != 2 or m.kinds != members[0].kinds for m in members):
            raise ValueError("members must have one hidden layer and the same kinds")
        share = 1.0 / len(members)
        hidden = (
            np.concatenate([m.layers[0][0] for m in members], axis=1),
            np.concatenate([m.layers[0][1] for m in members]),
        )
        out = (
            np.concatenate([m.layers[1][0] * share for m in members], axis=0),
            np.sum([m.layers[1][1] * share for m in members], axis=0),
        )
        return cls((hidden, out), members[0].kinds, min_probability, meta)

    def save(self, path: Path = HEAD_FILE) -> None:
        arrays: dict[str, np.ndarray] = {}
        for i, (w, b) in enumerate(self.layers):
            arrays[f"w{i}"] = w.astype(np.float32)
            arrays[f"b{i}"] = b.astype(np.float32)
        header = {"kinds": list(self.kinds), "min_probability": self.min_probability, "meta": self.meta}
        arrays["header"] = np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8)
        # allow_pickle named (the arrays are numeric, so the file is the same): numpy's stubs would otherwise take
        # the str->array dict as a possible value of that bool parameter
        np.savez_compressed(path, allow_pickle=False, **arrays)

    @classmethod
    def load(cls, path: Path = HEAD_FILE) -> ClauseHead:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(bytes(data["header"]).decode())
            n = sum(1 for key in data.files if key.startswith("w"))
            layers = tuple((data[f"w{i}"], data[f"b{i}"]) for i in range(n))
        return cls(layers, tuple(header["kinds"]), dict(header["min_probability"]), dict(header["meta"]))
