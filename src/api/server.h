// prefixd api — the HTTP front end: OpenAI-compatible routes over one Scheduler.
//
// Owns: parsing and validating requests, rendering the chat template, tokenizing, turning
// scheduler streams into OpenAI JSON / SSE, auth, health, models.
// Must not know: KV layouts, sequence ids, the cache's structures (it only fills CacheOptions and
// reads CacheReport).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "api/cache_isolation.h"
#include "api/tenants.h"
#include "engine/engine.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;                    // one admin key of the default tenant; empty: see `keys`
  // The key ring (--api-keys), reloaded by its owner; null with an empty api_key: no auth, every
  // request is the default tenant's.
  std::shared_ptr<KeyStore> keys;
  std::string model_alias;                // served model id; empty: the engine's model id
  std::size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  int http_threads = 8;
  bool metrics = true;                    // serve GET /metrics
  bool cache_prompt_default = true;       // false: --no-cache-prompt, every request bypasses
  std::string artifact_dir;               // POST /v1/cache/save and /load; empty: off
  CacheIsolation cache_isolation = CacheIsolation::tenant;
  std::string cache_shared_prefix;        // text every session of a tenant shares (session isolation)
};

class HttpServer {
 public:
  // `engine` is used only through its thread-safe parts (model(), vocab()).
  HttpServer(const engine::Engine& engine, scheduler::Scheduler& scheduler, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and serves until stop(); returns false (with a logged reason) if binding fails.
  bool run();
  void stop();
  int bound_port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd::api
