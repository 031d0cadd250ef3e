// HttpServer: the server's routes over the HTTP transport (src/http): the API-key check, then the
// route table (route_table.h), whose rows name every endpoint's handler and decide the 405, the
// 404 and the error shape of every path. The handlers live beside it: the protocol adapters over the chat service (openai/chat_route.h,
// anthropic/messages_route.h, responses/responses_route.h, chat/chat_service.h), the cache's views
// (cache_views.h) and control plane (control/cache_control.h), the server's own routes
// (server_routes.h) and llama.cpp's helpers (openai/tokenize_route.h).
#include "api/server.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <expected>
#include <format>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "api/adapters/adapter_routes.h"
#include "api/anthropic/anthropic_messages.h"
#include "cache/family.h"
#include "api/anthropic/messages_route.h"
#include "api/auth/access.h"
#include "api/cache_views.h"
#include "api/chat/chat_service.h"
#include "api/control/cache_control.h"
#include "api/embeddings/embedding_service.h"
#include "api/errors.h"
#include "api/native/native_completion.h"
#include "api/native/slots.h"
#include "api/openai/chat_route.h"
#include "api/openai/request_parser.h"
#include "api/openai/responses.h"
#include "api/openai/tokenize_route.h"
#include "api/prompt/prompt_builder.h"
#include "api/responses/response_store.h"
#include "api/responses/responses_route.h"
#include "api/route_support.h"
#include "api/route_table.h"
#include "api/server_routes.h"
#include "webui/site.h"

