#!/usr/bin/env bash
# A base image for the Dockerfile built from Debian's packages alone, for a machine that reaches a Debian
# mirror but no container registry (`docker pull python:3.11-slim` fails):
#   docker/debian-base.sh [TAG]   # default darrm-base:bookworm; needs root, debootstrap and a Docker daemon
#   docker build --build-arg BASE_IMAGE=darrm-base:bookworm -t darrm-opt .
# It holds Debian bookworm's Python 3.11 with pip and venv, `python` on the PATH, and the CA certificates.
# MIRROR (default http://deb.debian.org/debian) picks the Debian mirror.
set -euo pipefail
TAG=${1:-darrm-base:bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
command -v debootstrap >/dev/null || { echo "debian-base.sh: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
ROOTFS=$(mktemp -d)
trap 'rm -rf "$ROOTFS"' EXIT
debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,python-is-python3,ca-certificates \
  bookworm "$ROOTFS" "$MIRROR" >&2
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb
tar -C "$ROOTFS" -c . | docker import --change 'CMD ["python3"]' --change 'ENV LANG=C.UTF-8' - "$TAG"
echo "base image $TAG" >&2
