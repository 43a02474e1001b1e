"""Aggregation: hand-computed weighted averages, streamed groups, zero weights."""

import torch

from fedweb_engine.strategies.aggregate import accumulate_, divide_by_total_, weighted_average


def test_it_weights_clients_by_sample_count():
    # Prepare: client A has 1 sample, client B has 3.
    updates = torch.tensor([[1.0, 2.0], [5.0, -2.0]])
    weights = torch.tensor([1, 3])

    # Execute
    avg = weighted_average(updates, weights)

    # Assert: (1·[1, 2] + 3·[5, −2]) / 4 = [16, −4] / 4 = [4, −1]
    assert avg.tolist() == [4.0, -1.0]


def test_it_returns_zeros_when_the_total_weight_is_zero():
    updates = torch.tensor([[1.0, 2.0], [5.0, -2.0]])

    avg = weighted_average(updates, torch.zeros(2))

    assert avg.tolist() == [0.0, 0.0]


def test_it_streams_groups_into_the_same_average():
    # Prepare: three clients in two groups; the last row of group 2 is a masked client.
    group1 = torch.tensor([[1.0, 2.0], [5.0, -2.0]])
    group2 = torch.tensor([[-3.0, 4.0], [0.0, 0.0]])
    w1, w2 = torch.tensor([1.0, 3.0]), torch.tensor([4.0, 0.0])
    acc = torch.zeros(2)

    # Execute
    accumulate_(acc, group1, w1)
    accumulate_(acc, group2, w2)
    avg = divide_by_total_(acc, w1.sum() + w2.sum())

    # Assert: ([1, 2] + [15, −6] + [−12, 16]) / 8 = [4, 12] / 8 = [0.5, 1.5]
    assert avg is acc
    assert avg.tolist() == [0.5, 1.5]
    assert torch.equal(avg, weighted_average(torch.cat([group1, group2[:1]]), torch.tensor([1.0, 3.0, 4.0])))
