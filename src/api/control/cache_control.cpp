// The control plane's dispatch and its key operations (set, update, fork, clear, meta,
// token_count). Module chains: cache_control_modules.cpp; artifacts: cache_control_artifacts.cpp.
#include "api/control/cache_control.h"

#include <format>
#include <utility>

#include <spdlog/spdlog.h>

#include "api/control/cache_control_internal.h"

namespace prefixd::api {
namespace {

using control::failure;
using control::success;

constexpr std::chrono::seconds kPrefillPoll{1};

constexpr CacheOperation kOperations[] = {
    {"capabilities", true, false}, {"set", false, true},  {"update", false, true},      {"fork", false, true},
    {"clear", false, true},        {"meta", true, true},  {"token_count", true, true}, {"prepare_modules", false, true},
    {"save", false, true},         {"load", false, true},
};

ApiError conflict(std::string message, std::string reason) {
  return ApiError{.status = 409, .message = std::move(message), .code = std::move(reason)};
}

ApiError no_key(const std::string& name) {
  return ApiError{.status = 404, .message = std::format("no prompt cache key '{}' in this tenant", name), .param = "key",
                  .code = "key_not_found"};
}

}  // namespace

CacheControl::CacheControl(const PromptBuilder& prompts, scheduler::Scheduler& scheduler, ParseOptions parse,
                           ControlOptions options)
    : prompts_(prompts),
      scheduler_(scheduler),
      parse_(std::move(parse)),
      options_(std::move(options)),
      resumes_at_checkpoints_(scheduler.cache_stats().reuse_mode == "checkpoints") {}

std::span<const CacheOperation> CacheControl::operations() { return kOperations; }

namespace {

std::size_t operation_index(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kOperations); ++i) {
    if (kOperations[i].name == name) return i;
  }
  return 0;
}

}  // namespace

void CacheControl::add_metrics(metrics::Registry& r) const {
  static_assert(std::size(kOperations) == kOperationCount);
  constexpr std::array<std::string_view, 3> kResults = {"ok", "error", "unsupported"};
  for (std::size_t i = 0; i < kOperationCount; ++i) {
    for (std::size_t k = 0; k < kResults.size(); ++k) {
      r.counter("prefixd_cache_control_operations_total",
                "Cache control-plane operations answered, by operation and result.",
                static_cast<double>(answered_[i][k].load()),
                {{"operation", std::string(kOperations[i].name)}, {"result", std::string(kResults[k])}});
    }
  }
  const auto [keys, modules] = keys_.totals();
  r.gauge("prefixd_cache_control_keys", "Prompt cache keys held, every tenant.", static_cast<double>(keys));
  r.gauge("prefixd_cache_control_modules", "Prepared modules registered, every tenant.", static_cast<double>(modules));
  r.counter("prefixd_cache_control_prefill_tokens_total",
            "Prompt tokens the control plane fed (update, set, prepare_modules).",
            static_cast<double>(prefill_tokens_.load()));
}

ControlReply CacheControl::handle(std::string_view operation, std::string_view method, const Caller& caller,
                                  std::string_view body, std::string_view query_key) {
  ControlReply reply = dispatch(operation, method, caller, body, query_key);
  const std::size_t result = reply.status < 400 ? 0 : reply.status == 501 ? 2 : 1;
  answered_[operation_index(operation)][result] += 1;
  return reply;
}

