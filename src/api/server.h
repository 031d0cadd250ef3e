// prefixd api — the HTTP front end: OpenAI-compatible routes over one Scheduler.
//
// Owns: routing requests to their handlers, auth, health, models, metrics and the web UI's files;
// the protocol adapters (Chat Completions and Completions, Messages, Responses), which parse and
// validate requests and write their replies as JSON or SSE around one chat pipeline
// (chat/chat_service.h: rendering the chat template, tokenizing, submitting, collecting or
// streaming the reply, predicting the next turn); the cache's views and control plane.
// Must not know: KV layouts, sequence ids, the cache's structures: it fills CacheOptions, reads
// CacheReport and the stats, and asks the cache's admin face (cache/cache_admin.h) through
// Scheduler::ask_cache; it never sees PrefixCache.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/control/cache_isolation.h"
#include "api/body/json_bounds.h"
#include "api/images/image_input.h"
#include "api/routing/cache_routing.h"
#include "api/stream_relay.h"
#include "api/structured/json_schema_grammar.h"
#include "api/auth/tenants.h"
#include "engine/engine.h"
#include "http/server.h"
#include "metrics/registry.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

struct ServerOptions {
  http::ServerOptions http;               // address, workers, connection limits and timeouts
  std::string api_key;                    // one admin key of the default tenant; empty: see `keys`
  // The key ring (--api-keys), reloaded by its owner; null with an empty api_key: no auth, every
  // request is the default tenant's.
  std::shared_ptr<KeyStore> keys;
  std::string model_alias;                // served model id; empty: the engine's model id
  // A Jinja chat template to use instead of the model's (--chat-template-file); empty: the
  // model's. The server refuses to start when it does not parse.
  std::string chat_template;
  bool metrics = true;                    // serve GET /metrics
  bool webui = true;                      // serve the web UI at / (--no-webui: off)
  std::string webui_dir;                  // serve the UI's files from this folder; empty: the built-in ones
  bool cache_prompt_default = true;       // false: --no-cache-prompt, every request bypasses
  std::string artifact_dir;               // POST /v1/cache/save and /load; empty: off
  std::string slot_save_path;             // --slot-save-path: /slots save and restore; empty: off
  bool allow_special_in_content = false;  // special-token strings in messages act as control tokens
  CacheIsolation cache_isolation = CacheIsolation::tenant;
  std::string cache_shared_prefix;        // text every session of a tenant shares (session isolation)
  std::int32_t slots = 0;                 // requests decoded at once (reported in /v1/cache/summary)
  std::uint32_t default_seed = engine::kRandomSeed;  // --seed: the seed of requests that send none
  // --embd-normalize: how embeddings are normalized unless a request says (embeddings.h)
  std::int32_t embd_normalize = 2;
  // The starting scale of each LoRA adapter the engine loaded, by id (--lora 1, --lora-scaled its
  // own, 0 under --lora-init-without-apply); missing ones start at 1. POST /lora-adapters changes them.
  std::vector<float> lora_scales;
  GrammarLimits grammar_limits;           // --max-grammar-rules
  // --stream-keepalive: the longest a streamed reply stays silent before a keep-alive (stream_relay.h)
  std::chrono::milliseconds stream_keep_alive = kKeepAliveInterval;
  std::size_t response_store_bytes = 64u << 20;          // --response-store-bytes (response_store.h)
  std::int64_t response_ttl_seconds = 3600;               // --response-ttl
  std::size_t max_json_nodes = kDefaultMaxJsonNodes;  // --max-json-nodes: values a request body may hold
  // --max-images, --max-image-bytes; images are refused whatever they say without a projector.
  ImageLimits images{.max_images = 16};
  // Called on the HTTP worker before each request is handled and after its response is handed
  // over, with the size of its body (http::Handlers::began, finished); either may be empty.
  std::function<void(std::size_t body_bytes)> request_began;
  std::function<void(std::size_t body_bytes)> request_ended;
  // Where KV events are published (GET /v1/cache/summary advertises it to routers).
  KvEventsAdvert kv_events;
  // Adds the families of parts the server does not own (the KV event publisher) to /metrics.
  std::function<void(metrics::Registry&)> extra_metrics;
};

class HttpServer {
 public:
  // `engine` is used only through its thread-safe parts (model(), vocab()).
  HttpServer(const engine::Engine& engine, scheduler::Scheduler& scheduler, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and serves until a shutdown has drained; returns false (with a logged reason) if
  // binding fails.
  bool run();
  // Stops accepting, lets requests in flight finish for up to `grace`, then ends the rest (a
  // stream with an error event, a waiting request with 503). Thread-safe, callable before run().
  void shutdown(std::chrono::milliseconds grace);
  void stop() { shutdown(std::chrono::milliseconds(0)); }
  int bound_port() const;
  http::ServerStats transport_stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd::api
