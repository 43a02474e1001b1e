"""The fleet: workers and their heartbeats' rows, the queues, scheduling policies, placement, gangs
(workers recruited as ranks of distributed rounds), fair shares and the Prometheus view of it all."""