ControlReply CacheControl::dispatch(std::string_view operation, std::string_view method, const Caller& caller,
                                    std::string_view body, std::string_view query_key) {
  const nlohmann::ordered_json caps = capabilities();
  if (operation == "capabilities") {
    nlohmann::ordered_json out = success("capabilities");
    for (const auto& [field, value] : caps.items()) {
      if (field != "supported") out[field] = value;
    }
    out["supported"] = caps["supported"];
    return ControlReply{200, std::move(out)};
  }
  if (!caps["supported"].get<bool>()) {
    return control::unsupported(operation, "the prompt cache is off on this server", caps);
  }
  if ((operation == "save" || operation == "load") && !caps["supports_save"].get<bool>()) {
    return control::unsupported(operation, "artifacts are off: start the server with --cache-disk-path or --cache-artifact-path",
                                caps);
  }
  Context c{.operation = std::string(operation), .caller = caller, .tenant = caller.tenant, .query_key = std::string(query_key)};
  if (method == "POST") {
    auto parsed = parse_json_object(body.empty() ? std::string_view("{}") : body, parse_.max_json_nodes);
    if (!parsed) return failure(operation, parsed.error(), caps);
    c.body = std::move(*parsed);
    // An admin may steer another tenant's keys by naming it; a tenant's key only its own.
    if (const auto t = c.body.find("tenant"); t != c.body.end()) {
      if (!t->is_string()) return failure(operation, invalid_param("tenant", "'tenant' must be a string"), caps);
      auto viewed = view_tenant(caller, t->get<std::string>());
      if (!viewed) return failure(operation, viewed.error(), caps);
      if (*viewed) c.tenant = **viewed;
    }
  } else {
    c.body = nlohmann::ordered_json::object();
  }
  expire_keys();
  ControlReply reply;
  if (operation == "set") {
    reply = set(c);
  } else if (operation == "update") {
    reply = update(c);
  } else if (operation == "fork") {
    reply = fork(c);
  } else if (operation == "clear") {
    reply = clear(c);
  } else if (operation == "meta") {
    reply = meta(c);
  } else if (operation == "token_count") {
    reply = token_count(c);
  } else if (operation == "prepare_modules") {
    reply = prepare_modules(c);
  } else if (operation == "save") {
    reply = save(c);
  } else if (operation == "load") {
    reply = load(c);
  } else {
    return failure(operation, ApiError{.status = 404, .message = "no such operation", .code = "not_found"}, caps);
  }
  if (reply.status >= 400) reply.body["capabilities"] = caps;
  return reply;
}

void CacheControl::adjust(scheduler::GenerationRequest& request, const std::string& tenant,
                          const std::string& prompt_cache_key) const {
  if (!prompt_cache_key.empty()) {
    if (auto session = keys_.session_of(tenant, prompt_cache_key)) request.cache.session_key = std::move(*session);
  }
  if (prompts_.isolation() == CacheIsolation::session) {
    const std::int32_t shared = keys_.shareable_prefix(tenant, request.cache.namespace_digest, request.prompt);
    if (shared > 0 && (request.cache.shared_prefix == cache::kNoFork || shared > request.cache.shared_prefix)) {
      request.cache.shared_prefix = shared;
    }
  }
}

std::expected<scheduler::GenerationRequest, ApiError> CacheControl::build(const KeyConversation& conversation,
                                                                          const std::string& session,
                                                                          const std::string& tenant) const {
  nlohmann::ordered_json body{{"messages", conversation.messages}, {"add_generation_prompt", conversation.add_generation_prompt}};
  if (!session.empty()) body["prompt_cache_key"] = session;
  if (!conversation.tools.is_null()) body["tools"] = conversation.tools;
  if (!conversation.chat_template_kwargs.is_null()) body["chat_template_kwargs"] = conversation.chat_template_kwargs;
  if (conversation.cache_salt) body["cache_salt"] = *conversation.cache_salt;
  auto parsed = parse_chat_request(body.dump(), parse_);
  if (!parsed) return std::unexpected(parsed.error());
  auto built = prompts_.build(*parsed, scheduler_.max_prompt_tokens(), tenant);
  if (!built) return built;
  built->cache.enabled = true;
  built->cache.continuation.clear();
  adjust(*built, tenant, session);
  return built;
}

std::expected<CacheControl::Prefilled, ApiError> CacheControl::prefill(scheduler::GenerationRequest request) {
  request.prefill_only = true;
  request.max_tokens = 1;
  Prefilled out{.request = request};
  auto stream = scheduler_.submit(std::move(request));
  if (!stream) {
    const auto error = stream.error();
    const std::string message = scheduler::submit_error_message(error);
    if (error == scheduler::SubmitError::prompt_too_long) {
      return std::unexpected(ApiError{.status = 400, .message = message, .code = "context_length_exceeded"});
    }
    if (error == scheduler::SubmitError::empty_prompt) return std::unexpected(invalid_request(message));
    return std::unexpected(server_busy(message));
  }
  while (true) {
    auto event = (*stream)->next(std::chrono::duration_cast<std::chrono::milliseconds>(kPrefillPoll));
    if (!event || event->kind != scheduler::StreamEvent::Kind::done) continue;
    if (event->finish == scheduler::FinishReason::error) {
      return std::unexpected(internal_error(event->error.empty() ? "the prefill failed" : event->error));
    }
    if (event->finish == scheduler::FinishReason::cancelled) return std::unexpected(server_busy("the prefill was cancelled"));
    out.report = event->cache;
    prefill_tokens_ += event->cache.fed_tokens;
    return out;
  }
}

