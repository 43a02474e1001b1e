"""One experiment over several devices and machines: a round's cohort split over the N ranks of a
``torch.distributed`` group (Gloo on CPUs, NCCL on GPUs).

Every rank holds the same simulation and draws the same plan from the same generator; rank ``k``
trains the ``k``-th share of the round's clients, one all-reduce sums the weighted updates, the
client algorithm's sums and the round's figures, and every rank then takes the same server step.
Rank 0 evaluates, keeps the per-client state and returns the round's record. The plan does not
depend on N, so neither do the results (up to the order of floating-point sums).

- :mod:`~fedweb_engine.distributed.group`: the process group, its timeouts and failures;
- :mod:`~fedweb_engine.distributed.share`: which clients a rank trains, and the rows it borrows;
- :mod:`~fedweb_engine.distributed.rank_round`: one round, as any rank runs it;
- :mod:`~fedweb_engine.distributed.leader` and :mod:`~fedweb_engine.distributed.member`: rank 0
  drives the other ranks through a store (their processes may be its children or other workers);
- :mod:`~fedweb_engine.distributed.local`: members started as child processes of this machine.
"""
