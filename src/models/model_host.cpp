#include "models/model_host.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <ctime>
#include <format>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "models/model_child.h"
#include "router/upstream.h"

namespace prefixd::models {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

enum class State { unloaded, loading, loaded, unloading, failed };

const char* state_name(State s) {
  switch (s) {
    case State::unloaded: return "unloaded";
    case State::loading: return "loading";
    case State::loaded: return "loaded";
    case State::unloading: return "unloading";
    case State::failed: return "failed";
  }
  return "unloaded";
}

http::Response error(int status, std::string message, std::string code, std::string param = {}) {
  const json body = {{"error", {{"message", std::move(message)},
                                {"type", status == 404 ? "not_found_error" : status >= 500 ? "server_error" : "invalid_request_error"},
                                {"param", param.empty() ? json(nullptr) : json(param)},
                                {"code", std::move(code)}}}};
  return http::Response{.status = status, .content_type = "application/json", .body = body.dump()};
}

// A loopback port free now: the kernel's pick for port 0, released at once for the child to bind.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("no socket for a model's port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  if (port == 0) throw std::runtime_error("no free loopback port for a model");
  return port;
}

std::vector<std::pair<std::string, std::string>> forwarded_headers(const http::Request& req) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* name : {"Authorization", "X-Api-Key", "Accept", "anthropic-version", "OpenAI-Beta"}) {
    if (req.has_header(name)) out.emplace_back(name, std::string(req.header(name)));
  }
  return out;
}

}  // namespace

std::string label_metrics(std::string_view text, std::string_view label, std::vector<std::string>& seen) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    if (line.starts_with("#")) {
      // "# HELP name ..." / "# TYPE name ...": once per family and kind over every text.
      const std::size_t name_end = line.find(' ', 7);
      const std::string key(line.substr(0, name_end == std::string_view::npos ? line.size() : name_end));
      if (std::ranges::find(seen, key) != seen.end()) continue;
      seen.push_back(key);
      out.append(line).push_back('\n');
      continue;
    }
    const std::size_t brace = line.find('{');
    const std::size_t space = line.find(' ');
    if (brace != std::string_view::npos && brace < space) {
      out.append(line.substr(0, brace + 1)).append(label);
      if (line[brace + 1] != '}') out.push_back(',');
      out.append(line.substr(brace + 1));
    } else if (space != std::string_view::npos) {
      out.append(line.substr(0, space)).push_back('{');
      out.append(label).push_back('}');
      out.append(line.substr(space));
    } else {
      out.append(line);
    }
    out.push_back('\n');
  }
  return out;
}

class ModelHost::Impl {
 public:
  explicit Impl(HostOptions options)
      : options_(std::move(options)),
        transport_(options_.http, http::Handlers{
                                      .handle = [this](http::Request& req) { return handle(req); },
                                      .is_quick = [](const http::Request& req) { return req.path == "/health"; },
                                      .error = [](int status, std::string_view message, std::string_view code) {
                                        return error(status, std::string(message), std::string(code));
                                      },
                                  }) {
    for (const CatalogModel& m : options_.models) entries_.push_back(std::make_unique<Entry>(Entry{.model = m}));
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    watchers_.clear();  // joined: each ends once its child is healthy, gone or timed out
    idle_thread_.request_stop();
    if (idle_thread_.joinable()) idle_thread_.join();
    for (auto& e : entries_) {
      if (e->child) e->child->stop();
    }
  }

  bool run() {
    if (!transport_.listen()) return false;
    idle_thread_ = std::jthread([this](const std::stop_token& stop) { unload_idle(stop); });
    std::string names;
    for (const auto& e : entries_) names += (names.empty() ? "" : ", ") + e->model.id;
    spdlog::info("models: {} in all ({}); at most {} loaded at once{}{}, {}", entries_.size(), names,
                 options_.max_loaded > 0 ? std::to_string(options_.max_loaded) : std::string("any number"),
                 options_.max_bytes > 0 ? std::format(" and {:.0f} MiB of model files", options_.max_bytes / 1048576.0) : "",
                 options_.idle_unload.count() > 0 ? std::format(", unloaded after {} s unused", options_.idle_unload.count()) : "",
                 options_.autoload ? "each loaded by its first request" : "loaded only by POST /models/load");
    spdlog::info("listening on http://{}:{} (models by name)", options_.http.host, transport_.bound_port());
    transport_.run();
    idle_thread_.request_stop();
    return true;
  }

  void shutdown(std::chrono::milliseconds grace) { transport_.shutdown(grace); }
  int bound_port() const { return transport_.bound_port(); }

