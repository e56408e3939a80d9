/*
 * glibc's malloc_trim(0) for Node (N-API, usable from worker threads).
 *
 * Memory onnxruntime frees when a session is released stays in glibc's arenas, so a worker's RSS
 * does not fall after a model is evicted. MALLOC_TRIM_THRESHOLD_=0 makes glibc give it back on
 * every free, but also makes every large allocation a fresh mmap with its page faults: about 20 %
 * of inference throughput (bench: 63 vs 79 ms per batch). Trimming once, after an unload, returns
 * the same memory without that cost. Elsewhere than glibc it does nothing and returns false.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  bool released = false;
#if defined(__GLIBC__)
  released = malloc_trim(0) != 0;
#endif
  napi_value result;
  if (napi_get_boolean(env, released, &result) != napi_ok) return NULL;
  return result;
}

static napi_value Supported(napi_env env, napi_callback_info info) {
  (void)info;
#if defined(__GLIBC__)
  bool supported = true;
#else
  bool supported = false;
#endif
  napi_value result;
  if (napi_get_boolean(env, supported, &result) != napi_ok) return NULL;
  return result;
}

NAPI_MODULE_INIT() {
  napi_value trim;
  napi_value supported;
  if (napi_create_function(env, "mallocTrim", NAPI_AUTO_LENGTH, Trim, NULL, &trim) != napi_ok) return NULL;
  if (napi_create_function(env, "supported", NAPI_AUTO_LENGTH, Supported, NULL, &supported) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "mallocTrim", trim) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "supported", supported) != napi_ok) return NULL;
  return exports;
}
