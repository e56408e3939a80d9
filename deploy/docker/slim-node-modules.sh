#!/bin/sh
# Run in the images' build stage after `npm prune --omit=dev`: removes from node_modules what a
# Shoal process on this platform never loads (docs/deploy.md "Image size" has the table).
#   deploy/docker/slim-node-modules.sh /app/node_modules [--keep-cuda]
# --keep-cuda keeps onnxruntime-node's CUDA and TensorRT providers (the CUDA image).
set -eu
modules="${1:?usage: slim-node-modules.sh NODE_MODULES [--keep-cuda]}"
keep_cuda="${2:-}"
cd "$modules"
platform="$(node -p process.platform)"
arch="$(node -p process.arch)"
before="$(du -sm . | cut -f1)"

# onnxruntime-node ships its prebuilt binding for every platform (darwin, win32, linux arm64…);
# keep this one's.
for dir in onnxruntime-node/bin/napi-v*/*/*; do
  [ -d "$dir" ] || continue
  case "$dir" in
    */"$platform/$arch") ;;
    *) rm -rf "$dir" ;;
  esac
done
find onnxruntime-node/bin -mindepth 1 -type d -empty -delete
test -f "onnxruntime-node/bin/napi-v6/$platform/$arch/onnxruntime_binding.node"
if [ "$keep_cuda" != "--keep-cuda" ]; then
  rm -f onnxruntime-node/bin/napi-v*/"$platform/$arch"/libonnxruntime_providers_cuda.so \
        onnxruntime-node/bin/napi-v*/"$platform/$arch"/libonnxruntime_providers_tensorrt.so
fi

# chromadb's native bindings serve its `chroma run` CLI (a local server); Shoal uses the HTTP client.
rm -rf chromadb-js-bindings-*
# LanceDB's optional embedding functions (transformers.js with onnxruntime-web, OpenAI's client) are
# required lazily, only when a table is created with them; Shoal computes its own vectors.
rm -rf @huggingface/transformers onnxruntime-web openai
# TypeScript: installed as @qdrant/js-client-rest's peer; nothing loads it at run time.
rm -rf typescript
# Source maps, type declarations, READMEs, changelogs: never loaded.
find . -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \
  -o -iname 'README*' -o -iname 'CHANGELOG*' -o -iname 'HISTORY.md' \) -delete

echo "slim-node-modules: ${before} MB -> $(du -sm . | cut -f1) MB"
