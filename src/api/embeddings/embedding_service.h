// prefixd api — embeddings and rerank scores through the scheduler: POST /v1/embeddings,
// /embedding and /v1/rerank (with /rerank). Each input (each query-document pair) is a request of
// its own, submitted together so that the scheduler computes them in shared batches. On a causal
// model that pools its last token, an input's prefix may come from the prompt cache as any
// prompt's does (scheduler::EmbedMode::last_row); other poolings compute each input whole in one
// call, outside the cache.
#pragma once

#include <atomic>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <vector>

#include "api/chat/chat_service.h"
#include "api/embeddings/embedding_request.h"
#include "api/route_support.h"
#include "engine/engine.h"
#include "http/server.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

class EmbeddingService {
 public:
  // Every reference must outlive the service. `slots`: the requests the scheduler runs at once,
  // which bounds the inputs of one request in flight (twice that).
  EmbeddingService(const engine::Engine& engine, scheduler::Scheduler& scheduler, ChatService& chats,
                   const std::atomic<bool>& stopping, std::string served_id, std::int32_t slots,
                   std::int32_t default_normalize);

  http::Response embeddings(const RouteContext& route, http::Request& req, EmbeddingsEndpoint endpoint);
  http::Response rerank(const RouteContext& route, http::Request& req);

 private:
  struct Computed {
    std::vector<float> embedding;  // as the engine gave it
    std::int32_t prompt_tokens = 0;
    std::int32_t cached_tokens = 0;
  };
  // The inputs' embeddings, in input order; `params` names each input in errors.
  std::expected<std::vector<Computed>, ApiError> compute(std::vector<TokenPrompt> inputs,
                                                         std::span<const std::string> params, const CacheFields& cache,
                                                         const std::string& tenant, bool per_token,
                                                         const http::Request& req);

  const engine::Engine& engine_;
  scheduler::Scheduler& scheduler_;
  ChatService& chats_;
  const std::atomic<bool>& stopping_;
  std::string served_id_;
  std::size_t window_;
  std::int32_t default_normalize_;
};

}  // namespace prefixd::api
