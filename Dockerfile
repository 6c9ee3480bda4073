# darrm-opt service: docker build -t darrm-opt . && docker run -p 8000:8000 -v darrm-data:/data -e DARRM_API_KEYS=... darrm-opt
# tests/api/test_api_packaging.py runs this file's steps: the install, the CMD and the HEALTHCHECK.
# Two stages: the first installs the core and the `service` extra (binary wheels only: no compiler) into a
# virtual environment; the second copies that environment alone (no Gurobi, CBC, plots, demo, Dask or tests).
# The dependencies come from docker/requirements.lock (exact versions: a rebuild installs the same ones) in a
# layer of their own, before the source is copied: a source edit reinstalls only the project.
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY docker/requirements.lock docker/requirements.lock
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --only-binary=:all: -r docker/requirements.lock
COPY . .
RUN /opt/venv/bin/pip install --only-binary=:all: --no-deps ".[service]" && /opt/venv/bin/pip check \
    && /opt/venv/bin/pip uninstall --yes pip

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH

RUN useradd --create-home --uid 10001 darrm && mkdir /data && chown darrm:darrm /data
COPY --from=build /opt/venv /opt/venv

USER darrm
WORKDIR /home/darrm
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
CMD ["darrm-opt", "serve", "--host", "0.0.0.0", "--port", "8000", "--database-url", "sqlite:////data/darrm.db"]