namespace prefixd::api {
namespace {

constexpr std::string_view kResponsesPrefix = "/v1/responses/";
// The control plane's operations live under this path (cache_control.h).
constexpr std::string_view kCachePrefix = "/v1/cache/";
constexpr std::string_view kModelPrefix = "/v1/models/";
constexpr std::string_view kSlotPrefix = "/slots/";

// Errors the transport answers by itself (malformed requests, size limits, shutdown).
http::Response transport_error(int status, std::string_view message, std::string_view code) {
  ApiError error{.status = status, .message = std::string(message), .code = std::string(code)};
  if (status >= 500) error.type = "server_error";
  return error_response(error);
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
  if (engine.vision() != nullptr) {
    out.images.images = engine.vision()->info().images;
    out.images.audio = engine.vision()->info().audio;
  }
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
                               .turn_boundaries = cache::Family::of(engine.model())->checkpoints_at_turns(),
                               .vision = engine.vision(),
                               .adapters = adapters_.empty() ? nullptr : &adapters_}),
        control_(prompts_, scheduler_, control_parse_options(engine, options_, served_id_),
                 ControlOptions{.artifact_dir = options_.artifact_dir,
                                .model_key = engine.model().fingerprint.empty() ? engine.model().id : engine.model().fingerprint}),
        site_(web_site(options_)),
        chats_(engine, scheduler_, prompts_, control_, stopping_, options_.grammar_limits, options_.stream_keep_alive, served_id_),
        embeddings_(engine, scheduler_, chats_, stopping_, served_id_, options_.slots, options_.embd_normalize),
        views_(engine, scheduler_, control_, chats_, route_, options_.slots, options_.kv_events),
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
    parse_options_.shift_reuse = options_.cache_prompt_default && engine.can_shift();
    parse_options_.default_seed = options_.default_seed;
    parse_options_.max_json_nodes = options_.max_json_nodes;
    parse_options_.images = control_parse_options(engine, options_, served_id_).images;
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
    try {
      // The UI's files hold nothing of the server's: they load without a key and ask for one.
      const bool public_path = req.path == "/health" || (site_ && webui::Site::is_ui_path(req.path));
      if (keys_ != nullptr && !public_path && !route_.caller(req)) return routes_.refuse(req.path, unauthorized());
      return routes_.dispatch(req);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      return routes_.refuse(req.path, internal_error(std::string("internal error: ") + e.what()));
    }
  }

  // Every route the server answers, once: the table decides the handler, the 405 and the 404.
  RouteTable build_routes() {
    RouteTable t;
    t.shape_errors("/v1/messages", ErrorShape::anthropic);
    const auto get = [&t](std::string path, RouteHandler handler, bool head = false) {
      t.add({.method = "GET", .path = std::move(path), .handler = std::move(handler), .head = head});
    };
    const auto post = [&t](std::string path, RouteHandler handler) {
      t.add({.method = "POST", .path = std::move(path), .handler = std::move(handler)});
    };
    // HEAD is answered where a GET has no effect and never streams: the health check and the UI's
    // files (the transport drops the body).
    get("/health", [](http::Request&, std::string_view) { return json_response(200, R"({"status":"ok"})"); }, true);
    if (site_) {
      t.add({.method = "GET",
             .path = "/",
             .handler = [this](http::Request& req, std::string_view) {
               if (auto file = site_->find(req.path)) return web_file(std::move(*file));
               return error_response(
                   ApiError{.status = 404, .message = std::format("the web UI has no file {}", req.path), .code = "not_found"});
             },
             .match = PathMatch::chosen,
             .accepts = [](std::string_view path) { return webui::Site::is_ui_path(path); },
             .head = true});
    }
    get("/v1/models", [this](http::Request&, std::string_view) {
      return json_response(200, dump_json(models_body(served_id_, engine_.model(), started_)));
    });
    t.add({.method = "GET",
           .path = std::string(kModelPrefix),
           .handler = [this](http::Request&, std::string_view id) {
             return model_answer(route_, served_id_, engine_.model(), started_, std::string(id));
           },
           .match = PathMatch::prefix});
    for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
      post(path, [this](http::Request& req, std::string_view) { return serve_chat_completion(chats_, route_, req); });
    }
    for (const char* path : {"/v1/completions", "/completions"}) {
      post(path, [this](http::Request& req, std::string_view) { return serve_completion(chats_, route_, req); });
    }
    post("/v1/messages", [this](http::Request& req, std::string_view) {
      return serve_messages(chats_, route_, req, MessagesRoute::create);
    });
    post("/v1/messages/count_tokens", [this](http::Request& req, std::string_view) {
      return serve_messages(chats_, route_, req, MessagesRoute::count_tokens);
    });
    post("/v1/responses", [this](http::Request& req, std::string_view) {
      return serve_responses(chats_, route_, StoredResponses{.store = responses_, .keeps = options_.response_store_bytes > 0}, req);
    });
    for (const char* method : {"GET", "DELETE"}) {
      const bool erase = std::string_view(method) == "DELETE";
      t.add({.method = method,
             .path = std::string(kResponsesPrefix),
             .handler = [this, erase](http::Request& req, std::string_view id) {
               return stored_response(route_, responses_, req, std::string(id), erase);
             },
             .match = PathMatch::prefix});
    }
    // llama.cpp's helper routes: what a prompt becomes, so clients (and tests) can count tokens.
    post("/tokenize", [this](http::Request& req, std::string_view) {
      return answer_of(tokenize_answer(req.body, prompts_, parse_options_, scheduler_.max_prompt_tokens()));
    });
    post("/detokenize", [this](http::Request& req, std::string_view) {
      return answer_of(detokenize_answer(req.body, engine_.vocab(), parse_options_.max_json_nodes));
    });
    // Embeddings and rerank scores (a server started with --embeddings or --reranking): OpenAI's
    // shape at /v1/embeddings, llama-server's at /embedding and /embeddings.
    post("/v1/embeddings", [this](http::Request& req, std::string_view) {
      return embeddings_.embeddings(route_, req, EmbeddingsEndpoint::openai);
    });
    for (const char* path : {"/embedding", "/embeddings"}) {
      post(path, [this](http::Request& req, std::string_view) {
        return embeddings_.embeddings(route_, req, EmbeddingsEndpoint::native);
      });
    }
    for (const char* path : {"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"}) {
      post(path, [this](http::Request& req, std::string_view) { return embeddings_.rerank(route_, req); });
    }
    // LoRA adapters: the loaded ones and the server's scales (llama-server's shape).
    for (const char* method : {"GET", "POST"}) {
      t.add({.method = method, .path = "/lora-adapters", .handler = [this](http::Request& req, std::string_view) {
               return serve_lora_adapters(adapters_, route_, req);
             }});
    }
    // llama-server's native API.
    post("/completion", [this](http::Request& req, std::string_view) { return serve_native_completion(chats_, route_, req); });
    post("/infill", [this](http::Request& req, std::string_view) { return serve_infill(chats_, route_, req); });
    get("/props", [this](http::Request&, std::string_view) {
      return props_answer(served_id_, engine_, prompts_.chat_template().source(), options_.slots);
    });
    get("/slots", [this](http::Request& req, std::string_view) { return serve_slots(scheduler_, route_, slot_options(), req); });
    t.add({.method = "POST",
           .path = std::string(kSlotPrefix),
           .handler = [this](http::Request& req, std::string_view id) {
             return serve_slot_action(scheduler_, route_, slot_options(), req, id);
           },
           .match = PathMatch::prefix});
    post("/apply-template", [this](http::Request& req, std::string_view) {
      return answer_of(apply_template_answer(req.body, prompts_, parse_options_, scheduler_.max_prompt_tokens()));
    });
    if (options_.metrics) {
      get("/metrics", [this](http::Request& req, std::string_view) {
        return metrics_answer(route_, req, scheduler_, control_, transport_, engine_.model(), options_.extra_metrics);
      });
    }
    get("/v1/cache/stats", [this](http::Request& req, std::string_view) { return views_.stats(req); });
    post("/v1/cache/reset", [this](http::Request& req, std::string_view) { return views_.reset(req); });
    get("/v1/cache/summary", [this](http::Request& req, std::string_view) { return views_.summary(req); });
    get("/v1/cache/tree", [this](http::Request& req, std::string_view) { return views_.tree(req); });
    post("/v1/cache/chain", [this](http::Request& req, std::string_view) { return views_.chain(req); });
    for (const CacheOperation& op : CacheControl::operations()) {
      const std::string_view operation = op.name;
      const auto handler = [this, operation](http::Request& req, std::string_view) { return cache_control(req, operation); };
      if (op.get) get(std::string(kCachePrefix) + std::string(operation), handler);
      if (op.post) post(std::string(kCachePrefix) + std::string(operation), handler);
    }
    return t;
  }

  SlotOptions slot_options() const {
    return SlotOptions{.save_path = options_.slot_save_path, .context = engine_.context_size()};
  }

  static http::Response answer_of(const std::expected<nlohmann::json, ApiError>& answer) {
    if (!answer) return error_response(answer.error());
    return json_response(200, dump_json(*answer));
  }

  // GET /v1/cache/capabilities and the operations under /v1/cache/ (cache_control.h).
  http::Response cache_control(const http::Request& req, std::string_view operation) {
    const auto caller = route_.caller(req);
    if (!caller) return error_response(caller.error());
    if (stopping_ && operation != "capabilities") return error_response(server_shutting_down());
    ControlReply reply = control_.handle(operation, req.method, *caller, req.body, req.query_param("key"));
    return json_response(reply.status, reply.body.dump());
  }

  const engine::Engine& engine_;
  scheduler::Scheduler& scheduler_;
  ServerOptions options_;
  std::shared_ptr<KeyStore> keys_;  // null: no auth
  std::string served_id_;
  ParseOptions parse_options_;
  const RouteContext route_{.parse = parse_options_, .keys = keys_.get()};
  AdapterTable adapters_{engine_.model().adapters, options_.lora_scales};  // before prompts_, which reads it
  PromptBuilder prompts_;
  CacheControl control_;
  std::optional<webui::Site> site_;  // the web UI's files; nullopt: --no-webui
  std::atomic<bool> stopping_{false};  // raised by shutdown(): no new generation starts
  ChatService chats_;  // the pipeline under the chat, Messages and Responses adapters
  EmbeddingService embeddings_;  // /v1/embeddings, /embedding, /v1/rerank (--embeddings, --reranking)
  CacheViews views_;
  ResponseStore responses_{options_.response_store_bytes, std::chrono::seconds(options_.response_ttl_seconds)};  // POST /v1/responses with store
  std::int64_t started_;
  RouteTable routes_ = build_routes();
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
