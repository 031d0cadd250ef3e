// HttpServer: routes, auth and error mapping over the HTTP transport (src/http). Request semantics
// live in the parser, the prompt builder, the responses and the relays; this file only wires them
// to HTTP.
#include "api/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <format>
#include <thread>
#include <type_traits>
#include <utility>

#include <spdlog/spdlog.h>

#include "api/auth/access.h"
#include "api/anthropic/anthropic_messages.h"
#include "api/anthropic/anthropic_stream.h"
#include "api/responses/response_store.h"
#include "api/responses/responses_api.h"
#include "api/responses/responses_stream.h"
#include "api/control/cache_control.h"
#include "api/control/cache_report.h"
#include "api/routing/cache_routing.h"
#include "api/control/cache_scope_report.h"
#include "api/control/cache_tree_report.h"
#include "api/errors.h"
#include "api/structured/output_grammar.h"
#include "api/prompt/prompt_builder.h"
#include "api/openai/request_parser.h"
#include "api/openai/responses.h"
#include "api/reasoning/reasoning.h"
#include "api/stream_relay.h"
#include "api/openai/tokenize_route.h"
#include "api/transport_metrics.h"
#include "cache/disk_format.h"
#include "webui/site.h"

namespace prefixd::api {
namespace {

constexpr const char* kJson = "application/json";

// Routes and the one method each answers, so that a wrong method gets 405 instead of 404.
struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/health", "GET"},          {"/v1/models", "GET"},           {"/v1/chat/completions", "POST"},
    {"/chat/completions", "POST"}, {"/v1/completions", "POST"},   {"/completions", "POST"},
    {"/metrics", "GET"},         {"/tokenize", "POST"},           {"/apply-template", "POST"},
    {"/v1/cache/stats", "GET"},  {"/v1/cache/reset", "POST"},
    {"/v1/cache/summary", "GET"}, {"/v1/cache/chain", "POST"}, {"/v1/cache/tree", "GET"}, {"/v1/messages", "POST"},
    {"/v1/messages/count_tokens", "POST"}, {"/v1/responses", "POST"},
};

constexpr std::string_view kResponsesPrefix = "/v1/responses/";

// Anthropic's routes answer errors in Anthropic's shape (anthropic_messages.h).
bool is_anthropic_route(std::string_view path) { return path == "/v1/messages" || path.starts_with("/v1/messages/"); }

// The control plane's operations live under this path (cache_control.h).
constexpr std::string_view kCachePrefix = "/v1/cache/";

const Route* find_route(std::string_view path) {
  for (const auto& route : kRoutes) {
    if (path == route.path) return &route;
  }
  return nullptr;
}

constexpr std::string_view kModelPrefix = "/v1/models/";

// Parsers copy what they keep, so a large body need not live on beside its parsed form.
std::string release_body(http::Request& req) { return std::exchange(req.body, {}); }

http::Response json_response(int status, std::string body) {
  return http::Response{.status = status, .content_type = kJson, .body = std::move(body)};
}

http::Response error_response(const ApiError& error) { return json_response(error.status, dump_json(error.to_json())); }

// A server-sent event stream that `relay` writes. Runs on the request's worker after the head is
// sent; a relay that never runs (the head could not be written) cancels its request when the
// response is dropped.
http::Response event_stream(std::shared_ptr<SseRelay> relay) {
  http::Response res{.status = 200, .content_type = "text/event-stream"};
  res.headers.push_back({"Cache-Control", "no-cache"});
  res.stream = [relay = std::move(relay)](http::ChunkWriter& out) {
    const auto write = [&out](std::string_view frame) { return out.write(frame); };
    while (relay->pump(write) == SseRelay::Step::more) {
    }
  };
  return res;
}

// Errors the transport answers by itself (malformed requests, size limits, shutdown).
http::Response transport_error(int status, std::string_view message, std::string_view code) {
  ApiError error{.status = status, .message = std::string(message), .code = std::string(code)};
  if (status >= 500) error.type = "server_error";
  return error_response(error);
}

ApiError submit_error(scheduler::SubmitError error) {
  const std::string message = scheduler::submit_error_message(error);
  switch (error) {
    case scheduler::SubmitError::queue_full: return server_busy(message);
    case scheduler::SubmitError::shutting_down: return server_busy(message);
    case scheduler::SubmitError::prompt_too_long:
      return ApiError{.status = 400, .message = message, .code = "context_length_exceeded"};
    case scheduler::SubmitError::empty_prompt: return invalid_request(message);
  }
  return internal_error(message);
}

// The web UI's files, unless --no-webui. Throws std::runtime_error for a --webui-dir it cannot use.
std::optional<webui::Site> web_site(const ServerOptions& options) {
  if (!options.webui) return std::nullopt;
  if (options.webui_dir.empty()) return webui::Site::builtin();
  try {
    return webui::Site::from_directory(options.webui_dir);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("--webui-dir: ") + e.what());
  }
}

