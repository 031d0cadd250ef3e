// The router's front: answers /health and /metrics itself, forwards /v1/models, and routes the two
// generation endpoints (policy.h), retrying on another backend while nothing has reached the client.
#include "router/router.h"

#include <algorithm>
#include <atomic>
#include <format>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "router/backend.h"
#include "router/metrics.h"
#include "router/poller.h"
#include "router/upstream.h"

namespace prefixd::router {

namespace {

using nlohmann::ordered_json;

// The project's error shape: {"error": {"message", "type", "param", "code"}}.
http::Response error_response(int status, std::string_view message, std::string_view code) {
  const ordered_json body = {{"error",
                      {{"message", message},
                       {"type", status >= 500 ? "server_error" : "invalid_request_error"},
                       {"param", nullptr},
                       {"code", code}}}};
  return http::Response{.status = status, .content_type = "application/json", .body = body.dump()};
}

// The session a request names: prompt_cache_key > user, at the root or inside extra_body.
std::string session_of(const ordered_json& body) {
  for (const char* field : {"prompt_cache_key", "user"}) {
    for (const ordered_json* where : {&body, body.contains("extra_body") ? &body["extra_body"] : nullptr}) {
      if (where == nullptr || !where->is_object()) continue;
      const auto found = where->find(field);
      if (found != where->end() && found->is_string() && !found->get<std::string>().empty()) return *found;
    }
  }
  return {};
}

// Headers of the client's request that the backend needs to see (who is asking).
std::vector<std::pair<std::string, std::string>> forwarded_headers(const http::Request& req) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* name : {"Authorization", "X-Api-Key"}) {
    if (req.has_header(name)) out.emplace_back(name, std::string(req.header(name)));
  }
  return out;
}

// Sessions remembered for stickiness; past this many the map starts over (a forgotten session is
// routed by prefix, which finds its backend anyway while that holds its history).
constexpr std::size_t kMaxSessions = 1 << 16;

}  // namespace

class Router::Impl {
 public:
  explicit Impl(RouterOptions options)
      : options_(std::move(options)),
        transport_(options_.http, http::Handlers{
                                      .handle = [this](http::Request& req) { return handle(req); },
                                      .is_quick = [](const http::Request& req) {
                                        return req.path == "/health" || req.path == "/metrics";
                                      },
                                      .error = [](int status, std::string_view message, std::string_view code) {
                                        return error_response(status, message, code);
                                      },
                                  }) {
    if (options_.backends.empty()) throw std::invalid_argument("at least one --backend is needed");
    for (const std::string& url : options_.backends) backends_.push_back(std::make_unique<Backend>(url));
  }

  bool run() {
    if (!transport_.listen()) return false;
    poller_ = std::make_unique<BackendPoller>(
        std::span<const std::unique_ptr<Backend>>(backends_),
        PollerOptions{.health_interval = options_.health_interval,
                      .summary_interval = options_.policy == Policy::prefix ? options_.summary_interval
                                                                            : std::chrono::milliseconds(0),
                      .api_key = options_.backend_api_key,
                      .kv_events = options_.kv_events});
    spdlog::info("routing on http://{}:{} to {} backends ({} policy)", options_.http.host, transport_.bound_port(),
                 backends_.size(), policy_name(options_.policy));
    transport_.run();
    poller_.reset();
    return true;
  }

  void shutdown(std::chrono::milliseconds grace) { transport_.shutdown(grace); }
  int bound_port() const { return transport_.bound_port(); }

 private:
  http::Response handle(http::Request& req) {
    try {
      const bool get = req.method == "GET";
      if (get && req.path == "/health") return health();
      if (get && req.path == "/metrics") {
        return http::Response{.status = 200, .content_type = "text/plain; version=0.0.4; charset=utf-8",
                              .body = metrics_.text(backends_)};
      }
      if (get && (req.path == "/v1/models" || req.path.starts_with("/v1/models/"))) return forward_get(req);
      if (req.method == "POST" && req.path == "/v1/chat/completions") return route(req, "chat");
      if (req.method == "POST" && req.path == "/v1/completions") return route(req, "completions");
      return error_response(404, std::format("no route for {} {}", req.method, req.path), "not_found");
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      return error_response(500, std::string("internal error: ") + e.what(), "internal_error");
    }
  }

