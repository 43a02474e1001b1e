"""All the per-client state of one Simulation: its named stores (``client_state.ClientStateStore``), committed,
described, moved to a round and snapshotted together, and the snapshot folder beside a checkpoint."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from fedweb_engine.state.client_rows import ClientStateStore


class ClientStates:
    """The client-state stores of one simulation, under one folder, moved from round to round
    together. ``folder`` None: a temporary folder (the engine CLI), removed by :meth:`close`, under
    ``$FEDWEB_DATA_DIR`` when it is set (``/tmp`` may be memory), else the system's temporary folder."""

    def __init__(self, folder: str | Path | None = None):
        self._folder = Path(folder) if folder is not None else None
        self._temporary: Path | None = None
        self.stores: dict[str, ClientStateStore] = {}
        self.round = 0
        self._snapshot: Path | None = None  # checkpoint snapshot to load into stores opened later

    @property
    def folder(self) -> Path:
        if self._folder is None:
            parent = os.environ.get("FEDWEB_DATA_DIR") or None
            if parent:
                Path(parent).mkdir(parents=True, exist_ok=True)
            self._temporary = self._folder = Path(tempfile.mkdtemp(prefix="fedweb-client-state-", dir=parent))
        return self._folder

    def open(self, name: str, num_clients: int, width: int) -> ClientStateStore:
        """The store ``name`` (created empty on first use), at the simulation's round."""
        store = self.stores.get(name)
        if store is not None:
            if (store.num_clients, store.width) != (num_clients, width):
                field = "width" if store.width != width else "num_clients"
                raise ValueError(
                    f"client state {name!r}: {field} is {getattr(store, field)}, asked for "
                    f"{num_clients if field == 'num_clients' else width}"
                )
            return store
        store = ClientStateStore(self.folder, num_clients, width, name=name)
        self.stores[name] = store
        self._move(store, check=False)  # built before a round state is loaded: see ClientStateStore.at
        return store

    def commit(self, round_number: int) -> None:
        """Publish every store's rows as round ``round_number``'s (once per round, in order)."""
        for store in self.stores.values():
            store.commit(round_number)
        self.round, self._snapshot = round_number, None

    def describe(self) -> dict:
        """What the round state records: the round and each store's shape."""
        return {"round": self.round, "stores": {n: [s.num_clients, s.width] for n, s in self.stores.items()}}

    def restore(self, round_number: int, described: dict | None = None, snapshot: str | Path | None = None) -> None:
        """Move every store (and those ``described`` by a round state) to ``round_number``: from the
        journals, or from a checkpoint's ``snapshot`` folder. Raises :class:`StateUnavailable`."""
        self.round, self._snapshot = int(round_number), Path(snapshot) if snapshot else None
        for name, (num_clients, width) in (described or {}).get("stores", {}).items():
            if name not in self.stores:
                self.stores[name] = ClientStateStore(self.folder, num_clients, width, name=name)
        for store in self.stores.values():
            self._move(store)

    def save_snapshot(self, folder: Path) -> bool:
        """Copy every store into ``folder`` atomically (a temporary folder renamed); False, and
        nothing written, when there are no stores."""
        if not self.stores:
            return False
        tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            for store in self.stores.values():
                store.save_snapshot(tmp)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return True

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.stores = {}
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = self._folder = None

    def _move(self, store: ClientStateStore, check: bool = True) -> None:
        if self._snapshot is not None:
            store.load_snapshot(self._snapshot, self.round)
        else:
            store.at(self.round, check=check)


def snapshot_folder(checkpoint: str | Path) -> Path:
    """Where the client state of the checkpoint file ``checkpoint`` is copied: beside it."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(f"{checkpoint.stem}.clients")
