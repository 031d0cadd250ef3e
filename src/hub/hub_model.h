// prefixd hub — a GGUF model by name from a Hugging Face–compatible hub: `--hf-repo OWNER/NAME[:QUANT]`
// on `prefixd serve` and `prefixd pull`.
//
// The hub's documented routes: GET /api/models/{repo}/revision/{rev}?blobs=true lists the commit and
// each file with its size and, for large (LFS) files, its SHA-256; GET /{repo}/resolve/{commit}/{file}
// serves a file (redirecting to a CDN is allowed) and honours Range. Files land in the Hugging Face
// cache layout (HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub): blobs/<sha256>, snapshots/<commit>/<file> as a relative symlink to it,
// refs/<revision> holding the commit, so a file another tool downloaded is used as it is and one
// prefixd downloaded serves the others. A download resumes from blobs/<sha256>.incomplete, is
// checked against the published SHA-256 before it takes its name, and holds
// .locks/<repo folder>/<sha256>.lock so two processes never write one blob.
// HF_ENDPOINT names the hub (default https://huggingface.co), HF_TOKEN authenticates,
// HF_HUB_OFFLINE=1 uses the cache alone. When the hub cannot be reached, what the cache holds for
// the revision serves.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace prefixd::hub {

struct ModelSpec {
  std::string repo;      // OWNER/NAME
  std::string quant;     // e.g. Q4_K_M; empty: Q4_K_M when the repository has it, else its only GGUF
  std::string file;      // an exact file name instead of a quant (--hf-file)
  std::string revision = "main";
};
// Parses OWNER/NAME[:QUANT]; the error says what is wrong.
std::optional<ModelSpec> parse_model_spec(const std::string& text, std::string& error);

struct HubOptions {
  std::string endpoint;              // empty: HF_ENDPOINT, else https://huggingface.co
  std::string token;                 // empty: HF_TOKEN
  std::filesystem::path cache_dir;   // empty: from the environment (above)
  bool offline = false;              // also HF_HUB_OFFLINE=1
  bool projector = true;             // fetch the repository's vision projector too
  // Progress lines (a file's name, bytes so far, its size); may be empty.
  std::function<void(const std::string&)> progress;
};

struct FetchedModel {
  std::filesystem::path model;                 // the GGUF (its first part when split)
  std::optional<std::filesystem::path> mmproj; // the vision projector, when the repository has one
  std::string commit;
  std::int64_t downloaded_bytes = 0;           // 0 when everything came from the cache
};

// The cache directory the environment names.
std::filesystem::path default_cache_dir();

// Resolves and downloads (or finds in the cache) the model's files. Throws std::runtime_error
// with a message for a person: no such repository or revision, no GGUF for the quant (naming the
// ones there are), a gated repository without a token, an unreachable hub with nothing cached, a
// file whose bytes do not match the published SHA-256.
FetchedModel fetch_model(const ModelSpec& spec, const HubOptions& options);

}  // namespace prefixd::hub