 private:
  struct Entry {
    CatalogModel model;
    State state = State::unloaded;
    std::string failure;  // why the last load failed
    std::unique_ptr<ModelChild> child;
    int port = 0;
    std::int64_t in_flight = 0;
    Clock::time_point last_used{};
    std::uint64_t generation = 0;  // loads begun
    std::int64_t loads = 0;
    double load_seconds = 0;       // of the latest load
    std::int64_t unloads = 0;
  };

  // A request's hold on a loaded model: it is not unloaded while held.
  class Lease {
   public:
    Lease(Impl& host, Entry& entry) : host_(host), entry_(entry) {}
    ~Lease() { host_.release(entry_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    int port() const { return entry_.port; }

   private:
    Impl& host_;
    Entry& entry_;
  };

  http::Response handle(http::Request& req) {
    try {
      const bool get = req.method == "GET";
      if (get && req.path == "/health") return http::Response{.body = R"({"status":"ok"})"};
      const bool loads = req.method == "POST" && (req.path == "/models/load" || req.path == "/models/unload");
      const bool own_metrics = get && req.path == "/metrics" && req.query_param("model").empty();
      if (options_.authorize) {
        const std::string_view admin_for = loads ? "loading and unloading models" : own_metrics ? "/metrics" : "";
        if (auto refused = options_.authorize(req, admin_for)) {
          return http::Response{.status = refused->first, .content_type = "application/json", .body = refused->second};
        }
      }
      if (get && (req.path == "/v1/models" || req.path == "/models")) return list();
      if (get && req.path.starts_with("/v1/models/")) return one(req.path.substr(11));
      if (loads) return load_or_unload(req, req.path == "/models/load");
      if (own_metrics) return metrics(req);
      if (get && req.path == "/props" && req.query_param("model").empty()) {
        const json body = {{"role", "router"}, {"models_autoload", options_.autoload}, {"max_instances", options_.max_loaded}};
        return http::Response{.body = body.dump()};
      }
      return forward(req);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      return error(500, std::string("internal error: ") + e.what(), "internal_error");
    }
  }

  Entry* find(std::string_view id) {
    for (auto& e : entries_) {
      if (e->model.id == id) return e.get();
    }
    return nullptr;
  }

  http::Response unknown(std::string_view id, std::string param) {
    std::string names;
    for (const auto& e : entries_) names += (names.empty() ? "" : ", ") + e->model.id;
    return error(404, std::format("model '{}' is not one of this server's models ({})", id, names), "model_not_found",
                 std::move(param));
  }

  json describe(const Entry& e) const {
    json status = {{"value", state_name(e.state)}};
    if (e.state == State::failed) status["failure"] = e.failure;
    if (e.state == State::loaded) status["load_seconds"] = e.load_seconds;
    return {{"id", e.model.id}, {"object", "model"}, {"created", created_}, {"owned_by", "prefixd"},
            {"path", e.model.file.string()}, {"status", status}, {"in_flight", e.in_flight}};
  }

  http::Response list() {
    json data = json::array();
    {
      std::lock_guard lock(mutex_);
      for (const auto& e : entries_) data.push_back(describe(*e));
    }
    return http::Response{.body = json{{"object", "list"}, {"data", data}}.dump()};
  }

  http::Response one(std::string_view id) {
    std::lock_guard lock(mutex_);
    const Entry* e = find(id);
    if (e == nullptr) return unknown(id, "model");
    return http::Response{.body = describe(*e).dump()};
  }

  // POST /models/load and /models/unload {"model": ID}: llama-server's shapes. A load returns once
  // the model answers (or failed); an unload once it stopped (after the requests it serves).
  http::Response load_or_unload(const http::Request& req, bool load) {
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return error(400, "the request body must be a JSON object", "invalid_json");
    const auto model = body.find("model");
    if (model == body.end() || !model->is_string()) return error(400, "'model' must name a model", "invalid_request", "model");
    const std::string id = model->get<std::string>();
    std::unique_lock lock(mutex_);
    Entry* e = find(id);
    if (e == nullptr) return unknown(id, "model");
    if (load) {
      if (e->state == State::loaded || e->state == State::loading) {
        return error(400, std::format("model '{}' is already {}", id, state_name(e->state)), "model_already_loaded", "model");
      }
      {
        auto held = hold(*e, lock, true);
        if (!held) return std::move(held.error());
        lock.unlock();  // before the lease goes: its release takes the lock
      }
      return http::Response{.body = R"({"success":true})"};
    }
    if (e->state != State::loaded && e->state != State::loading) {
      return error(400, std::format("model '{}' is not loaded ({})", id, state_name(e->state)), "model_not_loaded", "model");
    }
    changed_.wait(lock, [&] { return e->state != State::loading; });
    if (e->state != State::loaded) return http::Response{.body = R"({"success":true})"};
    e->state = State::unloading;  // no new request is let in; it stops after its last one
    std::unique_ptr<ModelChild> child;
    if (e->in_flight == 0) child = take_child(*e);
    changed_.notify_all();
    changed_.wait(lock, [&] { return e->state != State::unloading; });
    lock.unlock();
    if (child) child->stop();
    spdlog::info("models: {} unloaded (POST /models/unload)", id);
    return http::Response{.body = R"({"success":true})"};
  }

  // REQUIRES mutex_ held: the child goes (its stop() is the caller's, outside the lock).
  std::unique_ptr<ModelChild> take_child(Entry& e) {
    e.state = State::unloaded;
    e.port = 0;
    e.unloads += 1;
    return std::move(e.child);
  }

  void release(Entry& e) {
    std::unique_ptr<ModelChild> child;
    {
      std::lock_guard lock(mutex_);
      e.in_flight -= 1;
      e.last_used = Clock::now();
      if (e.state == State::unloading && e.in_flight == 0) child = take_child(e);
    }
    changed_.notify_all();
    if (child) child->stop();
  }

  // Makes room for `e` to load: unloads the least recently used idle models until the limits
  // allow it. REQUIRES mutex_ held; the children to stop go to `stopping`. False when the models
  // in the way all serve requests (or load): the caller waits for one to finish.
  bool make_room(const Entry& e, std::vector<std::unique_ptr<ModelChild>>& stopping) {
    for (;;) {
      std::int64_t count = 0;
      std::uint64_t bytes = 0;
      for (const auto& other : entries_) {
        if (other->state == State::loaded || other->state == State::loading || other->state == State::unloading) {
          count += 1;
          bytes += other->model.bytes;
        }
      }
      const bool over_count = options_.max_loaded > 0 && count + 1 > options_.max_loaded;
      const bool over_bytes = options_.max_bytes > 0 && bytes + e.model.bytes > options_.max_bytes;
      if (!over_count && !over_bytes) return true;
      Entry* victim = nullptr;
      for (auto& other : entries_) {
        if (other->state != State::loaded || other->in_flight > 0) continue;
        if (victim == nullptr || other->last_used < victim->last_used) victim = other.get();
      }
      if (victim == nullptr) return false;
      spdlog::info("models: {} unloaded to make room for {} (least recently used, idle)", victim->model.id, e.model.id);
      stopping.push_back(take_child(*victim));
    }
  }

  // Waits until `e` is loaded (loading it when it is not, if `load`) and holds it: the lease, or
  // the error response. REQUIRES `lock` held on mutex_.
  std::expected<std::unique_ptr<Lease>, http::Response> hold(Entry& e, std::unique_lock<std::mutex>& lock, bool load) {
    const auto deadline = Clock::now() + options_.load_timeout;
    bool tried = false;  // a load this call began (a failure then is final)
    for (;;) {
      if (stopping_) return std::unexpected(error(503, "the server is shutting down", "shutting_down"));
      if (e.state == State::loaded) {
        e.in_flight += 1;
        e.last_used = Clock::now();
        return std::make_unique<Lease>(*this, e);
      }
      if (e.state == State::failed && (tried || !load)) {
        return std::unexpected(error(503, std::format("model '{}' failed to load: {} (POST /models/load tries again)",
                                                      e.model.id, e.failure), "model_load_failed", "model"));
      }
      if ((e.state == State::unloaded || e.state == State::failed) && !load) {
        return std::unexpected(error(503, std::format("model '{}' is not loaded, and this server loads models only when "
                                                      "asked (--no-models-autoload): POST /models/load", e.model.id),
                                     "model_not_loaded", "model"));
      }
      if ((e.state == State::unloaded || e.state == State::failed) && !tried) {
        if (options_.max_bytes > 0 && e.model.bytes > options_.max_bytes) {
          return std::unexpected(error(503, std::format("model '{}' takes {} bytes, more than --models-max-bytes {}",
                                                        e.model.id, e.model.bytes, options_.max_bytes),
                                       "model_too_large", "model"));
        }
        std::vector<std::unique_ptr<ModelChild>> stopping;
        const bool room = make_room(e, stopping);
        if (!stopping.empty()) {
          // The models making room stop before this one starts: their memory is free by then.
          lock.unlock();
          stopping.clear();
          lock.lock();
          changed_.notify_all();
          continue;
        }
        if (room) {
          begin_load(e);
          tried = true;
          continue;
        }
      }
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
        return std::unexpected(error(503, std::format("model '{}' did not become ready in {} s{}", e.model.id,
                                                      options_.load_timeout.count(),
                                                      e.state == State::unloaded ? ": every loaded model is serving requests" : ""),
                                     "model_not_ready", "model"));
      }
    }
  }