cache::ResetReport CacheControl::forget(const std::string& tenant, const KeyRecord& record) {
  cache::ResetReport report;
  if (record.tokens.empty()) return report;
  const std::int32_t keep = keys_.shared_with_others(tenant, record.name, record.cache.namespace_digest, record.tokens);
  scheduler_.ask_cache([&](cache::CacheAdmin& c) { report = c.forget(scheduler::cache_key(record.cache), record.tokens, keep); });
  return report;
}

void CacheControl::expire_keys() {
  for (const auto& [tenant, record] : keys_.take_expired(KeyClock::now())) {
    const cache::ResetReport freed = forget(tenant, record);
    spdlog::info("cache key '{}' of tenant '{}' expired: {} entries, {} bytes freed", record.name, tenant, freed.entries,
                 freed.bytes);
  }
}

// set {key, ttl_seconds?, meta?, replace?, and optionally what update takes}: creates the key.
ControlReply CacheControl::set(Context& c) {
  auto name = control::key_name(c.body, "key", true);
  if (!name) return failure(c.operation, name.error(), {});
  auto ttl = control::ttl_of(c.body);
  if (!ttl) return failure(c.operation, ttl.error(), {});
  auto meta = control::meta_of(c.body);
  if (!meta) return failure(c.operation, meta.error(), {});
  const auto replace = c.body.find("replace");
  if (replace != c.body.end() && !replace->is_boolean()) {
    return failure(c.operation, invalid_param("replace", "'replace' must be a boolean"), {});
  }
  if (const auto old = keys_.find(c.tenant, **name)) {
    if (replace == c.body.end() || !replace->get<bool>()) {
      return failure(c.operation, conflict(std::format("key '{}' exists; pass \"replace\": true to start it over", **name), "key_exists"), {});
    }
    if (auto removed = keys_.remove(c.tenant, **name)) forget(c.tenant, *removed);
  }
  KeyRecord record{.name = **name, .meta = meta->value_or(nlohmann::ordered_json::object()), .ttl = *ttl,
                   .created_unix_ms = control::unix_ms_now(), .last_used = KeyClock::now()};
  if (const auto salt = c.body.find("cache_salt"); salt != c.body.end() && !salt->is_null()) {
    if (!salt->is_string() || salt->get_ref<const std::string&>().empty()) {
      return failure(c.operation, invalid_param("cache_salt", "'cache_salt' must be a non-empty string"), {});
    }
    record.conversation.cache_salt = salt->get<std::string>();
  }
  record.cache.session_key = record.name;
  switch (keys_.add(c.tenant, record)) {
    case KeyError::none: break;
    case KeyError::exists:
      return failure(c.operation, conflict(std::format("key '{}' was created meanwhile", record.name), "key_exists"), {});
    default:
      return failure(c.operation, conflict(std::format("this tenant has {} keys, the most it may keep; clear some", kMaxKeysPerTenant),
                                           "too_many_keys"), {});
  }
  const auto added = keys_.find(c.tenant, record.name);
  if (!added) return failure(c.operation, no_key(record.name), {});
  if (c.body.contains("messages") || c.body.contains("tools")) {
    ControlReply reply = apply_update(c, *added, c.body, true);
    // A set whose conversation is refused creates nothing.
    if (reply.status >= 400) keys_.remove(c.tenant, record.name);
    return reply;
  }
  nlohmann::ordered_json out = success(c.operation);
  out["key"] = record.name;
  out["created"] = true;
  out["tokens"] = 0;
  out["ttl_seconds"] = ttl->has_value() ? nlohmann::ordered_json((*ttl)->count()) : nlohmann::ordered_json(nullptr);
  return ControlReply{200, std::move(out)};
}

// update {key, messages?, tools?, chat_template_kwargs?, thinking?, add_generation_prompt?,
// ttl_seconds?}: appends to the key's conversation and prefills it.
ControlReply CacheControl::update(Context& c) {
  auto name = control::key_name(c.body, "key", true);
  if (!name) return failure(c.operation, name.error(), {});
  auto record = keys_.touch(c.tenant, **name, KeyClock::now());
  if (!record) return failure(c.operation, no_key(**name), {});
  return apply_update(c, std::move(*record), c.body, false);
}