// A UI file. The policy keeps the pages to this server: no script, style or connection elsewhere
// (the UI works offline, and nothing a model writes can load code); no-cache, so that a new
// binary's UI is seen at once.
http::Response web_file(webui::File file) {
  http::Response res{.status = 200, .content_type = std::move(file.content_type), .body = std::move(file.body)};
  res.headers.push_back({"Cache-Control", "no-cache"});
  res.headers.push_back({"X-Content-Type-Options", "nosniff"});
  res.headers.push_back({"Content-Security-Policy",
                         "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                         "connect-src 'self'; frame-ancestors 'none'"});
  return res;
}

// What the control plane parses the conversations it renders with (as chat requests are).
ParseOptions control_parse_options(const engine::Engine& engine, const ServerOptions& options, const std::string& served_id) {
  ParseOptions out;
  out.model_names = {served_id};
  out.cache_prompt_default = options.cache_prompt_default;
  out.vocab_size = engine.vocab().size();
  out.default_seed = options.default_seed;
  out.max_json_nodes = options.max_json_nodes;
  out.images = options.images;
  if (engine.vision() == nullptr) out.images.max_images = 0;
  return out;
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const engine::Engine& engine, scheduler::Scheduler& scheduler, ServerOptions options)
      : engine_(engine),
        scheduler_(scheduler),
        options_(std::move(options)),
        keys_(options_.keys != nullptr      ? options_.keys
              : options_.api_key.empty() ? nullptr
                                         : std::make_shared<KeyStore>(KeyRing::single(options_.api_key))),
        served_id_(options_.model_alias.empty() ? engine.model().id : options_.model_alias),
        prompts_(engine.vocab(), chat_template_for(options_.chat_template, engine.model(), engine.vocab()),
                 engine.model().fingerprint.empty() ? engine.model().id : engine.model().fingerprint,
                 engine.model().runtime_signature, PromptOptions{.allow_special_in_content = options_.allow_special_in_content,
                               .isolation = options_.cache_isolation,
                               .shared_prefix_text = options_.cache_shared_prefix,
                               .turn_boundaries = scheduler.cache_reuse_mode() == cache::ReuseMode::checkpoints,
                               .vision = engine.vision()}),
        control_(prompts_, scheduler_, control_parse_options(engine, options_, served_id_),
                 ControlOptions{.artifact_dir = options_.artifact_dir,
                                .model_key = engine.model().fingerprint.empty() ? engine.model().id : engine.model().fingerprint}),
        tool_format_(detect_tool_call_format(prompts_.chat_template().source())),
        site_(web_site(options_)),
        reasoning_(reasoning_syntax(prompts_.chat_template().source())),
        started_(unix_seconds()),
        transport_(options_.http, http::Handlers{
                                      .handle = [this](http::Request& req) { return handle(req); },
                                      .is_quick = [](const http::Request& req) { return req.path == "/health"; },
                                      .error = transport_error,
                                      .began = options_.request_began,
                                      .finished = options_.request_ended,
                                  }) {
    parse_options_.model_names = {served_id_};
    if (engine.model().id != served_id_) parse_options_.model_names.push_back(engine.model().id);
    parse_options_.cache_prompt_default = options_.cache_prompt_default;
    parse_options_.vocab_size = engine.vocab().size();
    parse_options_.default_seed = options_.default_seed;
    parse_options_.max_json_nodes = options_.max_json_nodes;
    parse_options_.images = options_.images;
    if (engine.vision() == nullptr) parse_options_.images.max_images = 0;
    spdlog::info("tool calls: the chat template writes them as {}", tool_call_format_name(tool_format_));
    if (reasoning_) spdlog::info("reasoning: the chat template has the model think between {} and {}", reasoning_->open, reasoning_->close);
    if (site_) spdlog::info("web UI at / (files {})", site_->origin());
  }

  bool run() {
    if (!transport_.listen()) return false;
    spdlog::info("listening on http://{}:{}", options_.http.host, transport_.bound_port());
    transport_.run();
    return true;
  }

  void shutdown(std::chrono::milliseconds grace) {
    stopping_ = true;  // new generations are refused at once
    transport_.shutdown(grace);
  }

  int bound_port() const { return transport_.bound_port(); }
  http::ServerStats transport_stats() const { return transport_.stats(); }

 private:
  // Every request but the quick ones runs here, on a transport worker. Nothing a request does may
  // take the server down: whatever escapes a handler becomes a 500.
  // Each request's method, path, status and handling time at debug level (--log-level debug); a
  // streamed reply's status is logged when its stream begins. The body is never logged.
  http::Response handle(http::Request& req) {
    const auto started = std::chrono::steady_clock::now();
    http::Response res = answer(req);
    spdlog::debug("{} {} -> {}{} ({:.1f} ms)", req.method, req.path, res.status, res.stream ? " (stream)" : "",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
    return res;
  }

  http::Response answer(http::Request& req) {
    const auto fail = [&req](const ApiError& error) {
      return is_anthropic_route(req.path) ? json_response(error.status, dump_json(anthropic_error_json(error)))
                                          : error_response(error);
    };
    try {
      // The UI's files hold nothing of the server's: they load without a key and ask for one.
      const bool public_path = req.path == "/health" || (site_ && webui::Site::is_ui_path(req.path));
      if (keys_ != nullptr && !public_path && !caller_of(req)) return fail(unauthorized());
      if (req.method == "POST" && req.path == "/v1/messages") return serve_messages(req, MessagesRoute::create);
      if (req.method == "POST" && req.path == "/v1/messages/count_tokens") return serve_messages(req, MessagesRoute::count_tokens);
      http::Response res = route(req);
      if (is_anthropic_route(req.path) && res.status >= 400) {
        // A wrong method or an unknown path under /v1/messages: the same refusal in Anthropic's shape.
        const auto body = nlohmann::json::parse(res.body, nullptr, false);
        if (body.is_object() && body.contains("error")) {
          res.body = dump_json(anthropic_error_json(ApiError{.status = res.status, .message = body["error"].value("message", "")}));
        }
      }
      return res;
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      return fail(internal_error(std::string("internal error: ") + e.what()));
    }
  }

  http::Response route(http::Request& req) {
    const bool get = req.method == "GET";
    const bool post = req.method == "POST";
    // HEAD is answered where a GET has no effect and never streams: the health check and the UI's
    // files (the transport drops the body).
    const bool get_or_head = get || req.method == "HEAD";
    const std::string& path = req.path;
    if (get_or_head && path == "/health") return json_response(200, R"({"status":"ok"})");
    if (get_or_head && site_ && webui::Site::is_ui_path(path)) {
      if (auto file = site_->find(path)) return web_file(std::move(*file));
      return error_response(ApiError{.status = 404, .message = std::format("the web UI has no file {}", path), .code = "not_found"});
    }
    if (get && path == "/v1/models") return json_response(200, dump_json(models_body(served_id_, engine_.model(), started_)));
    if (get && path.starts_with(kModelPrefix) && path.size() > kModelPrefix.size()) return model(path.substr(kModelPrefix.size()));
    // A prompt that cannot fit is refused from the raw body, before it is parsed and copied.
    if (post && (path == "/v1/chat/completions" || path == "/chat/completions")) {
      if (auto refused = prompts_.refuse_oversized_chat(req.body, scheduler_.max_prompt_tokens())) {
        return error_response(*refused);
      }
      return serve(req, parse_chat_request(release_body(req), parse_options_), Endpoint::chat);
    }
    if (post && (path == "/v1/completions" || path == "/completions")) {
      if (auto refused = prompts_.refuse_oversized_completion(req.body, scheduler_.max_prompt_tokens())) {
        return error_response(*refused);
      }
      return serve(req, parse_completion_request(release_body(req), parse_options_), Endpoint::completion);
    }
    // llama.cpp's helper routes: what a prompt becomes, so clients (and tests) can count tokens.
    if (post && path == "/v1/responses") return serve_responses(req);
    if (path.starts_with(kResponsesPrefix) && path.size() > kResponsesPrefix.size()) {
      const std::string id = path.substr(kResponsesPrefix.size());
      if (get) return stored_response(req, id, false);
      if (req.method == "DELETE") return stored_response(req, id, true);
      http::Response res = error_response(ApiError{.status = 405, .message = std::format("{} is not allowed on {}; use GET or DELETE", req.method, path),
                                                   .code = "method_not_allowed"});
      res.headers.push_back({"Allow", "GET, DELETE"});
      return res;
    }
    if (post && path == "/tokenize") {
      auto answer = tokenize_answer(req.body, prompts_, parse_options_, scheduler_.max_prompt_tokens());
      if (!answer) return error_response(answer.error());
      return json_response(200, dump_json(*answer));
    }
    if (post && path == "/apply-template") return apply_template(req);
    if (get && path == "/metrics" && options_.metrics) return metrics(req);
    if (get && path == "/v1/cache/stats") {
      const auto tenant = viewed_tenant(req);
      if (!tenant) return error_response(tenant.error());
      nlohmann::ordered_json view = cache_view_json(scheduler_.cache_stats(), engine_.model(), *tenant, TenantNames(keys_.get()));
      // The control plane's keys of the tenant viewed (an admin viewing every tenant: its own).
      const std::string key_tenant = tenant->value_or(caller_of(req).value_or(Caller{}).tenant);
      view["keys"] = control_.key_count(key_tenant);
      view["meta_by_key"] = control_.meta_by_key(key_tenant);
      view["key_list"] = control_.key_list(key_tenant);
      const scheduler::SchedulerStats stats = scheduler_.stats();
      // Server-wide, so only in the whole cache's view: the prefill time the cache saved.
      if (!*tenant) view["seconds_saved"] = stats.prefill_seconds_saved;
      if (engine_.vision() != nullptr) {
        view["images"] = {{"total", stats.images_total},
                          {"cached", stats.images_cached_total},
                          {"encoded", stats.images_encoded_total},
                          {"embedding_hits", stats.image_embedding_hits_total},
                          {"embeddings", stats.image_embeddings},
                          {"embedding_bytes", stats.image_embedding_bytes},
                          {"embedding_capacity_bytes", stats.image_embedding_capacity_bytes}};
      }
      return json_response(200, view.dump());
    }
    if (post && path == "/v1/cache/reset") {
      const auto tenant = reset_tenant(req);
      if (!tenant) return error_response(tenant.error());
      const cache::ResetReport report =
          scheduler_.reset_cache(*tenant ? std::optional(tenant_scope(**tenant)) : std::nullopt);
      spdlog::info("cache reset ({}): freed {} entries, {} bytes", tenant->value_or("every tenant"), report.entries,
                   report.bytes);
      return json_response(200, cache_reset_json(report).dump());
    }
    if (get && path == "/v1/cache/summary") return cache_summary(req);
    if (get && path == "/v1/cache/tree") return cache_tree(req);
    if (post && path == "/v1/cache/chain") return cache_chain(req);
    if (path.starts_with(kCachePrefix)) {
      const std::string_view operation = std::string_view(path).substr(kCachePrefix.size());
      if (const char* methods = CacheControl::methods_of(operation)) return cache_control(req, operation, methods);
    }
    return no_route(req);
  }

  // 405 for a known path asked with the wrong method (with Allow), else 404.
  http::Response no_route(const http::Request& req) const {
    const Route* route = find_route(req.path);
    if (route != nullptr && (options_.metrics || req.path != "/metrics")) {
      http::Response res = error_response(ApiError{
          .status = 405,
          .message = std::format("{} is not allowed on {}; use {}", req.method, req.path, route->method),
          .code = "method_not_allowed"});
      res.headers.push_back({"Allow", route->method});
      return res;
    }
    return error_response(ApiError{.status = 404, .message = std::format("no route for {} {}", req.method, req.path),
                                   .code = "not_found"});
  }

  http::Response model(const std::string& id) const {
    if (std::ranges::find(parse_options_.model_names, id) == parse_options_.model_names.end()) {
      return error_response(model_not_found(id));
    }
    return json_response(200, dump_json(model_body(served_id_, engine_.model(), started_)));
  }

  http::Response metrics(const http::Request& req) const {
    const auto admin = caller_of(req).and_then([](const Caller& c) { return require_admin(c, "/metrics"); });
    if (!admin) return error_response(admin.error());
    const scheduler::SchedulerStats stats = scheduler_.stats();
    const cache::CacheStats cache = scheduler_.cache_stats();
    metrics::Registry registry;
    add_scheduler_metrics(registry, stats);
    add_cache_metrics(registry, cache);
    add_tenant_metrics(registry, cache, TenantNames(keys_.get()));
    control_.add_metrics(registry);
    add_transport_metrics(registry, transport_.stats());
    return http::Response{.status = 200, .content_type = "text/plain; version=0.0.4; charset=utf-8", .body = registry.text()};
  }

  // GET /v1/cache/summary (cache_routing.h): scoped like /metrics, it names every tenant's prefixes.
  http::Response cache_summary(const http::Request& req) {
    const auto admin = caller_of(req).and_then([](const Caller& c) { return require_admin(c, "/v1/cache/summary"); });
    if (!admin) return error_response(admin.error());
    const auto since = parse_since(req.query_param("since"));
    if (!since) return error_response(since.error());
    cache::CacheSummary summary;
    if (!scheduler_.ask_cache([&](cache::CacheAdmin& cache) { summary = cache.summary(*since); })) {
      return error_response(shutting_down_error());
    }
    const scheduler::SchedulerStats stats = scheduler_.stats();
    const cache::CacheConfig& config = scheduler_.cache_config();
    const SummaryHeader header{.server_id = server_id_, .block_size = config.block_size,
                               .hash = cache::hash_algorithm_name(config.hash), .running = stats.running,
                               .queued = stats.queued, .slots = options_.slots};
    return json_response(200, dump_json(cache_summary_json(header, summary)));
  }

  // GET /v1/cache/tree (cache_tree_report.h): scoped like /v1/cache/stats; `limit` bounds the nodes.
  http::Response cache_tree(const http::Request& req) {
    const auto tenant = viewed_tenant(req);
    if (!tenant) return error_response(tenant.error());
    cache::TreeQuery query;
    if (*tenant) query.scope = tenant_scope(**tenant);
    const auto limit = parse_tree_limit(req.query_param("limit"));
    if (!limit) return error_response(limit.error());
    if (*limit) query.node_limit = **limit;
    cache::CacheTree tree;
    if (!scheduler_.ask_cache([&](cache::CacheAdmin& cache) { tree = cache.tree(query); })) {
      return error_response(shutting_down_error());
    }
    return json_response(200, dump_json(cache_tree_json(tree, engine_.vocab(), TenantNames(keys_.get()))));
  }

  // POST /v1/cache/chain (cache_routing.h): the request's prompt and cache key built exactly as
  // serve() builds them for this caller, hashed on the engine thread; nothing is queued or kept.
  http::Response cache_chain(const http::Request& req) {
    const auto query = parse_chain_query(req.body, parse_options_.max_json_nodes);
    if (!query) return error_response(query.error());
    const auto caller = caller_of(req);
    if (!caller) return error_response(caller.error());
    std::expected<scheduler::GenerationRequest, ApiError> generation = std::unexpected(ApiError{});
    std::string session;
    if (query->endpoint == Endpoint::chat) {
      if (auto refused = prompts_.refuse_oversized_chat(query->request_body, scheduler_.max_prompt_tokens())) {
        return error_response(*refused);
      }
      auto parsed = parse_chat_request(query->request_body, parse_options_);
      if (parsed) session = parsed->params.cache.session_key;
      generation = build(std::move(parsed), caller->tenant);
    } else {
      if (auto refused = prompts_.refuse_oversized_completion(query->request_body, scheduler_.max_prompt_tokens())) {
        return error_response(*refused);
      }
      auto parsed = parse_completion_request(query->request_body, parse_options_);
      if (parsed) session = parsed->params.cache.session_key;
      generation = build(std::move(parsed), caller->tenant);
    }
    if (!generation) return error_response(generation.error());
    if (generation->cache.enabled) control_.adjust(*generation, caller->tenant, session);
    std::vector<cache::Digest> blocks;
    if (generation->cache.enabled) {
      const cache::RequestKey key = scheduler::cache_key(generation->cache);
      if (!scheduler_.ask_cache([&](cache::CacheAdmin& cache) { blocks = cache.chain_of(key, generation->prompt); })) {
        return error_response(shutting_down_error());
      }
    }
    return json_response(200, dump_json(cache_chain_json(model_key_, scheduler_.cache_config().block_size,
                                                          generation->prompt.size(), blocks)));
  }

  // The caller of a request (access.h).
  std::expected<Caller, ApiError> caller_of(const http::Request& req) const {
    return identify(keys_.get(), std::string(req.header("Authorization")), std::string(req.header("X-Api-Key")));
  }

  // The tenant a cache view or reset covers (access.h, view_tenant); nullopt: every tenant.
  std::expected<std::optional<std::string>, ApiError> viewed_tenant(const http::Request& req) const {
    return caller_of(req).and_then([&](const Caller& c) { return view_tenant(c, req.query_param("tenant")); });
  }

  // The tenant a reset covers: `?tenant=ID` or `{"tenant": ID}` in the body (the same one when
  // both are given), else the caller's own (an admin's: every tenant). A body field the reset
  // does not know is refused rather than ignored: the client meant something by it.
  std::expected<std::optional<std::string>, ApiError> reset_tenant(const http::Request& req) const {
    auto body = parse_json_object(req.body.empty() ? std::string_view("{}") : std::string_view(req.body),
                                  parse_options_.max_json_nodes);
    if (!body) return std::unexpected(body.error());
    std::string requested = req.query_param("tenant");
    for (const auto& [field, value] : body->items()) {
      if (field != "tenant") {
        return std::unexpected(invalid_param(field, std::format("'{}' is not a field of a reset; it takes only 'tenant'", field)));
      }
      if (!value.is_string()) return std::unexpected(invalid_param("tenant", "'tenant' must be a string"));
      if (!requested.empty() && requested != value.get_ref<const std::string&>()) {
        return std::unexpected(invalid_param("tenant", "the body and ?tenant= name different tenants"));
      }
      requested = value.get<std::string>();
    }
    return caller_of(req).and_then([&](const Caller& c) { return view_tenant(c, requested); });
  }

  http::Response apply_template(const http::Request& req) const {
    // The bound of a chat request: a conversation no prompt could hold is refused from the raw
    // body, before parsing and rendering it (whose cost grows with its size).
    if (auto refused = prompts_.refuse_oversized_chat(req.body, scheduler_.max_prompt_tokens())) return error_response(*refused);
    auto parsed = parse_chat_request(req.body, parse_options_);
    if (!parsed) return error_response(parsed.error());
    auto prompt = prompts_.render(*parsed);
    if (!prompt) return error_response(prompt.error());
    return json_response(200, dump_json(nlohmann::json{{"prompt", *prompt}}));
  }

  // GET /v1/cache/capabilities and the operations under /v1/cache/ (cache_control.h).
  http::Response cache_control(const http::Request& req, std::string_view operation, std::string_view methods) {
    if (methods.find(req.method) == std::string_view::npos) {
      http::Response res = error_response(ApiError{
          .status = 405,
          .message = std::format("{} is not allowed on {}; use {}", req.method, req.path, methods),
          .code = "method_not_allowed"});
      res.headers.push_back({"Allow", std::string(methods)});
      return res;
    }
    const auto caller = caller_of(req);
    if (!caller) return error_response(caller.error());
    if (stopping_ && operation != "capabilities") return error_response(shutting_down_error());
    ControlReply reply = control_.handle(operation, req.method, *caller, req.body, req.query_param("key"));
    return json_response(reply.status, reply.body.dump());
  }

  template <class Parsed>
  std::expected<scheduler::GenerationRequest, ApiError> build(std::expected<Parsed, ApiError> parsed,
                                                              std::string_view tenant) const {
    if (!parsed) return std::unexpected(parsed.error());
    return prompts_.build(*parsed, scheduler_.max_prompt_tokens(), tenant);
  }

  // An agent's next turn sends the reply back as an assistant message with `tool_calls`. The tokens
  // the model sampled are seldom the tokens that message renders to (a sampled token sequence is
  // not the tokenizer's own spelling of the same text), so the reply's K/V would not match. When the
  // reply called tools, the conversation with the reply as the template renders it is prefilled off
  // the request path (prefill-only: the prompt is cached, only the reply and its end of turn are
  // fed), and the next turn feeds only the tool results and their scaffolding.
  // `compact_arguments`: the client sends calls back as objects (Anthropic's tool_use input), which
  // its adapter renders as compact JSON, so the cached turn must hold them compact too.
  // `with_reasoning`: the reply comes back with its reasoning (Anthropic clients resend thinking
  // blocks; a previous_response_id continuation keeps it); Chat Completions clients send content.
  void cache_next_turn(const ChatRequest& request, const ParsedAssistant& reply, const std::string& tenant,
                       bool compact_arguments = false, bool with_reasoning = false) {
    if (reply.tool_calls.empty() || stopping_) return;
    ChatRequest next = request;
    nlohmann::ordered_json message{{"role", "assistant"},
                                   {"content", reply.content.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(reply.content)}};
    if (with_reasoning && !reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
    std::vector<ToolCall> calls = reply.tool_calls;
    if (compact_arguments) {
      for (ToolCall& call : calls) call.arguments = canonical_arguments(call.arguments);
    }
    message["tool_calls"] = nlohmann::ordered_json::parse(dump_json(tool_calls_json(calls)));
    next.chat.messages.push_back(std::move(message));
    next.chat.add_generation_prompt = false;
    auto warm = prompts_.build(next, scheduler_.max_prompt_tokens(), tenant);
    if (!warm) {
      spdlog::debug("tool-call turn not cached for the next turn: {}", warm.error().message);
      return;
    }
    control_.adjust(*warm, tenant, request.params.cache.session_key);
    warm->prefill_only = true;
    warm->max_tokens = 1;
    warm->sampling = {};
    warm->cache.continuation.clear();
    // Not waited for: the scheduler runs it like any request; its stream is simply not read.
    if (auto queued = scheduler_.submit(std::move(*warm)); !queued) {
      spdlog::debug("tool-call turn not cached for the next turn: {}", scheduler::submit_error_message(queued.error()));
    }
  }

  static ApiError shutting_down_error() {
    return ApiError{.status = 503, .message = "the server is shutting down", .type = "server_error",
                    .code = "server_shutting_down"};
  }

  // Why a request in flight must stop now, as the error it ends with; none while it may go on.
  static std::optional<ApiError> stop_reason(const http::Request& req) {
    switch (req.cancelled()) {
      case http::CancelReason::none: return std::nullopt;
      case http::CancelReason::shutdown: return shutting_down_error();
      case http::CancelReason::client_gone: return server_busy("the request was cancelled: the client went away");
    }
    return std::nullopt;
  }

  // Prompt tokens read back to decide whether the template opened a reasoning block at the end.
  static constexpr std::size_t kReasoningTailTokens = 16;

  // The splitter of a chat reply's reasoning when the template reasons (reasoning.h): the reply
  // starts inside the block when the prompt's end opened it.
  std::optional<ReasoningSplitter> reasoning_for(std::span<const engine::Token> prompt) const {
    if (!reasoning_) return std::nullopt;
    std::string tail;
    for (const engine::Token t : prompt.last(std::min(prompt.size(), kReasoningTailTokens))) {
      tail += engine_.vocab().piece(t, /*render_special=*/true);
    }
    return ReasoningSplitter(*reasoning_, prompt_opens_reasoning(tail, *reasoning_));
  }

  static SplitReply split_reply(std::optional<ReasoningSplitter> splitter, std::string text) {
    if (!splitter) return SplitReply{.reasoning = {}, .content = std::move(text)};
    return split_whole(std::move(*splitter), text);
  }

  template <class Parsed>
  http::Response serve(const http::Request& req, std::expected<Parsed, ApiError> parsed, Endpoint endpoint) {
    if (!parsed) return error_response(parsed.error());
    const auto caller = caller_of(req);
    if (!caller) return error_response(caller.error());
    auto generation = prompts_.build(*parsed, scheduler_.max_prompt_tokens(), caller->tenant);
    if (!generation) return error_response(generation.error());
    if (generation->cache.enabled) control_.adjust(*generation, caller->tenant, parsed->params.cache.session_key);
    // The tools the reply may call, when the template has a call syntax and tool_choice allows.
    std::optional<nlohmann::ordered_json> call_tools;
    // A chat whose reply may call tools, kept to cache the reply as the next turn renders it.
    std::shared_ptr<const ChatRequest> replayed;
    std::optional<ReasoningSplitter> reasoning;
    if constexpr (std::is_same_v<Parsed, ChatRequest>) {
      reasoning = reasoning_for(generation->prompt);
      if (tool_format_ != ToolCallFormat::none && parsed->tools.is_array() && parsed->tool_choice != "none") {
        call_tools = parsed->tools;
        if (generation->cache.enabled) replayed = std::make_shared<const ChatRequest>(*parsed);
      }
      // response_format and forced tool calls become a grammar every sampled token must keep to.
      auto grammar = output_grammar(
          *parsed, tool_format_, [this](const engine::Grammar& g) { return engine_.check_grammar(g); }, options_.grammar_limits);
      if (!grammar) return error_response(grammar.error());
      generation->sampling.grammar = std::move(*grammar);
    }
    // The prompt now lives in `generation`; the request's text is not needed while it runs.
    const CommonParams params = std::move(parsed->params);
    { [[maybe_unused]] const Parsed done = std::move(*parsed); }
    if (stopping_) return error_response(shutting_down_error());
    auto stream = scheduler_.submit(std::move(*generation));
    if (!stream) return error_response(submit_error(stream.error()));

    ResponseMeta meta{.endpoint = endpoint,
                      .id = ids_.next(endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-"),
                      .created = unix_seconds(),
                      .model = served_id_,
                      .logprobs = params.logprobs >= 0};
    // The request outlives every use of this probe: the transport keeps it until the response,
    // streamed or not, is written.
    auto should_stop = [&req] { return stop_reason(req); };

    if (!params.stream) {
      auto collected = collect_completion(**stream, [&should_stop] { return should_stop().has_value(); });
      switch (collected.done.finish) {
        case scheduler::FinishReason::error:
          return error_response(internal_error(collected.done.error.empty() ? "generation failed" : collected.done.error));
        case scheduler::FinishReason::cancelled:
          return error_response(should_stop().value_or(server_busy("the request was cancelled")));
        default: {
          SplitReply split = split_reply(std::move(reasoning), std::move(collected.text));
          if (call_tools) {
            ParsedAssistant reply = parse_tool_calls(split.content, tool_format_, *call_tools);
            reply.reasoning = std::move(split.reasoning);
            for (const std::string& warning : reply.warnings) spdlog::warn("{}: tool call: {}", meta.id, warning);
            if (replayed) cache_next_turn(*replayed, reply, caller->tenant);
            return json_response(200, dump_json(tool_call_body(meta, reply, collected.done, collected.logprobs)));
          }
          return json_response(
              200, dump_json(completion_body(meta, split.content, collected.done, collected.logprobs, split.reasoning)));
        }
      }
    }

    std::optional<ToolCallStream> parser;
    if (call_tools) parser.emplace(tool_format_, *call_tools, ToolCallIdGenerator{});
    SseRelay::ReplyDone after_reply;
    if (replayed) {
      after_reply = [this, replayed, tools = *call_tools, tenant = caller->tenant](const SplitReply& reply) {
        cache_next_turn(*replayed, parse_tool_calls(reply.content, tool_format_, tools), tenant);
      };
    }
    auto relay = std::make_shared<SseRelay>(std::move(*stream),
                                            openai_stream_format(std::move(meta), params.include_usage, std::move(parser)),
                                            std::move(should_stop), std::move(after_reply), std::move(reasoning));
    return event_stream(std::move(relay));
  }

  // A chat generation an adapter queued: its stream, and what its reply may call.
  struct QueuedChat {
    std::shared_ptr<scheduler::RequestStream> stream;
    std::size_t prompt_tokens = 0;
    std::optional<nlohmann::ordered_json> call_tools;  // the template has a call syntax and tool_choice allows
    std::shared_ptr<const ChatRequest> replayed;  // to cache a reply that called tools (cache_next_turn)
    std::optional<ReasoningSplitter> reasoning;   // the template reasons (reasoning_for)
  };

  // Builds the prompt of `chat` for `tenant` as a chat completion's, constrains it with its
  // grammar, and queues it. `retain`: prefixes the cache should keep ahead of LRU afterwards, each
  // at most the prompt.
  std::expected<QueuedChat, ApiError> queue_chat(const ChatRequest& chat, const std::string& tenant,
                                                 std::vector<cache::RetainAsk> retain = {}) {
    auto generation = prompts_.build(chat, scheduler_.max_prompt_tokens(), tenant);
    if (!generation) return std::unexpected(generation.error());
    if (generation->cache.enabled) control_.adjust(*generation, tenant, chat.params.cache.session_key);
    for (cache::RetainAsk& ask : retain) {
      ask.length = std::min(ask.length, static_cast<std::int32_t>(generation->prompt.size()));
    }
    generation->cache.retain = std::move(retain);
    QueuedChat queued{.prompt_tokens = generation->prompt.size(), .reasoning = reasoning_for(generation->prompt)};
    if (tool_format_ != ToolCallFormat::none && chat.tools.is_array() && chat.tool_choice != "none") {
      queued.call_tools = chat.tools;
      if (generation->cache.enabled) queued.replayed = std::make_shared<const ChatRequest>(chat);
    }
    auto grammar = output_grammar(
        chat, tool_format_, [this](const engine::Grammar& g) { return engine_.check_grammar(g); }, options_.grammar_limits);
    if (!grammar) return std::unexpected(grammar.error());
    generation->sampling.grammar = std::move(*grammar);
    if (stopping_) return std::unexpected(shutting_down_error());
    auto stream = scheduler_.submit(std::move(*generation));
    if (!stream) return std::unexpected(submit_error(stream.error()));
    queued.stream = std::move(*stream);
    return queued;
  }

  // The whole reply of a queued chat, its text parsed into content and calls, or the error to answer.
  struct Reply {
    ParsedAssistant parsed;
    scheduler::StreamEvent done;
  };
  std::expected<Reply, ApiError> collect_reply(QueuedChat& queued, const http::Request& req, const std::string& id) {
    auto should_stop = [&req] { return stop_reason(req); };
    auto collected = collect_completion(*queued.stream, [&should_stop] { return should_stop().has_value(); });
    switch (collected.done.finish) {
      case scheduler::FinishReason::error:
        return std::unexpected(internal_error(collected.done.error.empty() ? "generation failed" : collected.done.error));
      case scheduler::FinishReason::cancelled:
        return std::unexpected(should_stop().value_or(server_busy("the request was cancelled")));
      default: break;
    }
    Reply reply{.done = std::move(collected.done)};
    SplitReply split = split_reply(std::move(queued.reasoning), std::move(collected.text));
    if (queued.call_tools) {
      reply.parsed = parse_tool_calls(split.content, tool_format_, *queued.call_tools);
      for (const std::string& warning : reply.parsed.warnings) spdlog::warn("{}: tool call: {}", id, warning);
    } else {
      reply.parsed.content = std::move(split.content);
    }
    reply.parsed.reasoning = std::move(split.reasoning);
    return reply;
  }

  // A streamed reply's call parser: a call is sent once its arguments are complete JSON.
  std::optional<ToolCallStream> whole_call_parser(const QueuedChat& queued) const {
    if (!queued.call_tools) return std::nullopt;
    return ToolCallStream(tool_format_, *queued.call_tools, ToolCallIdGenerator{}, ToolCallStream::ArgumentDelivery::whole_call);
  }

  // POST /v1/messages and /v1/messages/count_tokens (anthropic_messages.h): the body becomes the
  // same ChatRequest a chat completion does, and takes the same path to the scheduler.
  http::Response serve_messages(http::Request& req, MessagesRoute route) {
    const auto fail = [](const ApiError& error) { return json_response(error.status, dump_json(anthropic_error_json(error))); };
    if (auto refused = prompts_.refuse_oversized_chat(req.body, scheduler_.max_prompt_tokens())) return fail(*refused);
    auto parsed = parse_messages_request(release_body(req), parse_options_, route);
    if (!parsed) return fail(parsed.error());
    const auto caller = caller_of(req);
    if (!caller) return fail(caller.error());
    const ChatRequest& chat = parsed->chat;
    if (route == MessagesRoute::count_tokens) {
      auto tokens = prompts_.chat_tokens(chat, scheduler_.max_prompt_tokens());
      if (!tokens) return fail(tokens.error());
      return json_response(200, dump_json(nlohmann::ordered_json{{"input_tokens", tokens->size()}}));
    }
    // Each breakpoint's prefix in tokens: for the usage split (the last one), and what the cache
    // keeps for the breakpoint's TTL.
    std::optional<std::int32_t> breakpoint = breakpoint_tokens(chat, parsed->breakpoint_messages);
    std::vector<cache::RetainAsk> retain;
    for (const CacheBreakpoint& b : parsed->retained) {
      const auto length = b.messages == parsed->breakpoint_messages ? breakpoint : breakpoint_tokens(chat, b.messages);
      if (length) retain.push_back({.length = *length, .duration = b.ttl});
    }
    auto queued = queue_chat(chat, caller->tenant, std::move(retain));
    if (!queued) return fail(queued.error());
    if (breakpoint) breakpoint = std::min(*breakpoint, static_cast<std::int32_t>(queued->prompt_tokens));
    ResponseMeta meta{.endpoint = Endpoint::chat, .id = ids_.next("msg_"), .created = unix_seconds(), .model = served_id_};
    if (!chat.params.stream) {
      auto reply = collect_reply(*queued, req, meta.id);
      if (!reply) return fail(reply.error());
      if (queued->replayed) {
        cache_next_turn(*queued->replayed, reply->parsed, caller->tenant, /*compact_arguments=*/true, /*with_reasoning=*/true);
      }
      return json_response(200, dump_json(messages_body(meta, reply->parsed, reply->done, messages_usage(reply->done.usage, breakpoint))));
    }
    SseRelay::ReplyDone after_reply;
    if (queued->replayed) {
      after_reply = [this, replayed = queued->replayed, tools = *queued->call_tools, tenant = caller->tenant](const SplitReply& reply) {
        ParsedAssistant parsed = parse_tool_calls(reply.content, tool_format_, tools);
        parsed.reasoning = reply.reasoning;
        cache_next_turn(*replayed, parsed, tenant, /*compact_arguments=*/true, /*with_reasoning=*/true);
      };
    }
    auto relay = std::make_shared<SseRelay>(std::move(queued->stream),
                                            anthropic_stream_format(std::move(meta), whole_call_parser(*queued), breakpoint),
                                            [&req] { return stop_reason(req); }, std::move(after_reply),
                                            std::move(queued->reasoning));
    return event_stream(std::move(relay));
  }

  // Where the conversation's first `messages` end in its prompt: the tokens of those messages
  // rendered alone (a prefix of the whole prompt's). nullopt without a breakpoint, or when the
  // breakpoint covers only tools (no message to render). All of them: the largest int32, which
  // the caller caps at the prompt's length.
  std::optional<std::int32_t> breakpoint_tokens(const ChatRequest& chat, std::optional<std::size_t> messages) const {
    if (!messages || *messages == 0) return std::nullopt;
    if (*messages >= chat.chat.messages.size()) return std::numeric_limits<std::int32_t>::max();
    ChatRequest head = chat;
    head.chat.messages = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < *messages; ++i) head.chat.messages.push_back(chat.chat.messages[i]);
    head.chat.add_generation_prompt = false;
    auto tokens = prompts_.chat_tokens(head, scheduler_.max_prompt_tokens());
    if (!tokens) return std::nullopt;
    return static_cast<std::int32_t>(tokens->size());
  }

  // POST /v1/responses (responses_api.h): the input items, after the previous response's
  // conversation when the request names one, become the same ChatRequest a chat completion does.
  http::Response serve_responses(http::Request& req) {
    if (auto refused = prompts_.refuse_oversized_chat(req.body, scheduler_.max_prompt_tokens())) return error_response(*refused);
    auto parsed = parse_responses_request(release_body(req), parse_options_);
    if (!parsed) return error_response(parsed.error());
    const auto caller = caller_of(req);
    if (!caller) return error_response(caller.error());
    nlohmann::ordered_json history = nlohmann::ordered_json::array();
    if (parsed->previous_response_id) {
      auto previous = responses_.find(caller->tenant, *parsed->previous_response_id);
      if (!previous) {
        return error_response(ApiError{.status = 404,
                                       .message = std::format("no stored response '{}' (never stored, deleted, or expired)",
                                                              *parsed->previous_response_id),
                                       .param = "previous_response_id", .code = "previous_response_not_found"});
      }
      history = std::move(previous->conversation);
    }
    // What the stored conversation continues with: the history and this request's input items.
    nlohmann::ordered_json conversation = history;
    for (const nlohmann::ordered_json& m : parsed->chat.chat.messages) conversation.push_back(m);
    ChatRequest chat = parsed->chat;
    chat.chat.messages = conversation_of(*parsed, history);
    auto queued = queue_chat(chat, caller->tenant);
    if (!queued) return error_response(queued.error());
    ResponseMeta meta{.endpoint = Endpoint::chat, .id = ids_.next("resp_"), .created = unix_seconds(), .model = served_id_};
    // Keeps the reply (when `store`) and caches a reply that called functions as the next request
    // renders it; called once the reply ended normally.
    auto completed = [this, store = parsed->store, replayed = queued->replayed, id = meta.id, tenant = caller->tenant,
                      conversation = std::move(conversation)](const nlohmann::ordered_json& response, const ParsedAssistant& reply) {
      if (store && options_.response_store_bytes > 0) {
        nlohmann::ordered_json kept = conversation;
        kept.push_back(reply_message(reply));
        responses_.put(tenant, id, StoredResponse{.object = response, .conversation = std::move(kept)});
      }
      if (replayed) cache_next_turn(*replayed, reply, tenant, /*compact_arguments=*/false, /*with_reasoning=*/true);
    };
    if (!chat.params.stream) {
      auto reply = collect_reply(*queued, req, meta.id);
      if (!reply) return error_response(reply.error());
      const nlohmann::ordered_json response = response_object(meta, *parsed, response_output(meta.id, reply->parsed), reply->done);
      completed(response, reply->parsed);
      return json_response(200, dump_json(response));
    }
    auto relay = std::make_shared<SseRelay>(
        std::move(queued->stream),
        responses_stream_format(std::move(meta), std::move(*parsed), whole_call_parser(*queued), std::move(completed)),
        [&req] { return stop_reason(req); }, SseRelay::ReplyDone{}, std::move(queued->reasoning));
    return event_stream(std::move(relay));
  }

  // GET or DELETE /v1/responses/{id}: the caller's tenant's stored responses only.
  http::Response stored_response(const http::Request& req, const std::string& id, bool erase) {
    const auto caller = caller_of(req);
    if (!caller) return error_response(caller.error());
    const ApiError missing{.status = 404, .message = std::format("no stored response '{}'", id), .code = "response_not_found"};
    if (erase) {
      if (!responses_.erase(caller->tenant, id)) return error_response(missing);
      return json_response(200, dump_json(nlohmann::ordered_json{{"id", id}, {"object", "response"}, {"deleted", true}}));
    }
    auto found = responses_.find(caller->tenant, id);
    if (!found) return error_response(missing);
    return json_response(200, dump_json(found->object));
  }

  const engine::Engine& engine_;
  scheduler::Scheduler& scheduler_;
  ServerOptions options_;
  std::shared_ptr<KeyStore> keys_;  // null: no auth
  std::string served_id_;
  ParseOptions parse_options_;
  PromptBuilder prompts_;
  CacheControl control_;
  ToolCallFormat tool_format_;  // how the model's template writes a tool call (tool_calls.h)
  std::optional<webui::Site> site_;  // the web UI's files; nullopt: --no-webui
  std::optional<ReasoningSyntax> reasoning_;  // where the template has the model think (reasoning.h)
  IdGenerator ids_;
  ResponseStore responses_{options_.response_store_bytes, std::chrono::seconds(options_.response_ttl_seconds)};  // POST /v1/responses with store
  std::int64_t started_;
  std::atomic<bool> stopping_{false};
  const std::string server_id_ = random_server_id();  // GET /v1/cache/summary
  const cache::Digest model_key_ = cache::model_key(engine_.model().fingerprint, engine_.model().runtime_signature);
  http::Server transport_;  // last: its workers call into the members above
};

HttpServer::HttpServer(const engine::Engine& engine, scheduler::Scheduler& scheduler, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, scheduler, std::move(options))) {}
HttpServer::~HttpServer() = default;
bool HttpServer::run() { return impl_->run(); }
void HttpServer::shutdown(std::chrono::milliseconds grace) { impl_->shutdown(grace); }
int HttpServer::bound_port() const { return impl_->bound_port(); }
http::ServerStats HttpServer::transport_stats() const { return impl_->transport_stats(); }

}  // namespace prefixd::api
