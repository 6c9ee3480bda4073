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
# Build arguments, for a machine whose registry, package index or TLS is proxied (docker/smoke.sh passes them):
# - BASE_IMAGE: the Python 3.11 image of every stage (default python:3.11-slim; one with `python`, pip and
#   venv on Debian, e.g. docker/debian-base.sh's, where no registry is reachable);
# - PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST: pip's own variables, for the build stages only;
# - CA_BUNDLE: the name of a PEM file put in docker/ca/ (e.g. the host's /etc/ssl/certs/ca-certificates.crt),
#   pip's whole trust store in the build stages. None of them reaches the image: its stage copies only the
#   environment and the project's files.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE} AS deps
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ARG CA_BUNDLE

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY docker/requirements.lock docker/requirements.lock
COPY docker/ca/ docker/ca/
RUN if [ -n "$CA_BUNDLE" ]; then export PIP_CERT="/src/docker/ca/$CA_BUNDLE"; fi \
    && python -m venv --without-pip /opt/venv \
    && python -m pip --python /opt/venv/bin/python install --only-binary=:all: -r docker/requirements.lock

FROM deps AS project
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ARG CA_BUNDLE

COPY . .
RUN if [ -n "$CA_BUNDLE" ]; then export PIP_CERT="/src/docker/ca/$CA_BUNDLE"; fi \
    && python -m pip --python /opt/venv/bin/python install --only-binary=:all: --no-deps ".[service]" \
    && python -m pip --python /opt/venv/bin/python check \
    && mkdir -p /stage/opt/venv/bin /stage/opt/venv/lib/python3.11/site-packages \
    && cd /opt/venv/lib/python3.11/site-packages \
    && mv darrm_opt darrm_opt-*.dist-info /stage/opt/venv/lib/python3.11/site-packages/ \
    && mv /opt/venv/bin/darrm-opt /stage/opt/venv/bin/

FROM ${BASE_IMAGE}

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
