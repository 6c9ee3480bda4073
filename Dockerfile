# darrm-opt service: docker build -t darrm-opt . && docker run -p 8000:8000 -v darrm-data:/data -e DARRM_API_KEYS=... darrm-opt
# tests/api/test_api_packaging.py runs this file's steps: the install, the CMD and the HEALTHCHECK.
# Three stages, so that a source edit rebuilds only the image's last layer:
# - deps: the core and `service` dependencies (binary wheels only: no compiler) at the exact versions of
#   docker/requirements.lock (a rebuild installs the same ones) in a virtual environment without pip; only
#   the lock feeds it;
# - project: the source, installed into that environment without dependencies (all are in the lock; `pip check`
#   proves it), then the project's own files set apart under /stage;
# - the image: the environment of `deps` (no Gurobi, CBC, plots, demo, Dask or tests), then as its last layer
#   the project's files from /stage.
FROM python:3.11-slim AS deps

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY docker/requirements.lock docker/requirements.lock
RUN python -m venv --without-pip /opt/venv \
    && python -m pip --python /opt/venv/bin/python install --only-binary=:all: -r docker/requirements.lock

FROM deps AS project

COPY . .
RUN python -m pip --python /opt/venv/bin/python install --only-binary=:all: --no-deps ".[service]" \
    && python -m pip --python /opt/venv/bin/python check \
    && mkdir -p /stage/opt/venv/bin /stage/opt/venv/lib/python3.11/site-packages \
    && cd /opt/venv/lib/python3.11/site-packages \
    && mv darrm_opt darrm_opt-*.dist-info /stage/opt/venv/lib/python3.11/site-packages/ \
    && mv /opt/venv/bin/darrm-opt /stage/opt/venv/bin/

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH

RUN useradd --create-home --uid 10001 darrm && mkdir /data && chown darrm:darrm /data
COPY --from=deps /opt/venv /opt/venv

USER darrm
WORKDIR /home/darrm
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
# the last layer: the only one a source edit changes
COPY --from=project /stage/ /
CMD ["darrm-opt", "serve", "--host", "0.0.0.0", "--port", "8000", "--database-url", "sqlite:////data/darrm.db"]
