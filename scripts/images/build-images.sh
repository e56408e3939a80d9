#!/usr/bin/env bash
# Builds Shoal's images with the Docker engine on this machine (legacy builder, build cache kept):
# the CPU image always; the CUDA image when its base (nvidia/cuda…) is present or can be pulled,
# else it says why not. Base images that cannot be pulled are made first by make-local-bases.sh.
#
#   sudo scripts/images/build-images.sh
#
# Environment: SHOAL_IMAGE (shoal:cpu), SHOAL_CUDA_IMAGE (shoal:cuda), NODE_VERSION (24.22.3),
# SHOAL_BUILD_CUDA (auto | 0: skip the CUDA image). The build steps run in dockerd's containers, not
# under this script: to keep a build from starving a shared machine, start dockerd with `nice -n 10`.
# Prints `image <name> <bytes> <seconds>` lines (what test/images reads) besides the build log.
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE="${SHOAL_IMAGE:-shoal:cpu}"
CUDA_IMAGE="${SHOAL_CUDA_IMAGE:-shoal:cuda}"
NODE_VERSION="${NODE_VERSION:-24.22.3}"
BUILD_CUDA="${SHOAL_BUILD_CUDA:-auto}"
log() { printf '[build-images] %s\n' "$*"; }
# The legacy builder: BuildKit would pull its frontend image, and `# syntax=` lines with it.
build() { DOCKER_BUILDKIT=0 docker build --build-arg "NODE_VERSION=$NODE_VERSION" "$@"; }

start=$SECONDS
NODE_VERSION="$NODE_VERSION" scripts/images/make-local-bases.sh
log "bases ready in $((SECONDS - start)) s"

start=$SECONDS
build -f deploy/docker/Dockerfile -t "$IMAGE" . >/tmp/shoal-build-cpu.log 2>&1 \
  || { tail -40 /tmp/shoal-build-cpu.log; log "CPU image build failed (log: /tmp/shoal-build-cpu.log)"; exit 1; }
seconds=$((SECONDS - start))
grep -h '^slim-node-modules:' /tmp/shoal-build-cpu.log | sed 's/^/[build-images] /' || true
echo "image $IMAGE $(docker image inspect -f '{{.Size}}' "$IMAGE") $seconds"

cuda_base="$(sed -n 's/^ARG CUDA_IMAGE=//p' deploy/docker/Dockerfile.cuda)"
if [ "$BUILD_CUDA" = 0 ]; then
  echo "cuda-skipped SHOAL_BUILD_CUDA=0"
elif docker image inspect "$cuda_base" >/dev/null 2>&1 || timeout 60 docker pull -q "$cuda_base" >/dev/null 2>&1; then
  start=$SECONDS
  build -f deploy/docker/Dockerfile.cuda -t "$CUDA_IMAGE" . >/tmp/shoal-build-cuda.log 2>&1 \
    || { tail -40 /tmp/shoal-build-cuda.log; log "CUDA image build failed (log: /tmp/shoal-build-cuda.log)"; exit 1; }
  echo "image $CUDA_IMAGE $(docker image inspect -f '{{.Size}}' "$CUDA_IMAGE") $((SECONDS - start))"
else
  # CUDA's runtime libraries and cuDNN come only in NVIDIA's images (not in Debian main), so no
  # local base can stand in for it; the build stage would also download the CUDA provider.
  echo "cuda-skipped $cuda_base is not present and cannot be pulled (no registry reachable); CUDA and cuDNN come only from NVIDIA's images, so no local base is made for it"
fi
