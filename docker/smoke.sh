#!/usr/bin/env bash
# Smoke test of the image: build it, run it on the host network, check /healthz and one paid aggregate (the
# README's curl lines), tear everything down. Skips, with a message and exit 0, where no Docker daemon answers.
#   docker/smoke.sh                      # from the repository root, or anywhere
# Build arguments from the environment (see the Dockerfile): BASE_IMAGE, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
# PIP_TRUSTED_HOST, and CA_BUNDLE, a path on this host (e.g. /etc/ssl/certs/ca-certificates.crt) copied into
# docker/ca/ for the build. PORT (default: a free one) is where the container listens; TAG the image
# (default darrm-opt:smoke). It prints the build's seconds and the image's size; KEEP_IMAGE=1 keeps the image.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! docker info >/dev/null 2>&1; then
  echo "smoke.sh: skipped: no Docker daemon answers ('docker info' failed)"
  exit 0
fi
TAG=${TAG:-darrm-opt:smoke}
NAME=darrm-smoke-$$
VOLUME=darrm-smoke-data-$$
PORT=${PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
KEY=smoke-key
args=()
for var in BASE_IMAGE PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST; do
  if [ -n "${!var:-}" ]; then args+=(--build-arg "$var=${!var}"); fi
done
ca_copy=""
cleanup() {
  docker rm -f "$NAME" >/dev/null 2>&1 || true
  docker volume rm "$VOLUME" >/dev/null 2>&1 || true
  [ -z "$ca_copy" ] || rm -f "$ca_copy"
  [ "${KEEP_IMAGE:-0}" = 1 ] || docker rmi "$TAG" >/dev/null 2>&1 || true
}
trap cleanup EXIT
if [ -n "${CA_BUNDLE:-}" ]; then
  ca_copy=docker/ca/smoke.pem  # one name, so that an unchanged bundle keeps the cached layers
  cp "$CA_BUNDLE" "$ca_copy"
  args+=(--build-arg "CA_BUNDLE=$(basename "$ca_copy")")
fi

start=$(date +%s.%N)
docker build --network host "${args[@]}" -t "$TAG" .
build_s=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
size=$(docker image inspect "$TAG" --format '{{.Size}}')
echo "smoke.sh: built $TAG in ${build_s} s, image size $((size / 1000000)) MB"

docker run -d --name "$NAME" --network host -v "$VOLUME:/data" -e DARRM_API_KEYS="$KEY" "$TAG" \
  darrm-opt serve --host 127.0.0.1 --port "$PORT" --database-url sqlite:////data/darrm.db >/dev/null
for _ in $(seq 60); do
  curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null || { docker logs "$NAME" >&2; echo "smoke.sh: /healthz never answered" >&2; exit 1; }
echo "smoke.sh: /healthz answers 200"

H="Authorization: Bearer $KEY"; J='Content-Type: application/json'; U="http://127.0.0.1:$PORT"
field() { python3 -c "import json, sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }
T=$(curl -sf -H "$H" -H "$J" -d '{"K": 11, "m": 3}' "$U/v1/tables" | field id)
L=$(curl -sf -H "$H" -H "$J" -d '{"name": "job-1", "epsilon_budget": 1, "delta_budget": 1e-4}' "$U/v1/ledgers" | field id)
out=$(curl -sf -H "$H" -H "$J" -d "{\"table_id\": \"$T\", \"ledger_id\": \"$L\", \"votes\": [[1,1,1,1,1,1,0,0,0,0,0]]}" "$U/v1/aggregate")
echo "smoke.sh: aggregate: $out"
echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert len(r["answers"]) == 1 and r["answers"][0] in (0, 1), r
assert abs(r["epsilon_spent"] - 0.2997039) < 1e-6 and r["composition"] == "exact", r  # as the README says
'
docker exec "$NAME" test -s /data/darrm.db  # the ledger lives in the volume
echo "smoke.sh: ok (the ledger is in the /data volume); tearing down"
