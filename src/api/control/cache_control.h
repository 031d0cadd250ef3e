// prefixd api — the prompt cache's control plane: GET /v1/cache/capabilities and the operations
// under /v1/cache/ (set, update, fork, clear, meta, token_count, prepare_modules, save, load).
//
// Keys live in the caller's tenant (cache_keys.h): a tenant's API key steers only its own keys;
// the admin key steers the default tenant's unless the body names `tenant`. Every reply has one
// stable shape: success {"supported": true, "operation", ...}; an operation this server cannot do
// {"supported": false, "operation", "code": "prompt_cache_unsupported", "capabilities"}; any other
// failure {"supported": false, "operation", "code": "prompt_cache_error", "reason", "message",
// "capabilities", "error": {the OpenAI error object}} with the HTTP status that fits.
//
// Operations that compute K/V (update, set with messages, prepare_modules) submit prefill-only
// requests to the scheduler, so they queue, batch and share prefixes like any request; the ones
// that read or drop K/V run on the scheduler thread through Scheduler::ask_cache (the
// cache's admin face, cache/cache_admin.h).
#pragma once

#include <array>
#include <atomic>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "metrics/registry.h"
#include "api/auth/access.h"
#include "api/control/cache_isolation.h"
#include "api/control/cache_keys.h"
#include "api/prompt/prompt_builder.h"
#include "api/openai/request_parser.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

struct ControlOptions {
  std::filesystem::path artifact_dir;  // save and load; empty: unsupported
  std::string model_key;               // the model fingerprint: the root of module fingerprints
};

// A control-plane operation: the path after /v1/cache/, and whether GET and POST answer it.
struct CacheOperation {
  std::string_view name;
  bool get = false;
  bool post = false;
};

struct ControlReply {
  int status = 200;
  nlohmann::ordered_json body;
};

class CacheControl {
 public:
  // `prompts` and `scheduler` must outlive this object.
  CacheControl(const PromptBuilder& prompts, scheduler::Scheduler& scheduler, ParseOptions parse, ControlOptions options);

  // The control plane's operations (each the path after /v1/cache/) and the methods each answers.
  static std::span<const CacheOperation> operations();

  nlohmann::ordered_json capabilities() const;
  // One operation. `query_key` is the `key` query parameter (GET meta / token_count).
  ControlReply handle(std::string_view operation, std::string_view method, const Caller& caller, std::string_view body,
                      std::string_view query_key);

  // A generation request naming `prompt_cache_key`: a key's family session, and under session
  // isolation the longest prepared module chain the prompt starts with as the shared prefix.
  void adjust(scheduler::GenerationRequest& request, const std::string& tenant, const std::string& prompt_cache_key) const;

  // For GET /v1/cache/stats: the tenant's keys' caller metadata and their number.
  nlohmann::ordered_json meta_by_key(const std::string& tenant) const { return keys_.meta_by_key(tenant); }
  std::size_t key_count(const std::string& tenant) const { return keys_.key_count(tenant); }
  nlohmann::ordered_json key_list(const std::string& tenant) const { return keys_.key_list(tenant); }
  // Its /metrics families: operations by result, keys and modules held, tokens it fed.
  void add_metrics(metrics::Registry& registry) const;

 private:
  struct Context;  // one operation's caller, body and name (cache_control.cpp)
  struct Prefilled {
    scheduler::GenerationRequest request;  // as submitted (its prompt, cache options)
    scheduler::CacheReport report;
  };

  ControlReply dispatch(std::string_view operation, std::string_view method, const Caller& caller, std::string_view body,
                        std::string_view query_key);
  ControlReply set(Context& c);
  ControlReply update(Context& c);
  ControlReply fork(Context& c);
  ControlReply clear(Context& c);
  ControlReply meta(Context& c);
  ControlReply token_count(Context& c);
  ControlReply prepare_modules(Context& c);  // cache_control_modules.cpp
  ControlReply save(Context& c);             // cache_control_artifacts.cpp
  ControlReply load(Context& c);

  // The generation request a key's conversation renders to, under `session` (empty: none).
  std::expected<scheduler::GenerationRequest, ApiError> build(const KeyConversation& conversation, const std::string& session,
                                                              const std::string& tenant) const;
  // Feeds `request`'s whole prompt without sampling and waits for it.
  std::expected<Prefilled, ApiError> prefill(scheduler::GenerationRequest request);
  // Drops what the cache holds of `record`'s tokens past what other keys and modules share.
  cache::ResetReport forget(const std::string& tenant, const KeyRecord& record);
  // Clears keys whose TTL has passed.
  void expire_keys();
  ControlReply apply_update(Context& c, KeyRecord record, const nlohmann::ordered_json& body, bool created);

  const PromptBuilder& prompts_;
  scheduler::Scheduler& scheduler_;
  ParseOptions parse_;
  ControlOptions options_;
  KeyRegistry keys_;
  // The loaded model's reuse mode, fixed at load: read once, not from a stats snapshot per call.
  bool resumes_at_checkpoints_;
  // Operations answered, by operation (index in the operation table) and result (ok, error,
  // unsupported); tokens fed by the control plane's prefills.
  static constexpr std::size_t kOperationCount = 10;
  std::array<std::array<std::atomic<std::int64_t>, 3>, kOperationCount> answered_{};
  std::atomic<std::int64_t> prefill_tokens_{0};
};

}  // namespace prefixd::api
