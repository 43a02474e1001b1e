"""External runs: experiments whose rounds are reported over the API (a script, the Python client
in clients/python), never scheduled or dispatched to FedWeb's workers.

``models``: the run's token and its custom scalars; ``ingest``: validating and recording a batch of
rounds; ``liveness``: a silent run marked crashed. Their API (run tokens, the rate limit, the runs
and MLflow endpoints) is ``orchestrator.api.external``; their dashboard ``orchestrator.web.external_dashboard``.
"""
