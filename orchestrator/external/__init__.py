"""External runs: experiments whose rounds are reported over the API (a script, the Python client
in clients/python), never scheduled or dispatched to FedWeb's workers.

``models``: the run's token and its custom scalars; ``ingest``: validating and recording a batch of
rounds; ``auth``: run-scoped tokens and their rate limit; ``api``: the DRF views.
"""
