"""A generated next-token corpus over pythia's 50,304-token vocabulary, for the language model.

Text comes from a seeded sparse Markov chain: every token has a few successors with Zipfian
probabilities, and start tokens follow a Zipfian law over a client-specific ranking of the
vocabulary. So there is something to learn (the chain's bigram statistics, with a floor of
entropy from the successor choice) and clients differ in what they talk about.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext, DatasetShape, option
from fedweb_engine.data.pool import Pool, held_out_count, writer_sizes

VOCAB = 50_304
SUCCESSORS = 8  # branching of the chain: the best possible loss is about log of this mix's entropy
ZIPF = 1.1


@dataclass(frozen=True)
class TokensOptions:
    mean_samples: int = option(100, "Mean sequences per client.", min=1, max=100_000, size=True)
    seq_len: int = option(64, "Tokens per sequence.", min=2, max=2048)


def describe(options: TokensOptions, context: DataContext) -> DatasetShape:
    # inputs and next tokens, int64 each
    return DatasetShape((options.seq_len,), VOCAB, context.num_clients * options.mean_samples, 2 * 8 * options.seq_len)


@registry.dataset("tokens", TokensOptions, task="lm", natural=True, describe=describe, context=True)
def load(options: TokensOptions, rng: np.random.Generator, context: DataContext) -> Pool:
    """Sequences of ``seq_len`` tokens: ``x`` [N, seq_len] int64 and ``y`` = ``x`` shifted by one
    (the next tokens), ``task="lm"``; clients are natural writers with lognormal sizes of mean
    ``mean_samples`` sequences (min 1)."""
    k = context.num_clients
    successors = _zipf_tokens(rng, (VOCAB, SUCCESSORS))
    choice_p = _zipf_weights(SUCCESSORS)
    sizes = writer_sizes(k, options.mean_samples, rng, low=1)
    train_writer = np.repeat(np.arange(k), sizes)
    test_writer = np.sort(rng.integers(k, size=held_out_count(len(train_writer), context.test_fraction)))
    # Per-client topic: a client-specific offset moves its Zipfian start tokens elsewhere in the vocabulary.
    topic = rng.integers(VOCAB, size=k)
    x_train, y_train = _sequences(train_writer, topic, successors, choice_p, options.seq_len, rng)
    x_test, y_test = _sequences(test_writer, topic, successors, choice_p, options.seq_len, rng)
    return Pool(
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        num_classes=VOCAB,
        input_shape=(options.seq_len,),
        task="lm",
        writer_ids=train_writer,
        writer_names=[f"writer_{i}" for i in range(k)],
    )


def _zipf_weights(n: int) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** ZIPF
    return w / w.sum()


def _zipf_tokens(rng: np.random.Generator, shape) -> np.ndarray:
    """Token ids drawn with P(id) proportional to 1 / (id + 1)^ZIPF: low ids are the frequent ones."""
    cdf = np.cumsum(_zipf_weights(VOCAB))
    return np.minimum(np.searchsorted(cdf, rng.random(shape)), VOCAB - 1).astype(np.int64)


def _sequences(writer, topic, successors, choice_p, seq_len, rng) -> tuple[torch.Tensor, torch.Tensor]:
    """Walk the chain from each writer's start tokens; one step for all sequences at a time."""
    n = len(writer)
    seq = np.empty((n, seq_len + 1), dtype=np.int64)
    seq[:, 0] = (_zipf_tokens(rng, n) + topic[writer]) % VOCAB
    for t in range(seq_len):
        seq[:, t + 1] = successors[seq[:, t], rng.choice(SUCCESSORS, size=n, p=choice_p)]
    seq_t = torch.from_numpy(seq)
    return seq_t[:, :-1].contiguous(), seq_t[:, 1:].contiguous()
