// prefixd cache — saving a cached prefix to a named artifact and loading it back.
//
// A save gathers the prefix's attention segments from wherever they are (the host tier's bytes,
// a device entry's cells serialized now, or the disk tier's files) on the host tier's grid, so
// the records carry the same keys a lookup walks; checkpoint families add the state at the end.
// A load checks that every record's key is the one its tokens name in the artifact's namespace
// (checksums prove the bytes are the ones written, not that they belong where they claim), then
// stores them; a lookup finds them like any other host segment or checkpoint.
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

ArtifactInfo PrefixCache::Impl::save_artifact(const RequestKey& key, std::span<const Token> tokens,
                                              const std::filesystem::path& path, const std::string& manifest) {
  if (manifest.size() > kMaxArtifactManifestBytes) {
    throw std::invalid_argument("an artifact manifest of " + std::to_string(manifest.size()) +
                                " bytes is longer than the " + std::to_string(kMaxArtifactManifestBytes) + " allowed");
  }
  if (!can_reuse() || tokens.empty()) {
    throw ArtifactError(ArtifactError::Kind::nothing_cached,
                        "no prefix of at least " + std::to_string(config_.min_prefix) + " tokens of it is cached");
  }
  const Lineage lineage = lineage_of(key, ++next_order_);
  refresh_window_entries();
  Artifact artifact = paths_.build_artifact(key, lineage, tokens, manifest);
  publish();
  ArtifactInfo info = write_artifact(path, artifact);
  info.manifest = artifact.manifest;
  info.token_ids = std::move(artifact.tokens);
  return info;
}

ArtifactInfo PrefixCache::Impl::load_artifact(const std::filesystem::path& path, const ScopeId& scope,
                                              const std::function<void(const Artifact&)>& admit) {
  Artifact artifact = read_artifact(path, backing_.model_key());
  if (!can_reuse()) throw ArtifactError(ArtifactError::Kind::nothing_cached, "the prompt cache is off");
  if (artifact.scope != scope) {
    throw ArtifactError(ArtifactError::Kind::scope, "artifact " + path.filename().string() + " belongs to another tenant");
  }
  HostStore::Evicted evicted;
  ArtifactInfo info = paths_.adopt_artifact(artifact, scope, admit, evicted);
  add_evictions(evicted);
  std::error_code ec;
  info.bytes = std::filesystem::file_size(path, ec);
  trace("artifact {}: {} tokens, {} segments, {} checkpoints loaded", path.filename().string(), info.tokens,
        info.segments, info.checkpoints);
  publish();
  return info;
}

}  // namespace prefixd::cache