ControlReply CacheControl::apply_update(Context& c, KeyRecord record, const nlohmann::ordered_json& body, bool created) {
  const std::uint64_t read_version = record.version;
  KeyConversation& conv = record.conversation;
  if (const auto salt = body.find("cache_salt"); !created && salt != body.end() && !salt->is_null() &&
                                                 (!salt->is_string() || conv.cache_salt != salt->get<std::string>())) {
    return failure(c.operation, invalid_param("cache_salt", "a key's cache_salt is set when it is created and cannot change"), {});
  }
  // The appended parts are checked on their own first, so an error names the field as sent.
  nlohmann::ordered_json check{{"messages", body.contains("messages") ? body["messages"] : nlohmann::ordered_json::array({{{"role", "user"}, {"content", "x"}}})}};
  for (const char* field : {"tools", "chat_template_kwargs", "thinking", "add_generation_prompt"}) {
    if (body.contains(field)) check[field] = body[field];
  }
  auto checked = parse_chat_request(check.dump(), parse_);
  if (!checked) return failure(c.operation, checked.error(), {});
  std::size_t appended_messages = 0;
  std::size_t appended_tools = 0;
  if (const auto m = body.find("messages"); m != body.end()) {
    for (const auto& message : *m) conv.messages.push_back(message);
    appended_messages = m->size();
  }
  if (!checked->tools.is_null()) {
    if (conv.tools.is_null()) conv.tools = nlohmann::ordered_json::array();
    for (const auto& tool : checked->tools) conv.tools.push_back(tool);
    appended_tools = checked->tools.size();
  }
  if (body.contains("chat_template_kwargs") || body.contains("thinking")) conv.chat_template_kwargs = checked->chat.extra_context;
  if (const auto g = body.find("add_generation_prompt"); g != body.end()) {
    conv.add_generation_prompt = checked->chat.add_generation_prompt;
  } else if (!conv.messages.empty()) {
    // What generation renders next: after a user or tool turn, the assistant's turn opener.
    const std::string role = conv.messages.back().value("role", "");
    conv.add_generation_prompt = role == "user" || role == "tool";
  }
  if (auto ttl = control::ttl_of(body); !ttl) {
    return failure(c.operation, ttl.error(), {});
  } else if (*ttl) {
    record.ttl = *ttl;
  }
  if (conv.messages.empty()) {
    return failure(c.operation, invalid_param("messages", "the key has no messages yet; send at least one to prefill"), {});
  }
  auto built = build(conv, record.cache.session_key, c.tenant);
  if (!built) return failure(c.operation, built.error(), {});
  auto done = prefill(std::move(*built));
  if (!done) return failure(c.operation, done.error(), {});
  record.tokens = done->request.prompt;
  record.cache = done->request.cache;
  record.last_used = KeyClock::now();
  if (const KeyError e = keys_.replace_if(c.tenant, record, read_version); e != KeyError::none) {
    return failure(c.operation, conflict(std::format("key '{}' changed or was cleared while it was being updated", record.name),
                                         "key_changed"), {});
  }
  nlohmann::ordered_json out = success(c.operation);
  out["key"] = record.name;
  if (created) out["created"] = true;
  out["tokens"] = record.tokens.size();
  out["cached_tokens"] = done->report.cached_tokens;
  out["fed_tokens"] = done->report.fed_tokens;
  out["messages"] = conv.messages.size();
  out["appended_messages"] = appended_messages;
  out["appended_tools"] = appended_tools;
  out["add_generation_prompt"] = conv.add_generation_prompt;
  return ControlReply{200, std::move(out)};
}