  http::Response health() const {
    const auto healthy = std::ranges::count_if(backends_, [](const auto& b) { return b->healthy(); });
    const ordered_json body = {{"status", healthy > 0 ? "ok" : "unavailable"}, {"backends", backends_.size()},
                       {"healthy_backends", healthy}};
    return http::Response{.status = healthy > 0 ? 200 : 503, .content_type = "application/json", .body = body.dump()};
  }

  http::Response forward_get(const http::Request& req) {
    for (const auto& backend : backends_) {
      if (!backend->healthy()) continue;
      UpstreamCall call(backend->address(), UpstreamRequest{.method = "GET", .path = req.target, .headers = forwarded_headers(req)},
                        UpstreamTimeouts{.read = std::chrono::seconds(30)});
      const UpstreamCall::Head head = call.wait_head();
      if (!head.answered || head.status >= 500) continue;
      std::string body = call.read_all();
      return http::Response{.status = head.status, .content_type = head.content_type, .body = std::move(body)};
    }
    metrics_.no_backend();
    return error_response(503, "no healthy backend", "no_backend");
  }

  // What the router knows of one request while it picks backends for it.
  struct Routing {
    std::string endpoint;               // "chat" or "completions"
    std::string session;                // tenant credentials + session name; empty: none
    std::optional<std::vector<std::string>> chain;  // asked for once, when needed
    std::int64_t prompt_tokens = 0;
    std::vector<bool> tried;
  };

  std::optional<Choice> choose(const http::Request& req, const ordered_json& body, Routing& r) {
    std::vector<std::size_t> healthy;
    for (std::size_t i = 0; i < backends_.size(); ++i) {
      if (backends_[i]->healthy() && !r.tried[i]) healthy.push_back(i);
    }
    if (healthy.empty()) return std::nullopt;
    const std::size_t turn = rotation_.fetch_add(1);
    if (options_.policy == Policy::round_robin) {
      return Choice{.backend = healthy[turn % healthy.size()], .reason = Reason::round_robin};
    }
    if (!r.session.empty()) {
      std::lock_guard lock(sessions_mutex_);
      if (const auto found = sessions_.find(r.session);
          found != sessions_.end() && std::ranges::contains(healthy, found->second)) {
        return Choice{.backend = found->second, .reason = Reason::session};
      }
    }
    if (!r.chain) r.chain = fetch_chain(req, body, r, *backends_[healthy[turn % healthy.size()]]);
    std::vector<Candidate> candidates;
    for (std::size_t i : healthy) {
      candidates.push_back({.backend = i, .matched_blocks = backends_[i]->matched_blocks(*r.chain),
                            .load = backends_[i]->load()});
    }
    return choose_by_prefix(candidates, backends_[healthy.front()]->block_size(), options_.load_weight, turn);
  }

  // The request's block chain as `backend` addresses it for this caller; empty when it cannot say.
  std::vector<std::string> fetch_chain(const http::Request& req, const ordered_json& body, Routing& r, const Backend& backend) {
    httplib::Client client(backend.address().host, backend.address().port);
    client.set_connection_timeout(std::chrono::seconds(2));
    client.set_read_timeout(std::chrono::seconds(60));
    httplib::Headers headers;
    for (auto& [name, value] : forwarded_headers(req)) headers.emplace(name, value);
    const ordered_json query = {{"endpoint", r.endpoint}, {"request", body}};
    const auto res = client.Post("/v1/cache/chain", headers, query.dump(), "application/json");
    if (!res || res->status != 200) return {};
    const ordered_json answer = ordered_json::parse(res->body, nullptr, false);
    if (answer.is_discarded() || !answer.contains("blocks") || !answer["blocks"].is_array()) return {};
    r.prompt_tokens = answer.value("prompt_tokens", 0);
    std::vector<std::string> chain;
    for (const auto& block : answer["blocks"]) {
      if (block.is_string()) chain.push_back(block.get<std::string>());
    }
    return chain;
  }

