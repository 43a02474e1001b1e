"""Pure partition functions: which sample indices each client owns.

Every function returns a list with one int64 index array per client; together they use every
index exactly once. Randomness comes only from the ``rng`` passed in (``numpy.random.Generator``),
never from global state, so a (spec, seed) pair always gives the same split.
"""

from __future__ import annotations

import numpy as np

Parts = list[np.ndarray]


def iid(n_samples: int, num_clients: int, rng: np.random.Generator) -> Parts:
    """Shuffle, then cut into ``num_clients`` parts whose sizes differ by at most one."""
    return [p.astype(np.int64) for p in np.array_split(rng.permutation(n_samples), num_clients)]


def dirichlet(labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator) -> Parts:
    """Label skew: each class is split between clients in proportions drawn from Dir(alpha).

    Large ``alpha`` gives every client the global label mix; small ``alpha`` puts most of a class
    on a few clients (Hsu et al. 2019, as in NIID-Bench/FedLab).
    """
    labels = np.asarray(labels)
    owner = np.empty(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        p = rng.dirichlet(np.full(num_clients, alpha))
        if not np.all(np.isfinite(p)) or p.sum() <= 0:
            # Tiny alphas can underflow every component; that limit means "one client gets it all".
            p = np.zeros(num_clients)
            p[rng.integers(num_clients)] = 1.0
        cuts = np.round(np.cumsum(p)[:-1] * len(idx)).astype(np.int64)
        owner[idx] = np.repeat(np.arange(num_clients), np.diff(np.concatenate(([0], cuts, [len(idx)]))))
    return _group(owner, num_clients)


def shards(labels: np.ndarray, num_clients: int, shards_per_client: int, rng: np.random.Generator) -> Parts:
    """McMahan et al.'s pathological split: sort by label, cut into equal shards, deal
    ``shards_per_client`` random shards to each client (so each sees about that many classes)."""
    labels = np.asarray(labels)
    # Shuffle first so that samples of one label are in random order inside their run.
    perm = rng.permutation(len(labels))
    by_label = perm[np.argsort(labels[perm], kind="stable")]
    pieces = np.array_split(by_label, num_clients * shards_per_client)
    deal = rng.permutation(len(pieces)).reshape(num_clients, shards_per_client)
    return [np.concatenate([pieces[s] for s in row]).astype(np.int64) for row in deal]


def natural(writer_ids: np.ndarray) -> Parts:
    """One client per writer, in sorted writer-id order; each keeps its samples in stored order."""
    writer_ids = np.asarray(writer_ids)
    order = np.argsort(writer_ids, kind="stable")
    _, counts = np.unique(writer_ids[order], return_counts=True)
    return [p.astype(np.int64) for p in np.split(order, np.cumsum(counts)[:-1])]


def ensure_nonempty(parts: Parts, rng: np.random.Generator) -> Parts:
    """Give every empty client one sample taken from the currently largest client.

    The caller must have checked that there are at least as many samples as clients.
    """
    parts = list(parts)
    sizes = np.array([len(p) for p in parts])
    if sizes.sum() < len(parts):
        raise ValueError(f"{sizes.sum()} samples cannot fill {len(parts)} clients")
    for i in np.flatnonzero(sizes == 0):
        donor = int(np.argmax(sizes))
        # A random sample of the donor, swapped to its end so that removing it is an O(1) slice
        # (thousands of empty clients happen with tiny alphas).
        take, last = int(rng.integers(sizes[donor])), sizes[donor] - 1
        donor_part = parts[donor].copy() if not parts[donor].flags.writeable else parts[donor]
        donor_part[[take, last]] = donor_part[[last, take]]
        parts[i], parts[donor] = donor_part[last:], donor_part[:last]
        sizes[i], sizes[donor] = 1, last
    return parts


def holdout(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Stratified train/test split: ``fraction`` of each class (rounded) goes to the test set.

    Returns sorted ``(train_idx, test_idx)``.
    """
    labels = np.asarray(labels)
    test = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        test.append(rng.choice(idx, size=int(round(fraction * len(idx))), replace=False))
    test_idx = np.sort(np.concatenate(test)).astype(np.int64) if test else np.zeros(0, np.int64)
    mask = np.ones(len(labels), dtype=bool)
    mask[test_idx] = False
    return np.flatnonzero(mask).astype(np.int64), test_idx


def hold_out_per_client(parts: Parts, fraction: float, rng: np.random.Generator) -> tuple[Parts, Parts]:
    """Split each client's rows into (training, test): a random ``fraction`` of them, rounded, held
    out as the client's own test set; a client always keeps at least one training row."""
    train, test = [], []
    for rows in parts:
        shuffled = rng.permutation(rows)
        k = min(int(round(len(rows) * fraction)), len(rows) - 1)
        test.append(np.sort(shuffled[:k]))
        train.append(np.sort(shuffled[k:]))
    return train, test


def _group(owner: np.ndarray, num_clients: int) -> Parts:
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=num_clients)
    return [p.astype(np.int64) for p in np.split(order, np.cumsum(counts)[:-1])]
