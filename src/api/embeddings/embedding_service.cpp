#include "api/embeddings/embedding_service.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <format>
#include <memory>
#include <numeric>
#include <utility>

#include "api/embeddings/embedding_vectors.h"
#include "api/output.h"

namespace prefixd::api {
namespace {

using nlohmann::json;
using scheduler::EmbedMode;

constexpr std::chrono::milliseconds kPoll{50};

ApiError not_an_embedding_server() {
  return invalid_request("this server generates text: start it with --embeddings (or --reranking for a reranker) to "
                         "serve embeddings", "embeddings_not_enabled");
}

// The engine's vectors for one input: one pooled vector, or one per token.
std::vector<std::vector<float>> rows_of(const std::vector<float>& flat, std::int32_t width) {
  std::vector<std::vector<float>> rows;
  for (std::size_t at = 0; at + static_cast<std::size_t>(width) <= flat.size(); at += static_cast<std::size_t>(width)) {
    rows.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at), flat.begin() + static_cast<std::ptrdiff_t>(at + width));
  }
  return rows;
}

}  // namespace

EmbeddingService::EmbeddingService(const engine::Engine& engine, scheduler::Scheduler& scheduler, ChatService& chats,
                                   const std::atomic<bool>& stopping, std::string served_id, std::int32_t slots,
                                   std::int32_t default_normalize)
    : engine_(engine),
      scheduler_(scheduler),
      chats_(chats),
      stopping_(stopping),
      served_id_(std::move(served_id)),
      window_(static_cast<std::size_t>(std::max(2 * slots, 2))),
      default_normalize_(default_normalize) {}

std::expected<std::vector<EmbeddingService::Computed>, ApiError> EmbeddingService::compute(
    std::vector<TokenPrompt> inputs, std::span<const std::string> params, const CacheFields& cache,
    const std::string& tenant, bool per_token, const http::Request& req) {
  const engine::ModelInfo& model = engine_.model();
  // A causal model pooling its last token reads nothing but that token's row: the rest may be cached.
  const EmbedMode mode = model.has_memory && model.pooling == engine::Pooling::last ? EmbedMode::last_row
                                                                                     : EmbedMode::whole_prompt;
  const std::int32_t most = mode == EmbedMode::whole_prompt ? std::min(engine_.batch_size(), chats_.max_prompt_tokens())
                                                            : chats_.max_prompt_tokens();
  std::vector<scheduler::GenerationRequest> requests;
  requests.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) return std::unexpected(invalid_param(params[i], std::format("'{}' has no tokens", params[i])));
    const auto n = static_cast<std::int32_t>(inputs[i].size());
    if (n > most) {
      ApiError error = context_length_exceeded(inputs[i].size(), static_cast<std::size_t>(most));
      error.param = params[i];
      if (mode == EmbedMode::whole_prompt && most == engine_.batch_size()) {
        error.message = std::format("'{}' has {} tokens; pooling {} computes an input in one call of at most {} tokens "
                                    "(--batch-size)", params[i], n, engine::pooling_name(model.pooling), most);
      }
      return std::unexpected(std::move(error));
    }
    CompletionRequest completion;
    completion.params.cache = cache;
    completion.params.max_tokens = 1;
    completion.prompt = std::move(inputs[i]);
    auto request = chats_.prompt_of(completion, tenant);
    if (!request) {
      ApiError error = request.error();
      if (error.param == "prompt") error.param = params[i];
      return std::unexpected(std::move(error));
    }
    request->embed = mode;
    request->per_token = per_token && mode == EmbedMode::whole_prompt;
    requests.push_back(std::move(*request));
  }
  std::vector<Computed> out(requests.size());
  std::deque<std::pair<std::size_t, std::shared_ptr<scheduler::RequestStream>>> running;
  const auto cancel_all = [&running] {
    for (auto& [index, stream] : running) stream->cancel();
  };
  std::size_t next = 0;
  while (next < requests.size() || !running.empty()) {
    while (next < requests.size() && running.size() < window_) {
      if (stopping_) {
        cancel_all();
        return std::unexpected(server_shutting_down());
      }
      auto stream = scheduler_.submit(std::move(requests[next]));
      if (!stream) {
        cancel_all();
        return std::unexpected(submit_error(stream.error()));
      }
      running.emplace_back(next++, std::move(*stream));
    }
    auto& [index, stream] = running.front();
    const std::optional<scheduler::StreamEvent> event = stream->next(kPoll);
    if (!event) {
      if (auto stop = stop_reason(req)) {
        cancel_all();
        return std::unexpected(std::move(*stop));
      }
      continue;
    }
    if (event->kind != scheduler::StreamEvent::Kind::done) continue;
    if (event->finish == scheduler::FinishReason::error || event->finish == scheduler::FinishReason::cancelled ||
        event->embedding.empty()) {
      cancel_all();
      if (auto stop = stop_reason(req)) return std::unexpected(std::move(*stop));
      return std::unexpected(internal_error(event->error.empty() ? "the embedding was not computed" : event->error));
    }
    out[index] = Computed{.embedding = std::move(event->embedding),
                          .prompt_tokens = event->usage.prompt_tokens,
                          .cached_tokens = event->usage.cached_tokens};
    running.pop_front();
  }
  return out;
}

