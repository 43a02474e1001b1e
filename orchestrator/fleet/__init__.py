"""The fleet: workers and their heartbeats' rows, the queues, scheduling policies, placement, sharding,
fair shares and the Prometheus view of it all."""