// fork {from_key, to_key, ttl_seconds?, meta?}: to_key names the same prefix; nothing is copied.
ControlReply CacheControl::fork(Context& c) {
  auto from = control::key_name(c.body, "from_key", true);
  if (!from) return failure(c.operation, from.error(), {});
  auto to = control::key_name(c.body, "to_key", true);
  if (!to) return failure(c.operation, to.error(), {});
  auto ttl = control::ttl_of(c.body);
  if (!ttl) return failure(c.operation, ttl.error(), {});
  auto meta = control::meta_of(c.body);
  if (!meta) return failure(c.operation, meta.error(), {});
  auto source = keys_.touch(c.tenant, **from, KeyClock::now());
  if (!source) {
    ApiError e = no_key(**from);
    e.param = "from_key";
    return failure(c.operation, e, {});
  }
  KeyRecord copy = *source;
  copy.name = **to;
  copy.meta = meta->value_or(nlohmann::ordered_json::object());
  if (*ttl) copy.ttl = *ttl;
  copy.created_unix_ms = control::unix_ms_now();
  copy.last_used = KeyClock::now();
  copy.forked_from = source->name;
  switch (keys_.add(c.tenant, copy)) {
    case KeyError::none: break;
    case KeyError::exists: {
      ApiError e = conflict(std::format("key '{}' exists", copy.name), "key_exists");
      e.param = "to_key";
      return failure(c.operation, e, {});
    }
    default:
      return failure(c.operation, conflict(std::format("this tenant has {} keys, the most it may keep", kMaxKeysPerTenant),
                                           "too_many_keys"), {});
  }
  nlohmann::ordered_json out = success(c.operation);
  out["from_key"] = source->name;
  out["to_key"] = copy.name;
  out["tokens"] = copy.tokens.size();
  out["shared_tokens"] = copy.tokens.size();
  return ControlReply{200, std::move(out)};
}

// clear {key?}: one key, or every key of the tenant; what they alone hold is freed.
ControlReply CacheControl::clear(Context& c) {
  auto name = control::key_name(c.body, "key", false);
  if (!name) return failure(c.operation, name.error(), {});
  std::vector<KeyRecord> removed;
  if (*name) {
    auto one = keys_.remove(c.tenant, **name);
    if (!one) return failure(c.operation, no_key(**name), {});
    removed.push_back(std::move(*one));
  } else {
    removed = keys_.remove_all(c.tenant);
  }
  cache::ResetReport total;
  nlohmann::ordered_json names = nlohmann::ordered_json::array();
  for (const KeyRecord& record : removed) {
    const cache::ResetReport freed = forget(c.tenant, record);
    total.entries += freed.entries;
    total.bytes += freed.bytes;
    names.push_back(record.name);
  }
  nlohmann::ordered_json out = success(c.operation);
  out["cleared"] = std::move(names);
  out["entries_freed"] = total.entries;
  out["bytes_freed"] = total.bytes;
  return ControlReply{200, std::move(out)};
}

// meta: GET ?key= reads; POST {key, meta?} merges (RFC 7386: a null value removes a field).
ControlReply CacheControl::meta(Context& c) {
  auto name = control::key_name(c.body, "key", true, c.query_key);
  if (!name) return failure(c.operation, name.error(), {});
  auto record = keys_.find(c.tenant, **name);
  if (!record) return failure(c.operation, no_key(**name), {});
  if (c.body.contains("meta")) {
    const auto patch = c.body.find("meta");
    if (!patch->is_object()) return failure(c.operation, invalid_param("meta", "'meta' must be an object"), {});
    KeyRecord changed = *record;
    changed.meta.merge_patch(*patch);
    if (changed.meta.dump().size() > kMaxMetaBytes) {
      return failure(c.operation, invalid_param("meta", std::format("the merged meta would exceed {} bytes", kMaxMetaBytes)), {});
    }
    if (keys_.replace_if(c.tenant, changed, record->version) != KeyError::none) {
      return failure(c.operation, conflict(std::format("key '{}' changed meanwhile; retry", changed.name), "key_changed"), {});
    }
    record = std::move(changed);
  }
  nlohmann::ordered_json out = success(c.operation);
  out["key"] = record->name;
  out["meta"] = record->meta;
  return ControlReply{200, std::move(out)};
}

// token_count: GET ?key= or POST {key}: the key's tokens the cache holds now, and where.
ControlReply CacheControl::token_count(Context& c) {
  auto name = control::key_name(c.body, "key", true, c.query_key);
  if (!name) return failure(c.operation, name.error(), {});
  auto record = keys_.find(c.tenant, **name);
  if (!record) return failure(c.operation, no_key(**name), {});
  cache::HeldPrefix held;
  if (!record->tokens.empty()) {
    scheduler_.ask_cache([&](cache::CacheAdmin& cache) { held = cache.held(scheduler::cache_key(record->cache), record->tokens); });
  }
  nlohmann::ordered_json out = success(c.operation);
  out["key"] = record->name;
  out["token_count"] = held.tokens;
  out["key_tokens"] = record->tokens.size();
  out["tiers"] = {{"device", held.device}, {"host", held.host}, {"disk", held.disk}};
  return ControlReply{200, std::move(out)};
}

}  // namespace prefixd::api
