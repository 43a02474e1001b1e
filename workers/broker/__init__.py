"""A worker and its broker: a restart noticed (the broker's run id changed), and a lost connection
retried every second or two."""
