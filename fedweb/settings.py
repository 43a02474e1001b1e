"""FedWeb settings, read from environment variables (see README.md, "Configuration")."""

from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from fedweb.env import (
    broker_url,
    channel_layers,
    database_config,
    env_bool,
    env_bytes,
    env_choices,
    env_devices,
    env_int,
    env_list,
    env_listen_address,
    env_str,
    env_token,
    redis_urls,
    secret_key,
)
from orchestrator.fleet.policies import POLICIES  # pure: no Django, safe to import here

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", ["http://localhost", "http://127.0.0.1"])

# Datasets, checkpoints and the default SQLite database live here.
FEDWEB_DATA_DIR = Path(env_str("FEDWEB_DATA_DIR", str(BASE_DIR / "var"))).resolve()
FEDWEB_DATA_DIR.mkdir(parents=True, exist_ok=True)
SECRET_KEY = secret_key(FEDWEB_DATA_DIR / "secret_key")
FEDWEB_QUEUES = env_list("FEDWEB_QUEUES", ["cpu", "gpu"])
CHECKPOINT_EVERY = env_int("CHECKPOINT_EVERY", 10, min_value=1)
CHECKPOINT_KEEP = env_int("CHECKPOINT_KEEP", 3, min_value=1)
# Disk retention (orchestrator/storage/disk_use.py): round states a run that can go on keeps (the
# newest two let the re-run of an unrecorded round load the one before; 1 makes that re-run replay
# from the last checkpoint), and checkpoints a completed run keeps (the last is its final model).
FEDWEB_ROUND_STATES_KEEP = env_int("FEDWEB_ROUND_STATES_KEEP", 2, min_value=1)
FEDWEB_FINISHED_CHECKPOINTS_KEEP = env_int("FEDWEB_FINISHED_CHECKPOINTS_KEEP", 1, min_value=1)
# Built federated datasets each worker process keeps for the next experiment on the same data
# (fedweb_engine/data/cache.py), in bytes of tensors; least recently used evicted first.
FEDWEB_DATA_CACHE_BYTES = env_bytes("FEDWEB_DATA_CACHE_BYTES", 2 * 10**9)
# A worker whose last heartbeat is older than this is shown as lost.
WORKER_LOST_AFTER = env_int("WORKER_LOST_AFTER", 60, min_value=1)
HEARTBEAT_INTERVAL = env_int("HEARTBEAT_INTERVAL", 5, min_value=1)
# External runs (orchestrator/external): one with no report for this long is shown as crashed.
FEDWEB_EXTERNAL_CRASH_AFTER = env_int("FEDWEB_EXTERNAL_CRASH_AFTER", 600, min_value=1)
# Requests per minute one run token may make (429 with Retry-After beyond), and its lifetime.
FEDWEB_EXTERNAL_RATE = env_int("FEDWEB_EXTERNAL_RATE", 600, min_value=1)
FEDWEB_EXTERNAL_TOKEN_DAYS = env_int("FEDWEB_EXTERNAL_TOKEN_DAYS", 30, min_value=1)
# Distinct custom metric names one external run may report.
FEDWEB_EXTERNAL_MAX_METRICS = env_int("FEDWEB_EXTERNAL_MAX_METRICS", 200, min_value=1)
if HEARTBEAT_INTERVAL >= WORKER_LOST_AFTER:
    raise ImproperlyConfigured("HEARTBEAT_INTERVAL must be shorter than WORKER_LOST_AFTER")
