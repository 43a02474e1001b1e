"""The API of external runs: run-scoped tokens (``auth``), their rate limit (``throttle``), the runs'
endpoints (``runs``) and the MLflow tracking subset (``mlflow``, its wire format ``mlflow_protocol``).
What they record is ``orchestrator.external``'s."""
