"""What a Celery worker process sets up at start, before it forks its pool.

``fedweb/celery.py`` names this module in ``app.conf.imports``; Celery imports it in the worker's
main process only (``loader.init_worker``, after Django is set up, before the pool forks), so the
web process and the Celery app itself never import worker code. Importing it:

- connects the heartbeat and the worker's metrics endpoint to Celery's ``worker_ready`` signal
  (``workers.heartbeat``, ``workers.exporter``);
- makes the consumer retry a lost broker every second or two (``workers.broker.retry``);
- imports the user's plugins (``FEDWEB_PLUGINS``) once, so the pool's children inherit them. A
  module that fails to import stops the worker at start-up, naming the module. This process forks
  the pool, so it must never initialise CUDA: a plugin that does so at import is refused.
"""

from fedweb_engine.components.plugins import load_plugins
from workers import exporter, heartbeat  # noqa: F401  (their signal handlers)
from workers.broker import retry as broker_retry

broker_retry.install()  # a consumer whose broker went away tries it again every second or two
load_plugins(forbid_cuda=True)