# Affinity (orchestrator/fleet/scheduling.py): a round recorded by a live worker stays this many seconds
# for that worker's own scheduling pass, which sends it back to it; anyone else's pass leaves it alone
# (0: no grace). A holder that died right after recording costs at most this plus one heartbeat.
FEDWEB_AFFINITY_GRACE = env_int("FEDWEB_AFFINITY_GRACE", 5, min_value=0)
# A round sent but claimed by no worker for this long is sent again (a lost message; harmless if not).
ROUND_RESEND_AFTER = env_int("ROUND_RESEND_AFTER", 300, min_value=1)
# Scheduling (orchestrator/fleet/scheduling.py): the policy of each queue ("cpu=srtf,gpu=pack"; unnamed
# queues use fifo), how long a ready round may wait before it goes first whatever the policy, and
# packing: the memory budget of a CPU worker (0: never pack on CPU; GPU workers use their device's
# total from the heartbeat) and the most rounds one worker runs at once. ``fair`` forgets: a round's
# seconds count half after FEDWEB_FAIR_HALF_LIFE seconds, a quarter after two, and so on.
FEDWEB_POLICY = env_choices("FEDWEB_POLICY", POLICIES)
FEDWEB_AGE_BOOST_SECONDS = env_int("FEDWEB_AGE_BOOST_SECONDS", 600, min_value=0)
FEDWEB_PACK_CAPACITY_MB = env_int("FEDWEB_PACK_CAPACITY_MB", 0, min_value=0)
FEDWEB_PACK_SLOTS = env_int("FEDWEB_PACK_SLOTS", 2, min_value=1)
FEDWEB_FAIR_HALF_LIFE = env_int("FEDWEB_FAIR_HALF_LIFE", 4 * 3600, min_value=1)
# Distributed rounds (compute.ranks; docs/operations.md): the devices a worker's own ranks run on
# ("cuda:0,cuda:1" or "cpu,cpu": ranks 1.. are its child processes; empty: one rank, itself), the
# most ranks "auto" asks for, how long a group may take to form (members build their simulation
# first) and each collective may wait (unset: 4x the last round's slowest training, 30 s at least,
# 120 s before any round), the address other machines reach this worker's ranks on (empty: the host
# name's), and how long a worker recruited into another's group waits for its next round.
FEDWEB_WORKER_DEVICES = env_devices("FEDWEB_WORKER_DEVICES")
FEDWEB_MAX_RANKS = env_int("FEDWEB_MAX_RANKS", 8, min_value=1)
FEDWEB_RANK_JOIN_TIMEOUT = env_int("FEDWEB_RANK_JOIN_TIMEOUT", 120, min_value=1)
FEDWEB_RANK_TIMEOUT = env_int("FEDWEB_RANK_TIMEOUT", 0, min_value=0) or None
FEDWEB_RANK_ADDRESS = env_str("FEDWEB_RANK_ADDRESS", "")
FEDWEB_GANG_IDLE = env_int("FEDWEB_GANG_IDLE", 30, min_value=1)
# What the queue accepts: a spec over any limit is refused at submission with its estimate
# (fedweb_engine.estimates.capacity; the defaults are Limits()'s). Memory is per round, on one device.
FEDWEB_MAX_PARAMS = env_int("FEDWEB_MAX_PARAMS", 100_000_000, min_value=1)
FEDWEB_MAX_ROUND_MEMORY_CPU = env_bytes("FEDWEB_MAX_ROUND_MEMORY_CPU", 32 * 10**9)
FEDWEB_MAX_ROUND_MEMORY_GPU = env_bytes("FEDWEB_MAX_ROUND_MEMORY_GPU", 80 * 10**9)
FEDWEB_MAX_ROUNDS = env_int("FEDWEB_MAX_ROUNDS", 100_000, min_value=1)
FEDWEB_MAX_CLIENTS = env_int("FEDWEB_MAX_CLIENTS", 500_000, min_value=1)
FEDWEB_MAX_DATASET = env_bytes("FEDWEB_MAX_DATASET", 16 * 10**9)
# The most runs one sweep may expand into (configurations x seeds); a bigger one is refused whole.
FEDWEB_SWEEP_MAX_RUNS = env_int("FEDWEB_SWEEP_MAX_RUNS", 200, min_value=1)
# Prometheus metrics (orchestrator/fleet/prometheus.py, workers/exporter.py): web /metrics needs this bearer
# token when set, else answers loopback only; each worker serves its own on this port (+1, +2...
# when taken by another worker on the host), or not at all when unset.
FEDWEB_METRICS_TOKEN = env_token("FEDWEB_METRICS_TOKEN")
FEDWEB_WORKER_METRICS_ADDRESS = env_listen_address("FEDWEB_WORKER_METRICS_PORT")

INSTALLED_APPS = [
    "daphne",  # first, so `runserver` serves ASGI (WebSockets) too
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc as local static files: /api/docs/ works offline
    "axes",
    "accounts",
    "orchestrator",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "fedweb.errors.body_size_limit",  # 413 before anything reads a body over DATA_UPLOAD_MAX_MEMORY_SIZE
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a refused login into the lockout answer
]