  http::Response route(http::Request& req, std::string endpoint) {
    // Keys kept in the order sent: the backend renders the chain query's request with its own chat
    // template, which prints tools and arguments in that order; a sorted copy would ask for the
    // blocks of a prompt this request does not have.
    const ordered_json body = ordered_json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return error_response(400, "the request body must be a JSON object", "invalid_json");
    }
    Routing r{.endpoint = std::move(endpoint), .tried = std::vector<bool>(backends_.size(), false)};
    if (const std::string session = session_of(body); !session.empty()) {
      r.session = std::string(req.header("Authorization")) + '\x1f' + std::string(req.header("X-Api-Key")) + '\x1f' + session;
    }
    std::optional<http::Response> last_error;
    for (bool first = true;; first = false) {
      const std::optional<Choice> choice = choose(req, body, r);
      if (!choice) break;
      if (!first) metrics_.retry();
      metrics_.decision(choice->reason, choice->matched_tokens, choice->reason == Reason::session ? 0 : r.prompt_tokens);
      r.tried[choice->backend] = true;
      Backend& backend = *backends_[choice->backend];
      auto attempt = forward(req, backend, r, last_error);
      if (attempt) return std::move(*attempt);
    }
    if (last_error) return std::move(*last_error);
    metrics_.no_backend();
    return error_response(503, "no healthy backend could take the request", "no_backend");
  }

  // One attempt on `backend`: the response to relay, or nullopt to try the next backend (nothing
  // reached the client). A 5xx answer is kept in `last_error` to relay when no backend is left.
  std::optional<http::Response> forward(const http::Request& req, Backend& backend, Routing& r,
                                        std::optional<http::Response>& last_error) {
    auto in_flight = std::make_unique<Backend::InFlight>(backend);
    auto call = std::make_unique<UpstreamCall>(
        backend.address(), UpstreamRequest{.path = req.path, .body = req.body, .headers = forwarded_headers(req)},
        UpstreamTimeouts{});
    const UpstreamCall::Head head = call->wait_head();
    if (!head.answered || head.failed_before_body) {
      spdlog::warn("backend {} failed before answering {}: {}", backend.url(), req.path, head.error);
      if (!head.answered) backend.set_healthy(false);  // drained until a health check passes
      metrics_.request(backend.url(), "error");
      return std::nullopt;
    }
    if (head.status >= 500) {
      std::string error_body = call->read_all();
      metrics_.request(backend.url(), "error");
      last_error = http::Response{.status = head.status, .content_type = head.content_type, .body = std::move(error_body)};
      return std::nullopt;
    }
    remember(backend, r, head.status);
    if (head.content_type.starts_with("text/event-stream")) {
      metrics_.request(backend.url(), "ok");
      http::Response res{.status = head.status, .content_type = head.content_type};
      res.headers.push_back({"Cache-Control", "no-cache"});
      std::shared_ptr<UpstreamCall> relay = std::move(call);
      std::shared_ptr<Backend::InFlight> held = std::move(in_flight);
      res.stream = [this, relay, held, url = backend.url()](http::ChunkWriter& out) {
        if (!relay_event_stream(*relay, out, "the backend").empty()) metrics_.stream_error(url);
      };
      return res;
    }
    std::string reply = call->read_all();
    if (const std::string failure = call->failure(); !failure.empty()) {
      spdlog::warn("backend {} failed while answering {}: {}", backend.url(), req.path, failure);
      metrics_.request(backend.url(), "error");
      return std::nullopt;
    }
    metrics_.request(backend.url(), "ok");
    return http::Response{.status = head.status, .content_type = head.content_type, .body = std::move(reply)};
  }

  // After a backend took a request: its session stays there, and its prompt's blocks count as
  // held there before the next summary says so.
  void remember(Backend& backend, const Routing& r, int status) {
    if (status >= 400 || options_.policy != Policy::prefix) return;
    const auto index = static_cast<std::size_t>(
        std::ranges::find_if(backends_, [&](const auto& b) { return b.get() == &backend; }) - backends_.begin());
    if (!r.session.empty()) {
      std::lock_guard lock(sessions_mutex_);
      if (sessions_.size() >= kMaxSessions) sessions_.clear();
      sessions_[r.session] = index;
    }
    if (r.chain) backend.add_blocks(*r.chain);
  }

  RouterOptions options_;
  std::vector<std::unique_ptr<Backend>> backends_;
  RouterMetrics metrics_;
  std::atomic<std::size_t> rotation_{0};
  std::mutex sessions_mutex_;
  std::unordered_map<std::string, std::size_t> sessions_;  // session -> backend index
  std::unique_ptr<BackendPoller> poller_;
  http::Server transport_;  // last: its workers call into the members above
};

Router::Router(RouterOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Router::~Router() = default;
bool Router::run() { return impl_->run(); }
void Router::shutdown(std::chrono::milliseconds grace) { impl_->shutdown(grace); }
int Router::bound_port() const { return impl_->bound_port(); }

}  // namespace prefixd::router