  // REQUIRES mutex_ held: starts `e`'s child and a thread that waits for its health.
  void begin_load(Entry& e) {
    e.state = State::loading;
    e.failure.clear();
    e.generation += 1;
    e.port = free_port();
    const auto argv = options_.child_argv(e.model, e.port);
    try {
      e.child = std::make_unique<ModelChild>(argv);
    } catch (const std::exception& ex) {
      e.state = State::failed;
      e.failure = ex.what();
      return;
    }
    spdlog::info("models: loading {} ({}) on port {}", e.model.id, e.model.file.string(), e.port);
    watchers_.emplace_back([this, &e, generation = e.generation, port = e.port, started = Clock::now()](const std::stop_token&) {
      watch_load(e, generation, port, started);
    });
  }

  void watch_load(Entry& e, std::uint64_t generation, int port, Clock::time_point started) {
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(std::chrono::milliseconds(200));
    client.set_read_timeout(std::chrono::seconds(5));
    for (;;) {
      bool timed_out = false;
      {
        std::lock_guard lock(mutex_);
        if (stopping_ || e.generation != generation || e.state != State::loading) return;
        if (!e.child || !e.child->running()) {
          e.state = State::failed;
          e.failure = std::format("its server exited with status {} (see the log above)", e.child ? e.child->exit_status() : -1);
          e.child.reset();
          spdlog::error("models: {} failed to load: {}", e.model.id, e.failure);
          changed_.notify_all();
          return;
        }
        if (Clock::now() - started > options_.load_timeout) {
          e.state = State::failed;
          e.failure = std::format("not ready after {} s", options_.load_timeout.count());
          changed_.notify_all();
          timed_out = true;  // its child is stopped below, outside the lock
        }
      }
      if (timed_out) {
        std::unique_ptr<ModelChild> child;
        {
          std::lock_guard lock(mutex_);
          child = std::move(e.child);
        }
        if (child) child->stop();
        return;
      }
      if (const auto res = client.Get("/health"); res && res->status == 200) {
        std::lock_guard lock(mutex_);
        if (e.generation == generation && e.state == State::loading) {
          e.state = State::loaded;
          e.loads += 1;
          e.last_used = Clock::now();
          e.load_seconds = std::chrono::duration<double>(Clock::now() - started).count();
          spdlog::info("models: {} loaded in {:.2f} s", e.model.id, e.load_seconds);
        }
        changed_.notify_all();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void unload_idle(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (options_.idle_unload.count() <= 0) continue;
      std::vector<std::unique_ptr<ModelChild>> stopping;
      {
        std::lock_guard lock(mutex_);
        for (auto& e : entries_) {
          if (e->state == State::loaded && e->in_flight == 0 && Clock::now() - e->last_used > options_.idle_unload) {
            spdlog::info("models: {} unloaded after {} s unused", e->model.id, options_.idle_unload.count());
            stopping.push_back(take_child(*e));
          }
        }
      }
      if (!stopping.empty()) changed_.notify_all();
    }
  }

  // The model a request names: the body's `model` (POST), else `?model=`.
  std::expected<std::string, http::Response> model_of(const http::Request& req) {
    if (const std::string q = req.query_param("model"); !q.empty()) return q;
    if (req.method == "POST") {
      const json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) {
        return std::unexpected(error(400, "the request body must be a JSON object naming its 'model'", "invalid_json"));
      }
      if (const auto m = body.find("model"); m != body.end() && m->is_string() && !m->get<std::string>().empty()) {
        return m->get<std::string>();
      }
    }
    return std::unexpected(error(400, "this server serves several models: name one in 'model' (GET /v1/models lists them)",
                                 "model_required", "model"));
  }

  http::Response forward(http::Request& req) {
    const auto id = model_of(req);
    if (!id) return id.error();
    std::unique_ptr<Lease> lease;
    {
      std::unique_lock lock(mutex_);
      Entry* e = find(*id);
      if (e == nullptr) return unknown(*id, "model");
      auto held = hold(*e, lock, options_.autoload && req.query_param("autoload") != "false");
      if (!held) return std::move(held.error());
      lease = std::move(*held);
    }
    auto call = std::make_unique<router::UpstreamCall>(
        router::BackendAddress{.host = "127.0.0.1", .port = lease->port()},
        router::UpstreamRequest{.method = req.method, .path = req.target, .body = req.body,
                                .content_type = req.has_header("Content-Type") ? std::string(req.header("Content-Type"))
                                                                              : std::string("application/json"),
                                .headers = forwarded_headers(req)},
        router::UpstreamTimeouts{});
    const router::UpstreamCall::Head head = call->wait_head();
    if (!head.answered) {
      return error(503, std::format("model '{}' did not answer: {}", *id, head.error), "model_unavailable", "model");
    }
    if (head.content_type.starts_with("text/event-stream")) {
      http::Response res{.status = head.status, .content_type = head.content_type};
      res.headers.push_back({"Cache-Control", "no-cache"});
      std::shared_ptr<router::UpstreamCall> relay = std::move(call);
      std::shared_ptr<Lease> held = std::move(lease);  // held until the stream ends
      res.stream = [relay, held](http::ChunkWriter& out) { router::relay_event_stream(*relay, out, "the model's server"); };
      return res;
    }
    std::string body = call->read_all();
    return http::Response{.status = head.status, .content_type = head.content_type, .body = std::move(body)};
  }

  // The front's own families, then each loaded model's, labelled model="ID".
  http::Response metrics(const http::Request& req) {
    std::string out;
    std::vector<std::pair<std::string, int>> loaded;
    {
      std::lock_guard lock(mutex_);
      out += "# HELP prefixd_model_state Whether each model is in each state (1) or not (0).\n"
             "# TYPE prefixd_model_state gauge\n";
      for (const auto& e : entries_) {
        for (const State s : {State::unloaded, State::loading, State::loaded, State::unloading, State::failed}) {
          out += std::format("prefixd_model_state{{model=\"{}\",state=\"{}\"}} {}\n", e->model.id, state_name(s), e->state == s ? 1 : 0);
        }
      }
      out += "# HELP prefixd_model_loads_total Loads of each model that became ready.\n# TYPE prefixd_model_loads_total counter\n";
      for (const auto& e : entries_) out += std::format("prefixd_model_loads_total{{model=\"{}\"}} {}\n", e->model.id, e->loads);
      out += "# HELP prefixd_model_unloads_total Unloads of each model.\n# TYPE prefixd_model_unloads_total counter\n";
      for (const auto& e : entries_) out += std::format("prefixd_model_unloads_total{{model=\"{}\"}} {}\n", e->model.id, e->unloads);
      out += "# HELP prefixd_model_load_seconds The latest load of each model, from start to ready.\n"
             "# TYPE prefixd_model_load_seconds gauge\n";
      for (const auto& e : entries_) out += std::format("prefixd_model_load_seconds{{model=\"{}\"}} {}\n", e->model.id, e->load_seconds);
      out += "# HELP prefixd_model_requests_in_flight Requests each model serves now.\n"
             "# TYPE prefixd_model_requests_in_flight gauge\n";
      for (const auto& e : entries_) {
        out += std::format("prefixd_model_requests_in_flight{{model=\"{}\"}} {}\n", e->model.id, e->in_flight);
        if (e->state == State::loaded) loaded.emplace_back(e->model.id, e->port);
      }
    }
    std::vector<std::string> seen;
    for (const auto& [id, port] : loaded) {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(std::chrono::seconds(10));
      httplib::Headers headers;
      for (const auto& [name, value] : forwarded_headers(req)) headers.emplace(name, value);
      if (const auto res = client.Get("/metrics", headers); res && res->status == 200) {
        out += label_metrics(res->body, std::format("model=\"{}\"", id), seen);
      }
    }
    return http::Response{.content_type = "text/plain; version=0.0.4; charset=utf-8", .body = std::move(out)};
  }

  HostOptions options_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a model's state or requests changed
  std::vector<std::unique_ptr<Entry>> entries_;  // guarded by mutex_ (their fields), fixed in number
  bool stopping_ = false;
  std::int64_t created_ = static_cast<std::int64_t>(std::time(nullptr));
  std::vector<std::jthread> watchers_;  // one per load begun; each ends on its own
  std::jthread idle_thread_;
  http::Server transport_;  // last: its workers call into the members above
};

ModelHost::ModelHost(HostOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
ModelHost::~ModelHost() = default;
bool ModelHost::run() { return impl_->run(); }
void ModelHost::shutdown(std::chrono::milliseconds grace) { impl_->shutdown(grace); }
int ModelHost::bound_port() const { return impl_->bound_port(); }

}  // namespace prefixd::models
