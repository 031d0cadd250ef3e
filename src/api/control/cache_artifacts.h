// prefixd api — POST /v1/cache/save and /v1/cache/load: a cached prefix as a named artifact file.
//
// save: {"name", and one of "prompt_cache_key" (the latest sequence that key left in the cache),
// "messages" (+ tools, chat_template_kwargs, cache_salt: rendered as a chat request would be) or
// "prompt" (as a completion request)} -> the longest cached prefix of it is written to
// <artifact dir>/<name>.prefixd (the caller's tenant's artifact dir). load: {"name"} -> verified and stored in the host tier; the next
// request that starts with the prefix restores it. Names are [A-Za-z0-9._-], 1 to 128 characters,
// not starting with a dot, so a name can never leave the artifact directory.
#pragma once

#include <expected>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "cache/artifact.h"

namespace prefixd::api {

// A tenant's artifact directory under the server's: the default tenant's is `base` itself (as a
// server without keys always had it), any other tenant's is base/tenants/<id>, created when first
// needed. A name can never leave it, so one tenant never saves over or loads another's artifact.
// Empty when artifacts are off.
std::filesystem::path tenant_artifact_dir(const std::filesystem::path& base, std::string_view tenant);

// The artifact file for `name` in `dir`, or a 400 naming the rule it breaks.
std::expected<std::filesystem::path, ApiError> artifact_path(const std::filesystem::path& dir, const nlohmann::ordered_json& body);

// A file name that cannot leave its directory: 1 to 128 characters of letters, digits, '.', '_'
// and '-', not starting with '.'.
bool safe_file_name(std::string_view name);

// The HTTP error for an artifact operation that failed.
ApiError artifact_error(const cache::ArtifactError& error);

nlohmann::ordered_json artifact_json(std::string_view operation, const std::filesystem::path& path,
                                     const cache::ArtifactInfo& info);

}  // namespace prefixd::api