http::Response EmbeddingService::embeddings(const RouteContext& route, http::Request& req, EmbeddingsEndpoint endpoint) {
  const engine::ModelInfo& model = engine_.model();
  if (!model.embeddings) return error_response(not_an_embedding_server());
  if (model.pooling == engine::Pooling::rank) {
    return error_response(invalid_request("this server ranks documents (--reranking): POST /v1/rerank", "rerank_only"));
  }
  const bool per_token = model.pooling == engine::Pooling::none;
  if (per_token && endpoint == EmbeddingsEndpoint::openai) {
    return error_response(invalid_request("pooling none gives a vector per token, which /v1/embeddings cannot carry: "
                                          "POST /embedding, or start the server with --pooling mean, cls or last",
                                          "pooling_none"));
  }
  auto parsed = parse_embeddings_request(release_body(req), route.parse, endpoint, default_normalize_);
  if (!parsed) return error_response(parsed.error());
  if (parsed->dimensions && *parsed->dimensions != model.embedding_width) {
    return error_response(invalid_param(
        "dimensions", std::format("this model's embeddings have {} dimensions and cannot be shortened; got {}",
                                  model.embedding_width, *parsed->dimensions)));
  }
  const auto caller = route.caller(req);
  if (!caller) return error_response(caller.error());
  std::vector<TokenPrompt> inputs;
  std::vector<std::string> params;
  const bool several = parsed->inputs.size() > 1;
  for (std::size_t i = 0; i < parsed->inputs.size(); ++i) {
    params.push_back(several ? std::format("{}[{}]", parsed->param, i) : parsed->param);
    if (const auto* text = std::get_if<std::string>(&parsed->inputs[i])) {
      inputs.push_back(engine_.vocab().tokenize(*text, /*add_special=*/true, /*parse_special=*/true));
    } else {
      inputs.push_back(std::move(std::get<TokenPrompt>(parsed->inputs[i])));
    }
  }
  auto computed = compute(std::move(inputs), params, parsed->cache, caller->tenant, per_token, req);
  if (!computed) return error_response(computed.error());
  std::int64_t prompt_tokens = 0;
  std::int64_t cached_tokens = 0;
  for (const Computed& c : *computed) {
    prompt_tokens += c.prompt_tokens;
    cached_tokens += c.cached_tokens;
  }
  if (endpoint == EmbeddingsEndpoint::native) {
    // llama-server's shape: each input's vectors as a list (one per token under pooling none,
    // which are left as the model gave them).
    json body = json::array();
    for (std::size_t i = 0; i < computed->size(); ++i) {
      std::vector<std::vector<float>> rows = rows_of((*computed)[i].embedding, model.embedding_width);
      if (!per_token) rows.front() = normalized(rows.front(), parsed->normalize);
      body.push_back(json{{"index", i}, {"embedding", std::move(rows)}});
    }
    return json_response(200, dump_json(body));
  }
  json data = json::array();
  for (std::size_t i = 0; i < computed->size(); ++i) {
    const std::vector<float> vector = normalized((*computed)[i].embedding, parsed->normalize);
    json item{{"object", "embedding"}, {"index", i}};
    if (parsed->base64) {
      item["embedding"] = base64_floats(vector);
    } else {
      item["embedding"] = vector;
    }
    data.push_back(std::move(item));
  }
  const json body{{"object", "list"},
                  {"data", std::move(data)},
                  {"model", served_id_},
                  {"usage",
                   {{"prompt_tokens", prompt_tokens},
                    {"total_tokens", prompt_tokens},
                    {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}}}};
  return json_response(200, dump_json(body));
}

http::Response EmbeddingService::rerank(const RouteContext& route, http::Request& req) {
  const engine::ModelInfo& model = engine_.model();
  if (!model.embeddings) return error_response(not_an_embedding_server());
  if (model.pooling != engine::Pooling::rank) {
    return error_response(invalid_request(
        std::format("this server computes embeddings (pooling {}), not rerank scores: start it with --reranking and "
                    "a reranker model", engine::pooling_name(model.pooling)),
        "rerank_not_enabled"));
  }
  auto parsed = parse_rerank_request(release_body(req), route.parse);
  if (!parsed) return error_response(parsed.error());
  const auto caller = route.caller(req);
  if (!caller) return error_response(caller.error());
  std::vector<TokenPrompt> inputs;
  std::vector<std::string> params;
  const char* param = parsed->tei ? "texts" : "documents";
  for (std::size_t i = 0; i < parsed->documents.size(); ++i) {
    inputs.push_back(engine_.vocab().rerank_tokens(parsed->query, parsed->documents[i]));
    params.push_back(std::format("{}[{}]", param, i));
  }
  auto computed = compute(std::move(inputs), params, parsed->cache, caller->tenant, /*per_token=*/false, req);
  if (!computed) return error_response(computed.error());
  std::vector<std::size_t> order(computed->size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // The score is the classifier's first output, as llama-server reports it.
  const auto score = [&](std::size_t i) { return (*computed)[i].embedding.front(); };
  if (parsed->sort) std::ranges::stable_sort(order, [&](std::size_t a, std::size_t b) { return score(a) > score(b); });
  if (parsed->top_n && *parsed->top_n < order.size()) order.resize(*parsed->top_n);
  std::int64_t prompt_tokens = 0;
  for (const Computed& c : *computed) prompt_tokens += c.prompt_tokens;
  json results = json::array();
  for (const std::size_t i : order) {
    json item{{"index", i}, {parsed->tei ? "score" : "relevance_score", score(i)}};
    if (parsed->return_documents) {
      if (parsed->tei) {
        item["text"] = parsed->documents[i];
      } else {
        item["document"] = json{{"text", parsed->documents[i]}};
      }
    }
    results.push_back(std::move(item));
  }
  if (parsed->tei) return json_response(200, dump_json(results));
  const json body{{"object", "list"},
                  {"model", served_id_},
                  {"results", std::move(results)},
                  {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return json_response(200, dump_json(body));
}

}  // namespace prefixd::api
