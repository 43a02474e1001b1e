"""FederatedData: every client's samples in one tensor, indexed per client.

No per-client Dataset or DataLoader objects: client ``i`` owns rows
``offsets[i]:offsets[i + 1]`` of ``x_train``/``y_train``. The runner moves the tensors to the
training device once (or pins them in host memory when they do not fit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class FederatedData:
    x_train: torch.Tensor  # [N, ...] float32 images/features, or int64 tokens [N, T]
    y_train: torch.Tensor  # [N] int64 labels, or [N, T] int64 next tokens
    offsets: torch.Tensor  # [num_clients + 1] int64, client i owns rows offsets[i]:offsets[i+1]
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int  # classes, or vocabulary size for token data
    input_shape: tuple[int, ...]  # shape of one sample, e.g. (1, 28, 28), (60,), (64,)
    task: str = "classification"  # or "lm" (next-token prediction)
    writers: list[str] | None = field(default=None)  # natural client ids when the data has writers
    # Each client's own held-out rows (federated evaluation), indexed like the training rows.
    x_client_test: torch.Tensor | None = None
    y_client_test: torch.Tensor | None = None
    client_test_offsets: torch.Tensor | None = None  # [num_clients + 1] int64

    @property
    def num_clients(self) -> int:
        return len(self.offsets) - 1

    def client_sizes(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def to(self, device: torch.device | str, pin: bool = False) -> FederatedData:
        """A copy with the tensors on ``device`` (``pin`` pins host memory instead)."""

        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            if t is None:
                return None
            if not pin:
                return t.to(device)
            # Kept on the host: a tensor already on a GPU comes back first (pin_memory() refuses
            # CUDA tensors), and pinning needs a CUDA driver, so without one the data stays pageable.
            host = t.to("cpu")
            return host.pin_memory() if torch.cuda.is_available() else host

        return FederatedData(
            x_train=move(self.x_train),
            y_train=move(self.y_train),
            offsets=self.offsets,
            x_test=move(self.x_test),
            y_test=move(self.y_test),
            num_classes=self.num_classes,
            input_shape=self.input_shape,
            task=self.task,
            writers=self.writers,
            x_client_test=move(self.x_client_test),
            y_client_test=move(self.y_client_test),
            client_test_offsets=self.client_test_offsets,
        )

    @property
    def device(self) -> torch.device:
        """Where the training rows live: batches are gathered there, with indices placed there."""
        return self.x_train.device

    def nbytes(self) -> int:
        tensors = (self.x_train, self.y_train, self.x_test, self.y_test, self.x_client_test, self.y_client_test)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def summary(self, max_clients: int | None = None) -> dict:
        """Samples and label counts per client, for the dashboard's partition preview."""
        sizes = self.client_sizes().tolist()
        n = len(sizes) if max_clients is None else min(len(sizes), max_clients)
        labels = []
        if self.task == "classification":
            y = self.y_train.cpu()
            for i in range(n):
                part = y[int(self.offsets[i]) : int(self.offsets[i + 1])]
                labels.append(torch.bincount(part, minlength=self.num_classes).tolist())
        return {
            "num_clients": self.num_clients,
            "num_classes": self.num_classes,
            "samples_total": int(sum(sizes)),
            "test_samples": int(len(self.y_test)),
            "samples": sizes[:n],
            "label_counts": labels,
        }


def as_input(x: torch.Tensor) -> torch.Tensor:
    """Model input from stored samples: uint8 images become float in [0, 1]; others pass through.

    Image datasets may store pixels as uint8 (4x less memory, which matters for client data kept
    on the GPU); the conversion happens per batch, on the device.
    """
    if x.dtype == torch.uint8:
        return x.float().div_(255.0)
    return x


def gather(source: torch.Tensor, rows: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Rows ``rows`` of ``source``, delivered on ``device``.

    ``rows`` must live where ``source`` does (see :attr:`FederatedData.device`): on a GPU when the
    data fits there, on the host when it stays pinned in host memory, in which case the gathered
    batch is copied to the device without blocking the host. One code path for both placements,
    so the CPU tests run the gather the host-data GPU fallback runs.
    """
    if rows.device != source.device:
        raise ValueError(f"batch indices are on {rows.device} but the data is on {source.device}")
    # index_select on the flattened rows, not ``source[rows]``: the same rows, but advanced
    # indexing with a 2-D index runs a generic strided kernel, about 20x slower on a CPU for
    # [clients, B] batches of 784-byte images (it was a fifth of a vectorised round).
    batch = source.index_select(0, rows.reshape(-1)).view(*rows.shape, *source.shape[1:])
    return batch if batch.device == device else batch.to(device, non_blocking=True)