ROOT_URLCONF = "fedweb.urls"
WSGI_APPLICATION = "fedweb.wsgi.application"
ASGI_APPLICATION = "fedweb.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": database_config(env_str("DATABASE_URL"), FEDWEB_DATA_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
# Login rate limit (django-axes), on the login page and POST /api/token/: after this many failures
# for one username from one address, further attempts are refused for the cool-off time; a
# successful login clears the count.
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, min_value=1)
LOGIN_COOLOFF_MINUTES = env_int("LOGIN_COOLOFF_MINUTES", 15, min_value=1)
AUTHENTICATION_BACKENDS = ["accounts.web.login_limit.LoginLimitBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.web.login_limit.lockout_response"
AXES_DISABLE_ACCESS_LOG = True  # only failures are needed for the limit; no row per successful login
AXES_VERBOSE = False
# How long a team invitation link stays valid.
INVITATION_DAYS = env_int("INVITATION_DAYS", 7, min_value=1)

REST_FRAMEWORK = {
    # Token first, so an anonymous API call gets 401 with "WWW-Authenticate: Token".
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's, with a JSON reader that refuses hostile documents with a 400 (fedweb/inputs.py).
    "DEFAULT_PARSER_CLASSES": [
        "fedweb.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "FedWeb API",
    "DESCRIPTION": "Create, run and read federated-learning experiments. Authenticate with "
    "`Authorization: Token <key>` (POST /api/token/ or the /accounts/token/ page).\n\n"
    "**External runs** (a script that trains elsewhere reports its rounds): `POST /api/external/runs/` with "
    "your token creates one and answers a run token; `POST /api/external/runs/{id}/rounds/` with "
    "`Authorization: Bearer <run token>` reports rounds, then `finish/` or `fail/`. The Python client "
    "(clients/python) and the MLflow tracking API subset (`/api/2.0/mlflow/`) sit on the same runs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The API's shape is no secret; the data behind it is.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    # /api/docs/ and /api/redoc/ load their JavaScript and CSS from /static/, never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = FEDWEB_DATA_DIR / "static"
SERVE_STATIC = env_bool("SERVE_STATIC", True)
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []

# --- Redis: one URL, two databases (Celery broker on n, channel layer on n + 1) -----------------
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
# Optional key prefix so several FedWeb instances (or test runs) can share one Redis safely.
REDIS_PREFIX = env_str("FEDWEB_REDIS_PREFIX", "")
_BROKER_URL, _CHANNELS_URL = redis_urls(REDIS_URL)

CHANNEL_LAYERS = channel_layers(_CHANNELS_URL, REDIS_PREFIX)

# "default" stays in each process (previews); "shared" is what every web process must see alike:
# the ingestion rate limit per token (orchestrator/api/external/throttle.py), in the broker's database
# under its own key prefix. Short timeouts: when Redis does not answer, the limit counts per process.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "shared": {
        "BACKEND": "fedweb.redis_cache.RedisCache",  # Django's, with one connection pool per process
        "LOCATION": _BROKER_URL,
        "KEY_PREFIX": f"{REDIS_PREFIX}fedweb-cache",
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    },
}

# Redis by default (database n of REDIS_URL); RabbitMQ with CELERY_BROKER_URL=amqp://...
CELERY_BROKER_URL = broker_url(env_str("CELERY_BROKER_URL"), _BROKER_URL)
if CELERY_BROKER_URL.startswith(("redis", "rediss", "unix")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # How long an unacknowledged round stays with a worker before Redis hands it out again.
        # Heartbeats bring a dead worker's round back much sooner (WORKER_LOST_AFTER); the copy
        # Redis restores later is then a harmless duplicate. Keep it above the longest round.
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, min_value=1),
        "unacked_restore_interval": env_int("CELERY_RESTORE_INTERVAL", 10, min_value=1),
        "unacked_restore_throttle": 1,
        "global_keyprefix": REDIS_PREFIX,
    }
else:
    # RabbitMQ returns an unacknowledged round to its queue as soon as the worker's connection drops.
    CELERY_BROKER_TRANSPORT_OPTIONS = {}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ACKS_LATE = True  # a round is acknowledged only after it is recorded
CELERY_TASK_REJECT_ON_WORKER_LOST = True  # ... and re-queued when the worker dies mid-round
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # never hold a round another worker could run
CELERY_TASK_DEFAULT_QUEUE = FEDWEB_QUEUES[0]
# Each worker also consumes its own queue (<hostname>.dq2): packed rounds are sent to one worker.
CELERY_WORKER_DIRECT = True
CELERY_TASK_IGNORE_RESULT = True  # the database holds results; no result backend
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TASK_ALWAYS_EAGER = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # axes logs every login at INFO (with masked names): noise next to our own logs.
    "loggers": {"django.channels.server": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}
