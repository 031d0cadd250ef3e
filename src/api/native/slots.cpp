#include "api/native/slots.h"

#include <charconv>
#include <chrono>
#include <expected>
#include <format>
#include <functional>

#include <spdlog/spdlog.h>

#include "api/auth/access.h"
#include "api/control/cache_artifacts.h"
#include "api/openai/request_parser.h"

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

ApiError shutting_down() { return server_busy("the server is shutting down"); }

ordered_json slot_json(const scheduler::SlotState& s, std::int32_t context) {
  const std::int32_t remaining = s.processing ? std::max(0, s.max_new - s.generated) : -1;
  return {{"id", s.id},
          {"id_task", s.processing ? static_cast<std::int64_t>(s.task) : -1},
          {"n_ctx", context},
          {"speculative", s.speculative},
          {"is_processing", s.processing},
          {"n_prompt_tokens", s.prompt_tokens},
          {"n_past", s.computed},
          {"n_cached", s.kept_tokens},
          {"next_token", ordered_json::array({{{"has_next_token", s.processing},
                                               {"has_new_line", false},
                                               {"n_remain", remaining},
                                               {"n_decoded", s.generated}}})}};
}

// The slot named in the path: an integer in [0, slots).
std::expected<std::int32_t, ApiError> slot_id(std::string_view text, std::int32_t slots) {
  std::int32_t id = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (error != std::errc{} || end != text.data() + text.size() || id < 0 || id >= slots) {
    return std::unexpected(invalid_param("id_slot", std::format("the slot must be an integer from 0 to {} (--parallel)", slots - 1)));
  }
  return id;
}

// The file of a save or restore in --slot-save-path.
std::expected<std::filesystem::path, ApiError> slot_file(const SlotOptions& options, const ordered_json& body) {
  if (options.save_path.empty()) {
    return std::unexpected(ApiError{.status = 501,
                                    .message = "slot save and restore are off: start the server with --slot-save-path DIR",
                                    .type = "not_supported_error",
                                    .code = "slot_save_path_unset"});
  }
  const auto name = body.find("filename");
  if (name == body.end() || !name->is_string() || !safe_file_name(name->get<std::string>())) {
    return std::unexpected(invalid_param(
        "filename", "'filename' must be 1 to 128 characters of letters, digits, '.', '_' and '-', not starting with '.'"));
  }
  return options.save_path / name->get<std::string>();
}

// Runs one artifact operation on the scheduler thread: its result, or the error to answer.
std::expected<cache::ArtifactInfo, ApiError> on_cache(scheduler::Scheduler& scheduler,
                                                      const std::function<cache::ArtifactInfo(cache::CacheAdmin&)>& operation) {
  std::expected<cache::ArtifactInfo, ApiError> out = std::unexpected(shutting_down());
  scheduler.ask_cache([&](cache::CacheAdmin& cache) {
    try {
      out = operation(cache);
    } catch (const cache::ArtifactError& e) {
      out = std::unexpected(artifact_error(e));
    }
  });
  return out;
}

// The answer to a save or restore, in llama-server's fields (its count, bytes and timing names).
http::Response slot_file_answer(std::int32_t id, const std::filesystem::path& path, const cache::ArtifactInfo& info,
                                const char* count, const char* bytes, const char* timing, Clock::time_point t0) {
  const ordered_json out = {{"id_slot", id},
                            {"filename", path.filename().string()},
                            {count, info.tokens},
                            {bytes, info.bytes},
                            {"timings", {{timing, ms_since(t0)}}}};
  return json_response(200, out.dump());
}

http::Response save(scheduler::Scheduler& scheduler, const SlotOptions& options, std::int32_t id, const ordered_json& body) {
  auto path = slot_file(options, body);
  if (!path) return error_response(path.error());
  const auto kept = scheduler.slot_prompt(id);
  if (!kept) return error_response(shutting_down());
  if (!*kept) {
    return error_response(ApiError{.status = 404,
                                   .message = std::format("slot {} has left nothing to the cache yet", id),
                                   .code = "nothing_cached"});
  }
  const auto t0 = Clock::now();
  const auto info = on_cache(scheduler, [&](cache::CacheAdmin& cache) {
    return cache.save_artifact((*kept)->key, (*kept)->tokens, *path);
  });
  if (!info) return error_response(info.error());
  spdlog::info("slots: slot {} saved to {} ({} tokens, {} bytes)", id, path->filename().string(), info->tokens, info->bytes);
  return slot_file_answer(id, *path, *info, "n_saved", "n_written", "save_ms", t0);
}

http::Response restore(scheduler::Scheduler& scheduler, const SlotOptions& options, std::int32_t id, const ordered_json& body,
                       const cache::ScopeId& scope) {
  auto path = slot_file(options, body);
  if (!path) return error_response(path.error());
  const auto t0 = Clock::now();
  const auto info = on_cache(scheduler, [&](cache::CacheAdmin& cache) { return cache.load_artifact(*path, scope); });
  if (!info) return error_response(info.error());
  spdlog::info("slots: {} restored for slot {} ({} tokens, {} bytes)", path->filename().string(), id, info->tokens, info->bytes);
  return slot_file_answer(id, *path, *info, "n_restored", "n_read", "restore_ms", t0);
}

}  // namespace

http::Response serve_slots(scheduler::Scheduler& scheduler, const RouteContext& route, const SlotOptions& options,
                           http::Request& req) {
  const auto admin = route.caller(req).and_then([](const Caller& c) { return require_admin(c, "/slots"); });
  if (!admin) return error_response(admin.error());
  const std::string fail = req.query_param("fail_on_no_slot");
  const auto slots = scheduler.slots();
  if (!slots) return error_response(shutting_down());
  if (fail == "1" || fail == "true") {
    if (std::ranges::none_of(*slots, [](const scheduler::SlotState& s) { return !s.processing; })) {
      return error_response(server_busy("no slot is idle"));
    }
  }
  ordered_json out = ordered_json::array();
  for (const auto& s : *slots) out.push_back(slot_json(s, options.context));
  return json_response(200, out.dump());
}

http::Response serve_slot_action(scheduler::Scheduler& scheduler, const RouteContext& route, const SlotOptions& options,
                                 http::Request& req, std::string_view id_text) {
  const auto caller = route.caller(req);
  if (!caller) return error_response(caller.error());
  if (auto admin = require_admin(*caller, "/slots"); !admin) return error_response(admin.error());
  const auto id = slot_id(id_text, scheduler.slot_count());
  if (!id) return error_response(id.error());
  const std::string action = req.query_param("action");
  if (action == "erase") {
    const auto erased = scheduler.erase_slot(*id);
    if (!erased) return error_response(shutting_down());
    return json_response(200, ordered_json({{"id_slot", *id}, {"n_erased", *erased}}).dump());
  }
  if (action != "save" && action != "restore") {
    return error_response(invalid_param("action", "'action' must be save, restore or erase"));
  }
  const auto body = parse_json_object(req.body.empty() ? std::string_view("{}") : std::string_view(req.body), route.parse.max_json_nodes);
  if (!body) return error_response(body.error());
  return action == "save" ? save(scheduler, options, *id, *body)
                          : restore(scheduler, options, *id, *body, tenant_scope(caller->tenant));
}

}  // namespace prefixd::api
