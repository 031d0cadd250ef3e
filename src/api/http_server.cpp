// HttpServer: routes, auth and error mapping over httplib. Request semantics live in the parser,
// the prompt builder, the responses and the relays; this file only wires them to HTTP.
#include "api/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <format>
#include <thread>
#include <utility>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "api/access.h"
#include "api/cache_artifacts.h"
#include "api/cache_report.h"
#include "api/cache_scope_report.h"
#include "api/errors.h"
#include "api/prompt_builder.h"
#include "api/request_parser.h"
#include "api/responses.h"
#include "api/stream_relay.h"

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
    {"/v1/cache/stats", "GET"},  {"/v1/cache/reset", "POST"}, {"/v1/cache/save", "POST"}, {"/v1/cache/load", "POST"},
};

const Route* find_route(const std::string& path) {
  for (const auto& route : kRoutes) {
    if (path == route.path) return &route;
  }
  return nullptr;
}

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, kJson);
}

void send_error(httplib::Response& res, const ApiError& error) {
  send_json(res, error.status, dump_json(error.to_json()));
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
        prompts_(engine.vocab(), model_chat_template(engine.model(), engine.vocab()),
                 engine.model().fingerprint.empty() ? engine.model().id : engine.model().fingerprint,
                 engine.model().runtime_signature, options_.cache_isolation, options_.cache_shared_prefix),
        started_(unix_seconds()) {
    parse_options_.model_names = {served_id_};
    if (engine.model().id != served_id_) parse_options_.model_names.push_back(engine.model().id);
    parse_options_.cache_prompt_default = options_.cache_prompt_default;
    parse_options_.vocab_size = engine.vocab().size();
    configure();
  }

  bool run() {
    // `active_` before `stopping_` is read, and the reverse in stop(): whichever comes second sees
    // the other, so a stop() that races with startup is never lost.
    active_ = true;
    const bool ok = stopping_ ? true : bind_and_listen();
    active_ = false;
    return ok;
  }

  void stop() {
    // Waiting handlers see `stopping_`, cancel their requests and return, which lets httplib's
    // worker pool join.
    stopping_ = true;
    // httplib's stop() does nothing until the server is running, so a stop() that arrives during
    // startup waits for it to be running (or to have failed).
    while (active_ && !http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    http_.stop();
  }

  int bound_port() const { return port_; }

 private:
  void configure() {
    const auto threads = static_cast<std::size_t>(std::max(1, options_.http_threads));
    // httplib takes ownership of the queue it gets from this factory (its documented contract).
    http_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http_.set_payload_max_length(options_.max_body_bytes);

    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (keys_ == nullptr || req.path == "/health" || caller_of(req)) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, unauthorized());
      return httplib::Server::HandlerResponse::Handled;
    });
    http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // already an API error
      fill_transport_error(req, res);
      return httplib::Server::HandlerResponse::Handled;
    });
    http_.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      spdlog::error("{} {}: {}", req.method, req.path, what);
      send_error(res, internal_error("internal error: " + what));
    });
    http_.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      spdlog::debug("{} {} -> {}", req.method, req.path, res.status);
    });

    http_.Get("/health", guard([](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, R"({"status":"ok"})");
    }));
    http_.Get("/v1/models", guard([this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, dump_json(models_body(served_id_, engine_.model(), started_)));
    }));
    http_.Get(R"(/v1/models/(.+))", guard([this](const httplib::Request& req, httplib::Response& res) {
      const auto& id = req.matches[1].str();
      if (std::ranges::find(parse_options_.model_names, id) == parse_options_.model_names.end()) {
        return send_error(res, model_not_found(id));
      }
      send_json(res, 200, dump_json(model_body(served_id_, engine_.model(), started_)));
    }));
    auto chat = guard([this](const httplib::Request& req, httplib::Response& res) {
      serve(req, res, parse_chat_request(req.body, parse_options_), Endpoint::chat);
    });
    auto completion = guard([this](const httplib::Request& req, httplib::Response& res) {
      serve(req, res, parse_completion_request(req.body, parse_options_), Endpoint::completion);
    });
    // llama.cpp's helper routes: what a prompt becomes, so clients (and tests) can count tokens.
    http_.Post("/tokenize", guard([this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); }));
    http_.Post("/apply-template", guard([this](const httplib::Request& req, httplib::Response& res) {
      auto parsed = parse_chat_request(req.body, parse_options_);
      if (!parsed) return send_error(res, parsed.error());
      auto prompt = prompts_.render(*parsed);
      if (!prompt) return send_error(res, prompt.error());
      send_json(res, 200, dump_json(nlohmann::json{{"prompt", *prompt}}));
    }));
    http_.Post("/v1/chat/completions", chat);
    http_.Post("/chat/completions", chat);
    http_.Post("/v1/completions", completion);
    http_.Post("/completions", completion);
    if (options_.metrics) {
      http_.Get("/metrics", guard([this](const httplib::Request& req, httplib::Response& res) {
        const auto admin = caller_of(req).and_then([](const Caller& c) { return require_admin(c, "/metrics"); });
        if (!admin) return send_error(res, admin.error());
        res.status = 200;
        const scheduler::SchedulerStats stats = scheduler_.stats();
        const cache::CacheStats cache = scheduler_.cache_stats();
        res.set_content(metrics_text(stats) + ttft_metrics_text(stats) + cache_metrics_text(cache) +
                            tenant_metrics_text(cache, TenantNames(keys_.get())),
                        "text/plain; version=0.0.4; charset=utf-8");
      }));
    }
    http_.Get("/v1/cache/stats", guard([this](const httplib::Request& req, httplib::Response& res) {
      const auto tenant = viewed_tenant(req);
      if (!tenant) return send_error(res, tenant.error());
      send_json(res, 200,
                cache_view_json(scheduler_.cache_stats(), engine_.model(), *tenant, TenantNames(keys_.get())).dump());
    }));
    http_.Post("/v1/cache/save", guard([this](const httplib::Request& req, httplib::Response& res) { save_artifact(req, res); }));
    http_.Post("/v1/cache/load", guard([this](const httplib::Request& req, httplib::Response& res) { load_artifact(req, res); }));
    http_.Post("/v1/cache/reset", guard([this](const httplib::Request& req, httplib::Response& res) {
      const auto tenant = viewed_tenant(req);
      if (!tenant) return send_error(res, tenant.error());
      const cache::ResetReport report =
          scheduler_.reset_cache(*tenant ? std::optional(tenant_scope(**tenant)) : std::nullopt);
      spdlog::info("cache reset ({}): freed {} entries, {} bytes", tenant->value_or("every tenant"), report.entries,
                   report.bytes);
      send_json(res, 200, cache_reset_json(report).dump());
    }));
  }

  // The caller of a request (access.h).
  std::expected<Caller, ApiError> caller_of(const httplib::Request& req) const {
    return identify(keys_.get(), req.get_header_value("Authorization"), req.get_header_value("X-Api-Key"));
  }

  // The tenant a cache view or reset covers (access.h, view_tenant); nullopt: every tenant.
  std::expected<std::optional<std::string>, ApiError> viewed_tenant(const httplib::Request& req) const {
    return caller_of(req).and_then(
        [&](const Caller& c) { return view_tenant(c, req.get_param_value("tenant")); });
  }

  // POST /v1/cache/save (cache_artifacts.h).
  void save_artifact(const httplib::Request& req, httplib::Response& res) {
    const auto caller = caller_of(req);
    if (!caller) return send_error(res, caller.error());
    auto body = parse_json_object(req.body);
    if (!body) return send_error(res, body.error());
    auto path = artifact_path(tenant_artifact_dir(options_.artifact_dir, caller->tenant), *body);
    if (!path) return send_error(res, path.error());
    std::function<cache::ArtifactInfo(cache::PrefixCache&)> save;
    if (body->contains("messages") || body->contains("prompt")) {
      const bool chat = body->contains("messages");
      auto generation = chat ? build(parse_chat_request(req.body, parse_options_), caller->tenant)
                             : build(parse_completion_request(req.body, parse_options_), caller->tenant);
      if (!generation) return send_error(res, generation.error());
      save = [path = *path, g = std::move(*generation)](cache::PrefixCache& c) {
        const scheduler::CacheOptions& o = g.cache;
        return c.save_artifact(cache::RequestKey{o.namespace_digest, o.session_key, {}, o.scope, o.shared_prefix},
                               g.prompt, path);
      };
    } else if (const auto key = body->find("prompt_cache_key"); key != body->end() && key->is_string()) {
      save = [path = *path, scope = tenant_scope(caller->tenant), session = key->get<std::string>()](cache::PrefixCache& c) {
        return c.save_session_artifact(scope, session, path);
      };
    } else {
      return send_error(res, invalid_request("say what to save: 'prompt_cache_key', 'messages' or 'prompt'"));
    }
    run_artifact(res, "save", *path, save);
  }

  // POST /v1/cache/load (cache_artifacts.h).
  void load_artifact(const httplib::Request& req, httplib::Response& res) {
    const auto caller = caller_of(req);
    if (!caller) return send_error(res, caller.error());
    auto body = parse_json_object(req.body);
    if (!body) return send_error(res, body.error());
    auto path = artifact_path(tenant_artifact_dir(options_.artifact_dir, caller->tenant), *body);
    if (!path) return send_error(res, path.error());
    run_artifact(res, "load", *path, [path = *path, scope = tenant_scope(caller->tenant)](cache::PrefixCache& c) {
      return c.load_artifact(path, scope);
    });
  }

  void run_artifact(httplib::Response& res, std::string_view operation, const std::filesystem::path& path,
                    const std::function<cache::ArtifactInfo(cache::PrefixCache&)>& operate) {
    cache::ArtifactInfo info;
    std::optional<cache::ArtifactError> failed;
    const bool ran = scheduler_.with_cache([&](cache::PrefixCache& c) {
      try {
        info = operate(c);
      } catch (const cache::ArtifactError& e) {
        failed = e;
      }
    });
    if (!ran) return send_error(res, server_busy("the server is shutting down"));
    if (failed) return send_error(res, artifact_error(*failed));
    spdlog::info("cache {}: artifact {} ({} tokens, {} bytes)", operation, path.filename().string(), info.tokens, info.bytes);
    send_json(res, 200, artifact_json(operation, path, info).dump());
  }

  template <class Parsed>
  std::expected<scheduler::GenerationRequest, ApiError> build(std::expected<Parsed, ApiError> parsed,
                                                              std::string_view tenant) const {
    if (!parsed) return std::unexpected(parsed.error());
    return prompts_.build(*parsed, scheduler_.max_prompt_tokens(), tenant);
  }

  bool bind_and_listen() {
    int port = options_.port;
    if (port == 0) {
      port = http_.bind_to_any_port(options_.host);
    } else if (!http_.bind_to_port(options_.host, port)) {
      port = -1;
    }
    if (port <= 0) {
      spdlog::error("cannot listen on {}:{}", options_.host, options_.port);
      return false;
    }
    port_ = port;
    spdlog::info("listening on http://{}:{}", options_.host, port);
    return http_.listen_after_bind();
  }

  // No request may take the server down: whatever escapes a handler becomes a 500 here.
  template <class Handler>
  static httplib::Server::Handler guard(Handler handler) {
    return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      try {
        handler(req, res);
      } catch (const std::exception& e) {
        spdlog::error("{} {}: {}", req.method, req.path, e.what());
        send_error(res, internal_error(std::string("internal error: ") + e.what()));
      } catch (...) {
        spdlog::error("{} {}: unknown exception", req.method, req.path);
        send_error(res, internal_error("internal error"));
      }
    };
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) const {
    auto body = parse_json_object(req.body);
    if (!body) return send_error(res, body.error());
    const auto content = body->find("content");
    if (content == body->end() || !content->is_string()) {
      return send_error(res, invalid_param("content", "'content' must be a string"));
    }
    auto flag = [&](const char* name, bool fallback) -> std::expected<bool, ApiError> {
      const auto it = body->find(name);
      if (it == body->end() || it->is_null()) return fallback;
      if (!it->is_boolean()) return std::unexpected(invalid_param(name, std::format("'{}' must be a boolean", name)));
      return it->get<bool>();
    };
    // Defaults as llama.cpp's /tokenize: no BOS, special tokens parsed.
    const auto add_special = flag("add_special", false);
    const auto parse_special = flag("parse_special", true);
    if (!add_special) return send_error(res, add_special.error());
    if (!parse_special) return send_error(res, parse_special.error());
    const auto tokens = prompts_.tokenize(content->get<std::string>(), *add_special, *parse_special);
    send_json(res, 200, dump_json(nlohmann::json{{"tokens", tokens}}));
  }

  // httplib answered on its own (no route, body too large, unparsable request): give it our shape.
  void fill_transport_error(const httplib::Request& req, httplib::Response& res) const {
    ApiError error{.status = res.status};
    if (res.status == 404) {
      if (const Route* route = find_route(req.path); route && (options_.metrics || req.path != "/metrics")) {
        error.status = 405;
        error.message = std::format("{} is not allowed on {}; use {}", req.method, req.path, route->method);
        error.code = "method_not_allowed";
        res.set_header("Allow", route->method);
      } else {
        error.message = std::format("no route for {} {}", req.method, req.path);
        error.code = "not_found";
      }
    } else if (res.status == 413) {
      error.message = std::format("the request body is larger than {} bytes", options_.max_body_bytes);
      // The HTTP library caps form-encoded bodies far lower; curl -d sends that type by default.
      if (req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded")) {
        error.message = "form-encoded request bodies are limited to 8192 bytes; send JSON with "
                        "'Content-Type: application/json'";
      }
      error.code = "request_too_large";
    } else {
      error.message = httplib::status_message(res.status);
      if (res.status >= 500) error.type = "server_error";
    }
    send_error(res, error);
  }

  template <class Parsed>
  void serve(const httplib::Request& req, httplib::Response& res, std::expected<Parsed, ApiError> parsed,
             Endpoint endpoint) {
    if (!parsed) return send_error(res, parsed.error());
    const auto caller = caller_of(req);
    if (!caller) return send_error(res, caller.error());
    auto generation = prompts_.build(*parsed, scheduler_.max_prompt_tokens(), caller->tenant);
    if (!generation) return send_error(res, generation.error());
    if (stopping_) return send_error(res, server_busy("the server is shutting down"));
    auto stream = scheduler_.submit(std::move(*generation));
    if (!stream) return send_error(res, submit_error(stream.error()));

    ResponseMeta meta{.endpoint = endpoint,
                      .id = ids_.next(endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-"),
                      .created = unix_seconds(),
                      .model = served_id_,
                      .logprobs = parsed->params.logprobs >= 0};
    // A copy of httplib's probe: it holds the socket by value, so it stays callable from the
    // content provider after this handler returns.
    auto connection_closed = req.is_connection_closed;
    auto should_abort = [this, connection_closed] { return stopping_.load() || connection_closed(); };

    if (!parsed->params.stream) {
      auto collected = collect_completion(**stream, should_abort);
      switch (collected.done.finish) {
        case scheduler::FinishReason::error:
          return send_error(res, internal_error(collected.done.error.empty() ? "generation failed" : collected.done.error));
        case scheduler::FinishReason::cancelled:
          return send_error(res, server_busy("the request was cancelled"));
        default:
          return send_json(res, 200, dump_json(completion_body(meta, collected.text, collected.done, collected.logprobs)));
      }
    }

    auto relay = std::make_shared<SseRelay>(std::move(*stream), std::move(meta), parsed->params.include_usage,
                                            std::move(should_abort));
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [relay](std::size_t, httplib::DataSink& sink) {
          if (!sink.is_writable()) {
            relay->abort();
            return false;
          }
          const auto step = relay->pump([&sink](std::string_view frame) { return sink.write(frame.data(), frame.size()); });
          if (step == SseRelay::Step::finished) sink.done();
          return step != SseRelay::Step::aborted;
        },
        // httplib calls this when the response ends; an unfinished one (a server stop, a write
        // error) must not leave the request running.
        [relay](bool) { relay->abort(); });
  }

  const engine::Engine& engine_;
  scheduler::Scheduler& scheduler_;
  ServerOptions options_;
  std::shared_ptr<KeyStore> keys_;  // null: no auth
  std::string served_id_;
  ParseOptions parse_options_;
  PromptBuilder prompts_;
  IdGenerator ids_;
  std::int64_t started_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> active_{false};  // inside run()
  std::atomic<int> port_{0};
  httplib::Server http_;
};

HttpServer::HttpServer(const engine::Engine& engine, scheduler::Scheduler& scheduler, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, scheduler, std::move(options))) {}
HttpServer::~HttpServer() = default;
bool HttpServer::run() { return impl_->run(); }
void HttpServer::stop() { impl_->stop(); }
int HttpServer::bound_port() const { return impl_->bound_port(); }

}  // namespace prefixd::api
