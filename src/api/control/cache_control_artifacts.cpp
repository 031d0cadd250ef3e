// POST /v1/cache/save and /v1/cache/load: a key's or a prepared module's prefix as a named,
// verified, model-locked artifact with a manifest (cache_modules.h); older request shapes
// (prompt_cache_key of a plain session, messages, prompt) save as before.
//
// save {name, and one of: key (a control-plane key), module (a prepared module's fingerprint),
//       prompt_cache_key (a key, else the latest sequence that session left), messages, prompt}
// load {name, key?, at_offset?, prefix_chain?}: the composition verdict runs on the verified
//       artifact before anything is stored; a mismatch (409) stores nothing and creates no key.
#include <format>
#include <spdlog/spdlog.h>

#include "api/control/cache_artifacts.h"
#include "api/control/cache_control_internal.h"
#include "api/control/cache_modules.h"

namespace prefixd::api {
namespace {

// Thrown by a load's admission check; nothing has been stored when it propagates.
struct Refusal {
  ApiError error;
};

}  // namespace

ControlReply CacheControl::save(Context& c) {
  using control::failure;
  auto path = artifact_path(tenant_artifact_dir(options_.artifact_dir, c.tenant), c.body);
  if (!path) return failure(c.operation, path.error(), {});
  auto named = control::key_name(c.body, "key", false);
  if (!named) return failure(c.operation, named.error(), {});
  std::optional<KeyRecord> record;
  if (*named) {
    record = keys_.touch(c.tenant, **named, KeyClock::now());
    if (!record) {
      return failure(c.operation, ApiError{.status = 404, .message = std::format("no prompt cache key '{}' in this tenant", **named),
                                           .param = "key", .code = "key_not_found"}, {});
    }
  } else if (const auto session = c.body.find("prompt_cache_key"); session != c.body.end() && session->is_string()) {
    record = keys_.touch(c.tenant, session->get<std::string>(), KeyClock::now());
  }

  std::function<cache::ArtifactInfo(cache::CacheAdmin&)> operate;
  std::string kind = "prefix";
  std::int32_t expected_tokens = -1;
  if (record) {
    if (record->tokens.empty()) {
      return failure(c.operation, ApiError{.status = 404, .message = std::format("key '{}' holds no tokens yet", record->name),
                                           .code = "nothing_cached"}, {});
    }
    const std::string manifest = ArtifactManifest{.kind = "key", .key = record->name, .conversation = record->conversation}.encode();
    if (manifest.size() > cache::kMaxArtifactManifestBytes) {
      return failure(c.operation, ApiError{.status = 413,
                                           .message = std::format("key '{}' describes a conversation of {} bytes; an artifact's "
                                                                  "manifest holds at most {}",
                                                                  record->name, manifest.size(), cache::kMaxArtifactManifestBytes),
                                           .code = "manifest_too_large"}, {});
    }
    operate = [r = *record, p = *path, m = manifest](cache::CacheAdmin& cache) {
      return cache.save_artifact(scheduler::cache_key(r.cache), r.tokens, p, m);
    };
    kind = "key";
  } else if (const auto fp = c.body.find("module"); fp != c.body.end()) {
    if (!fp->is_string()) return failure(c.operation, invalid_param("module", "'module' must be a module fingerprint"), {});
    auto module = keys_.find_module(c.tenant, fp->get<std::string>());
    if (!module) {
      return failure(c.operation, ApiError{.status = 404, .message = "no prepared module with that fingerprint in this tenant",
                                           .param = "module", .code = "module_not_found"}, {});
    }
    ArtifactManifest manifest{.kind = "module",
                              .module = ModuleManifest{.module_id = module->module_id, .fingerprint = module->fingerprint,
                                                       .start_offset = module->start,
                                                       .end_offset = static_cast<std::int32_t>(module->tokens.size()),
                                                       .prefix_chain = module->prefix_chain},
                              .conversation = module->conversation};
    scheduler::CacheOptions o = module->cache;
    o.shared_prefix = cache::kNoFork;
    if (manifest.encode().size() > cache::kMaxArtifactManifestBytes) {
      return failure(c.operation, ApiError{.status = 413, .message = "the module's conversation is too large for a manifest",
                                           .code = "manifest_too_large"}, {});
    }
    operate = [o, t = module->tokens, p = *path, m = manifest.encode()](cache::CacheAdmin& cache) {
      return cache.save_artifact(scheduler::cache_key(o), t, p, m);
    };
    kind = "module";
    expected_tokens = static_cast<std::int32_t>(module->tokens.size());
  } else if (c.body.contains("messages") || c.body.contains("prompt")) {
    const bool chat = c.body.contains("messages");
    const std::string text = c.body.dump();
    auto built = chat ? parse_chat_request(text, parse_).and_then([&](const ChatRequest& r) {
                          return prompts_.build(r, scheduler_.max_prompt_tokens(), c.tenant);
                        })
                      : parse_completion_request(text, parse_).and_then([&](const CompletionRequest& r) {
                          return prompts_.build(r, scheduler_.max_prompt_tokens(), c.tenant);
                        });
    if (!built) return failure(c.operation, built.error(), {});
    operate = [g = std::move(*built), p = *path](cache::CacheAdmin& cache) {
      return cache.save_artifact(scheduler::cache_key(g.cache), g.prompt, p);
    };
  } else if (const auto session = c.body.find("prompt_cache_key"); session != c.body.end() && session->is_string()) {
    const std::string name = session->get<std::string>();
    auto latest = scheduler_.session_prompt(tenant_scope(c.tenant), name);
    if (!latest) return failure(c.operation, server_busy("the server is shutting down"), {});
    if (!*latest) {
      return failure(c.operation, artifact_error(cache::ArtifactError(cache::ArtifactError::Kind::nothing_cached,
                                                                      "nothing is cached for prompt_cache_key '" + name + "'")),
                     {});
    }
    operate = [l = std::move(**latest), p = *path](cache::CacheAdmin& cache) { return cache.save_artifact(l.key, l.tokens, p); };
  } else {
    return failure(c.operation, invalid_request("say what to save: 'key', 'module', 'prompt_cache_key', 'messages' or 'prompt'"), {});
  }

  cache::ArtifactInfo info;
  std::optional<ApiError> failed;
  const bool ran = scheduler_.ask_cache([&](cache::CacheAdmin& cache) {
    try {
      info = operate(cache);
    } catch (const cache::ArtifactError& e) {
      failed = artifact_error(e);
    }
  });
  if (!ran) return failure(c.operation, server_busy("the server is shutting down"), {});
  if (failed) return failure(c.operation, *failed, {});
  if (expected_tokens >= 0 && info.tokens != expected_tokens) {
    std::error_code ignored;
    std::filesystem::remove(*path, ignored);
    return failure(c.operation, ApiError{.status = 409,
                                         .message = std::format("only {} of the module's {} tokens are cached now; prepare "
                                                                "the chain again, then save",
                                                                info.tokens, expected_tokens),
                                         .code = "module_not_cached"}, {});
  }
  spdlog::info("cache save: artifact {} ({}, {} tokens, {} bytes)", path->filename().string(), kind, info.tokens, info.bytes);
  nlohmann::ordered_json out = control::success(c.operation);
  for (const auto& [field, value] : artifact_json(c.operation, *path, info).items()) out[field] = value;
  out["kind"] = kind;
  return ControlReply{200, std::move(out)};
}

ControlReply CacheControl::load(Context& c) {
  using control::failure;
  auto path = artifact_path(tenant_artifact_dir(options_.artifact_dir, c.tenant), c.body);
  if (!path) return failure(c.operation, path.error(), {});
  auto bind = control::key_name(c.body, "key", false);
  if (!bind) return failure(c.operation, bind.error(), {});
  if (*bind && keys_.find(c.tenant, **bind)) {
    return failure(c.operation, ApiError{.status = 409, .message = std::format("key '{}' exists; clear it first", **bind),
                                         .param = "key", .code = "key_exists"}, {});
  }
  std::int32_t at_offset = 0;
  if (const auto at = c.body.find("at_offset"); at != c.body.end()) {
    if (!at->is_number_integer() || at->get<std::int64_t>() < 0 || at->get<std::int64_t>() > (1 << 24)) {
      return failure(c.operation, invalid_param("at_offset", "'at_offset' must be a token position (an integer >= 0)"), {});
    }
    at_offset = at->get<std::int32_t>();
  }
  std::vector<std::string> prefix_chain;
  if (const auto chain = c.body.find("prefix_chain"); chain != c.body.end()) {
    if (!chain->is_array() || !std::ranges::all_of(*chain, [](const auto& f) { return f.is_string(); })) {
      return failure(c.operation, invalid_param("prefix_chain", "'prefix_chain' must be an array of module fingerprints"), {});
    }
    prefix_chain = chain->get<std::vector<std::string>>();
  }

  // Runs on the scheduler thread after the whole artifact is verified, before anything is stored.
  Composition verdict = Composition::abstain;
  std::optional<ArtifactManifest> manifest;
  std::optional<scheduler::GenerationRequest> rebuilt;
  const auto admit = [&](const cache::Artifact& artifact) {
    manifest = ArtifactManifest::decode(artifact.manifest);
    std::string why;
    verdict = composition_verdict(manifest, at_offset, prefix_chain, &why);
    if (verdict == Composition::mismatch) {
      throw Refusal{ApiError{.status = 409, .message = "composition mismatch: " + why, .code = "composition_mismatch"}};
    }
    if (!*bind && !(manifest && manifest->module)) return;
    if (!manifest || !manifest->conversation) {
      throw Refusal{invalid_request("this artifact carries no conversation to build a key or module from; load it without 'key'",
                                    "artifact_without_conversation")};
    }
    auto built = build(*manifest->conversation, bind->value_or(""), c.tenant);
    if (!built) throw Refusal{built.error()};
    rebuilt = std::move(*built);
  };

  cache::ArtifactInfo info;
  std::optional<ApiError> failed;
  const bool ran = scheduler_.ask_cache([&](cache::CacheAdmin& cache) {
    try {
      info = cache.load_artifact(*path, tenant_scope(c.tenant), admit);
    } catch (const cache::ArtifactError& e) {
      failed = artifact_error(e);
    } catch (const Refusal& r) {
      failed = r.error;
    }
  });
  if (!ran) return failure(c.operation, server_busy("the server is shutting down"), {});
  if (failed) return failure(c.operation, *failed, {});

  if (manifest && manifest->module && rebuilt) {
    const ModuleManifest& m = *manifest->module;
    keys_.add_module(c.tenant, PreparedModule{.fingerprint = m.fingerprint, .module_id = m.module_id,
                                              .prefix_chain = m.prefix_chain, .start = m.start_offset,
                                              .tokens = info.token_ids, .cache = rebuilt->cache,
                                              .conversation = *manifest->conversation});
  }
  if (*bind && rebuilt) {
    KeyRecord record{.name = **bind, .conversation = *manifest->conversation, .tokens = rebuilt->prompt,
                     .cache = rebuilt->cache, .created_unix_ms = control::unix_ms_now(), .last_used = KeyClock::now()};
    record.cache.session_key = record.name;
    if (keys_.add(c.tenant, record) != KeyError::none) {
      return failure(c.operation, ApiError{.status = 409, .message = std::format("key '{}' was created meanwhile", record.name),
                                           .param = "key", .code = "key_exists"}, {});
    }
  }
  spdlog::info("cache load: artifact {} ({} tokens, verdict {})", path->filename().string(), info.tokens, composition_name(verdict));
  nlohmann::ordered_json out = control::success(c.operation);
  for (const auto& [field, value] : artifact_json(c.operation, *path, info).items()) out[field] = value;
  out["kind"] = manifest ? manifest->kind : "prefix";
  out["composition"] = composition_name(verdict);
  if (manifest && manifest->module) {
    out["module"] = {{"module_id", manifest->module->module_id}, {"fingerprint", manifest->module->fingerprint},
                     {"start_offset", manifest->module->start_offset}, {"end_offset", manifest->module->end_offset}};
  }
  if (*bind) out["key"] = **bind;
  return ControlReply{200, std::move(out)};
}

}  // namespace prefixd::api
