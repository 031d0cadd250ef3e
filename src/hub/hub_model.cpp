#include "hub/hub_model.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <format>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "util/hex.h"
#include "util/unique_fd.h"

namespace prefixd::hub {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::string lower(std::string s) {
  std::ranges::transform(s, s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool ends_with_gguf(const std::string& name) { return lower(name).ends_with(".gguf"); }
bool is_projector(const std::string& name) { return lower(fs::path(name).filename().string()).find("mmproj") != std::string::npos; }

// "model-00001-of-00003.gguf": the parts of a split GGUF, which libllama loads from the first.
std::optional<std::string> split_stem(const std::string& name) {
  const std::string l = lower(name);
  const auto of = l.rfind("-of-");
  if (of == std::string::npos || of < 6 || !l.ends_with(".gguf") || l[of - 6] != '-') return std::nullopt;
  return name.substr(0, of - 6);
}

struct Sibling {
  std::string name;
  std::string blob;   // the LFS SHA-256, else the git blob id
  bool sha256 = false;
  std::int64_t size = -1;
};

struct Endpoint {
  std::string scheme_host_port;  // for httplib
  std::string base;              // a path the hub is served under ("" at the root)
};

Endpoint parse_endpoint(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos || (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0)) {
    throw std::runtime_error(std::format("HF_ENDPOINT '{}' is not an http:// or https:// address", url));
  }
  const auto path = url.find('/', scheme + 3);
  Endpoint e{url.substr(0, path), path == std::string::npos ? "" : url.substr(path)};
  while (e.base.ends_with('/')) e.base.pop_back();
  return e;
}

// One hub: its client and headers.
class Hub {
 public:
  explicit Hub(const HubOptions& options)
      : endpoint_(options.endpoint.empty() ? (env("HF_ENDPOINT").empty() ? "https://huggingface.co" : env("HF_ENDPOINT"))
                                           : options.endpoint),
        parsed_(parse_endpoint(endpoint_)),
        token_(options.token.empty() ? env("HF_TOKEN") : options.token) {}

  const std::string& endpoint() const { return endpoint_; }
  bool has_token() const { return !token_.empty(); }

  std::unique_ptr<httplib::Client> client(std::chrono::seconds read_timeout) const {
    auto c = std::make_unique<httplib::Client>(parsed_.scheme_host_port);
    c->set_follow_location(true);
    c->set_connection_timeout(std::chrono::seconds(10));
    c->set_read_timeout(read_timeout);
    return c;
  }
  httplib::Headers headers() const {
    httplib::Headers h{{"User-Agent", "prefixd"}};
    if (!token_.empty()) h.emplace("Authorization", "Bearer " + token_);
    return h;
  }
  std::string path(const std::string& p) const { return parsed_.base + p; }

 private:
  std::string endpoint_;
  Endpoint parsed_;
  std::string token_;
};

[[noreturn]] void refuse_status(const Hub& hub, int status, const std::string& what) {
  if (status == 401 || status == 403) {
    throw std::runtime_error(std::format("{} on {} answered {}: the repository is gated or private{}", what,
                                         hub.endpoint(), status,
                                         hub.has_token() ? " and HF_TOKEN does not grant it"
                                                         : "; set HF_TOKEN to a token that may read it"));
  }
  if (status == 404) throw std::runtime_error(std::format("{}: not found on {}", what, hub.endpoint()));
  throw std::runtime_error(std::format("{}: {} answered {}", what, hub.endpoint(), status));
}

struct RepoListing {
  std::string commit;
  std::vector<Sibling> files;
};

RepoListing list_repo(const Hub& hub, const ModelSpec& spec) {
  auto client = hub.client(std::chrono::seconds(60));
  const std::string what = std::format("repository {} (revision {})", spec.repo, spec.revision);
  const auto res = client->Get(hub.path(std::format("/api/models/{}/revision/{}?blobs=true", spec.repo,
                                                    httplib::encode_uri_component(spec.revision))),
                               hub.headers());
  if (!res) {
    throw std::runtime_error(std::format("cannot reach {} ({})", hub.endpoint(), httplib::to_string(res.error())));
  }
  if (res->status != 200) refuse_status(hub, res->status, what);
  const json body = json::parse(res->body, nullptr, false);
  if (!body.is_object() || !body.contains("sha") || !body["sha"].is_string() || !body.contains("siblings") ||
      !body["siblings"].is_array()) {
    throw std::runtime_error(std::format("{}: {} sent a listing without a commit and files", what, hub.endpoint()));
  }
  RepoListing out{body["sha"].get<std::string>(), {}};
  for (const json& s : body["siblings"]) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
    Sibling f{.name = s["rfilename"].get<std::string>()};
    if (s.contains("lfs") && s["lfs"].is_object() && s["lfs"].value("sha256", "").size() == 64) {
      f.blob = s["lfs"]["sha256"].get<std::string>();
      f.sha256 = true;
      f.size = s["lfs"].value("size", s.value("size", -1));
    } else {
      f.blob = s.value("blobId", "");
      f.size = s.value("size", -1);
    }
    out.files.push_back(std::move(f));
  }
  return out;
}

// The repository's GGUF for the spec (all parts when split) and its projector.
struct Choice {
  std::vector<Sibling> model;
  std::optional<Sibling> projector;
};

Choice choose(const ModelSpec& spec, const std::vector<Sibling>& files) {
  std::vector<const Sibling*> ggufs;
  std::vector<const Sibling*> projectors;
  for (const Sibling& f : files) {
    if (!ends_with_gguf(f.name)) continue;
    (is_projector(f.name) ? projectors : ggufs).push_back(&f);
  }
  std::string names;
  for (const Sibling* f : ggufs) names += (names.empty() ? "" : ", ") + f->name;
  if (ggufs.empty()) throw std::runtime_error(std::format("repository {} has no GGUF file", spec.repo));
  std::vector<const Sibling*> matches;
  if (!spec.file.empty()) {
    for (const Sibling* f : ggufs) {
      if (f->name == spec.file) matches.push_back(f);
    }
    if (matches.empty()) throw std::runtime_error(std::format("repository {} has no file {} (GGUF files: {})", spec.repo, spec.file, names));
  } else {
    const std::string quant = lower(spec.quant.empty() ? "Q4_K_M" : spec.quant);
    for (const Sibling* f : ggufs) {
      if (lower(fs::path(f->name).filename().string()).find(quant) != std::string::npos) matches.push_back(f);
    }
    if (matches.empty() && spec.quant.empty() && ggufs.size() == 1) matches = ggufs;
    if (matches.empty()) {
      throw std::runtime_error(std::format("repository {} has no GGUF for quant {} (GGUF files: {})", spec.repo,
                                           spec.quant.empty() ? "Q4_K_M (the default)" : spec.quant, names));
    }
  }
  // One model: several matches must be the parts of one split file.
  std::ranges::sort(matches, {}, &Sibling::name);
  const auto stem = split_stem(matches.front()->name);
  Choice choice;
  for (const Sibling* f : matches) {
    if (matches.size() > 1 && (!stem || split_stem(f->name) != stem)) {
      std::string found;
      for (const Sibling* m : matches) found += (found.empty() ? "" : ", ") + m->name;
      throw std::runtime_error(std::format("repository {}: several GGUFs match ({}); name one with --hf-file", spec.repo, found));
    }
    choice.model.push_back(*f);
  }
  if (!projectors.empty()) {
    // The projector of the same quant, else a 16-bit one, else the first.
    const auto pick = [&](const std::string& needle) -> const Sibling* {
      for (const Sibling* p : projectors) {
        if (lower(p->name).find(needle) != std::string::npos) return p;
      }
      return nullptr;
    };
    const Sibling* p = spec.quant.empty() ? nullptr : pick(lower(spec.quant));
    if (p == nullptr) p = pick("f16");
    if (p == nullptr) p = projectors.front();
    choice.projector = *p;
  }
  return choice;
}

std::string folder_of(const std::string& repo) {
  std::string out = "models--";
  for (char c : repo) out += c == '/' ? std::string("--") : std::string(1, c);
  return out;
}

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw std::runtime_error("SHA-256 unavailable");
  }
  void update(const char* data, std::size_t size) { EVP_DigestUpdate(ctx_.get(), data, size); }
  std::string hex() {
    unsigned char out[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), out, &n);
    return util::to_hex(std::string_view(reinterpret_cast<const char*>(out), n));
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// Downloads one file into blobs/<blob>, resuming a .incomplete one; returns the bytes fetched.
std::int64_t download(const Hub& hub, const ModelSpec& spec, const std::string& commit, const Sibling& file,
                      const fs::path& repo_dir, const fs::path& locks_dir, const HubOptions& options) {
  const fs::path blob = repo_dir / "blobs" / file.blob;
  std::error_code ec;
  if (fs::exists(blob, ec) && (file.size < 0 || static_cast<std::int64_t>(fs::file_size(blob, ec)) == file.size)) return 0;
  fs::create_directories(repo_dir / "blobs", ec);
  fs::create_directories(locks_dir, ec);
  util::UniqueFd lock(::open((locks_dir / (file.blob + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.ok() && ::flock(lock.get(), LOCK_EX) != 0) lock.reset();  // waits for another downloader
  if (fs::exists(blob, ec)) return 0;  // it finished while this one waited
  const fs::path partial = repo_dir / "blobs" / (file.blob + ".incomplete");
  std::int64_t have = fs::exists(partial, ec) ? static_cast<std::int64_t>(fs::file_size(partial, ec)) : 0;
  Sha256 hash;
  if (have > 0) {  // the bytes already there count toward the hash
    std::ifstream in(partial, std::ios::binary);
    std::vector<char> buffer(1 << 20);
    std::int64_t left = have;
    while (left > 0 && in.read(buffer.data(), std::min<std::int64_t>(left, static_cast<std::int64_t>(buffer.size())))) {
      hash.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
      left -= in.gcount();
    }
  }
  std::ofstream out(partial, std::ios::binary | std::ios::app);
  if (!out) throw std::runtime_error(std::format("cannot write {}", partial.string()));
  httplib::Headers headers = hub.headers();
  if (have > 0) headers.emplace("Range", std::format("bytes={}-", have));
  auto client = hub.client(std::chrono::seconds(120));
  std::int64_t fetched = 0;
  int status = 0;
  auto last_report = std::chrono::steady_clock::now();
  const auto res = client->Get(
      hub.path(std::format("/{}/resolve/{}/{}", spec.repo, commit, file.name)), headers,
      [&](const httplib::Response& response) {
        status = response.status;
        if (status == 200 && have > 0) {  // the hub sent the whole file: start over
          out.close();
          out.open(partial, std::ios::binary | std::ios::trunc);
          hash = Sha256();
          have = 0;
        }
        return status == 200 || status == 206;
      },
      [&](const char* data, std::size_t size) {
        out.write(data, static_cast<std::streamsize>(size));
        hash.update(data, size);
        fetched += static_cast<std::int64_t>(size);
        if (options.progress && std::chrono::steady_clock::now() - last_report > std::chrono::seconds(5)) {
          last_report = std::chrono::steady_clock::now();
          options.progress(std::format("{}: {:.1f} of {:.1f} MiB", file.name, static_cast<double>(have + fetched) / (1 << 20),
                                       static_cast<double>(file.size) / (1 << 20)));
        }
        return static_cast<bool>(out);
      });
  out.close();
  if (!res && status == 0) {
    throw std::runtime_error(std::format("downloading {} from {}: {} ({} bytes kept in {}; run again to resume)", file.name,
                                         hub.endpoint(), httplib::to_string(res.error()), have + fetched, partial.string()));
  }
  if (status == 416) {
    // Nothing past what the partial file holds: it is whole, or wrong.
  } else if (status != 200 && status != 206) {
    refuse_status(hub, status, std::format("file {} of {}", file.name, spec.repo));
  } else if (!res) {
    throw std::runtime_error(std::format("downloading {}: the connection ended after {} bytes ({}); run again to resume",
                                         file.name, have + fetched, httplib::to_string(res.error())));
  }
  const std::int64_t total = static_cast<std::int64_t>(fs::file_size(partial, ec));
  if (file.size >= 0 && total != file.size) {
    throw std::runtime_error(std::format("downloading {}: {} bytes arrived, the hub lists {}; run again to resume",
                                         file.name, total, file.size));
  }
  if (file.sha256) {
    const std::string got = hash.hex();
    if (got != lower(file.blob)) {
      fs::remove(partial, ec);
      throw std::runtime_error(std::format("{}: its SHA-256 is {}, the hub publishes {}; the download was removed",
                                           file.name, got, file.blob));
    }
  }
  fs::rename(partial, blob, ec);
  if (ec) throw std::runtime_error(std::format("cannot keep {}: {}", blob.string(), ec.message()));
  return fetched;
}

// snapshots/<commit>/<name> -> ../../blobs/<blob> (relative, as every hub client writes it).
fs::path link_snapshot(const fs::path& repo_dir, const std::string& commit, const Sibling& file) {
  const fs::path link = repo_dir / "snapshots" / commit / file.name;
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  const fs::path target = fs::relative(repo_dir / "blobs" / file.blob, link.parent_path(), ec);
  if (fs::is_symlink(link, ec) || fs::exists(link, ec)) {
    if (fs::equivalent(link, repo_dir / "blobs" / file.blob, ec)) return link;
    fs::remove(link, ec);
  }
  fs::create_symlink(target, link, ec);
  if (ec) throw std::runtime_error(std::format("cannot link {}: {}", link.string(), ec.message()));
  return link;
}

// What the cache holds for the spec's revision, when the hub is out of reach.
std::optional<FetchedModel> from_cache(const ModelSpec& spec, const fs::path& repo_dir, bool projector) {
  std::ifstream ref(repo_dir / "refs" / spec.revision);
  std::string commit = spec.revision;
  if (ref) ref >> commit;
  const fs::path snapshot = repo_dir / "snapshots" / commit;
  std::error_code ec;
  if (!fs::is_directory(snapshot, ec)) return std::nullopt;
  std::vector<Sibling> files;
  for (auto it = fs::recursive_directory_iterator(snapshot, ec); !ec && it != fs::recursive_directory_iterator(); ++it) {
    if (!fs::exists(it->path(), ec)) continue;  // a dangling link
    if (it->is_directory(ec)) continue;
    files.push_back({.name = it->path().lexically_relative(snapshot).string()});
  }
  try {
    const Choice choice = choose(spec, files);
    FetchedModel out{.model = snapshot / choice.model.front().name, .commit = commit};
    if (projector && choice.projector) out.mmproj = snapshot / choice.projector->name;
    return out;
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<ModelSpec> parse_model_spec(const std::string& text, std::string& error) {
  ModelSpec spec;
  std::string repo = text;
  if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    repo = text.substr(0, colon);
    spec.quant = text.substr(colon + 1);
    if (spec.quant.empty()) {
      error = "'" + text + "' has an empty quant after ':'";
      return std::nullopt;
    }
  }
  const auto slash = repo.find('/');
  const auto valid = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; };
  if (slash == std::string::npos || slash == 0 || slash + 1 == repo.size() || repo.find('/', slash + 1) != std::string::npos ||
      !std::ranges::all_of(repo.substr(0, slash), valid) || !std::ranges::all_of(repo.substr(slash + 1), valid) ||
      repo.find("..") != std::string::npos) {
    error = "'" + text + "' is not OWNER/NAME[:QUANT] (letters, digits, '-', '_' and '.')";
    return std::nullopt;
  }
  spec.repo = repo;
  return spec;
}

fs::path default_cache_dir() {
  if (const std::string dir = env("HF_HUB_CACHE"); !dir.empty()) return dir;
  if (const std::string home = env("HF_HOME"); !home.empty()) return fs::path(home) / "hub";
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && fs::path(xdg).is_absolute()) {
    return fs::path(xdg) / "huggingface" / "hub";
  }
  if (const std::string home = env("HOME"); !home.empty()) return fs::path(home) / ".cache" / "huggingface" / "hub";
  throw std::runtime_error("no Hugging Face cache directory: set HF_HUB_CACHE, HF_HOME or HOME");
}

FetchedModel fetch_model(const ModelSpec& spec, const HubOptions& options) {
  const fs::path cache = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  const fs::path repo_dir = cache / folder_of(spec.repo);
  const bool offline = options.offline || env("HF_HUB_OFFLINE") == "1";
  if (offline) {
    if (auto cached = from_cache(spec, repo_dir, options.projector)) return *cached;
    throw std::runtime_error(std::format("HF_HUB_OFFLINE=1 and {} (revision {}) is not in {}", spec.repo, spec.revision,
                                         cache.string()));
  }
  const Hub hub(options);
  RepoListing listing;
  try {
    listing = list_repo(hub, spec);
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).starts_with("cannot reach")) {
      if (auto cached = from_cache(spec, repo_dir, options.projector)) {
        if (options.progress) options.progress(std::string(e.what()) + "; using the cached " + cached->commit);
        return *cached;
      }
    }
    throw;
  }
  const Choice choice = choose(spec, listing.files);
  std::vector<Sibling> wanted = choice.model;
  if (options.projector && choice.projector) wanted.push_back(*choice.projector);
  FetchedModel out{.commit = listing.commit};
  const fs::path locks = cache / ".locks" / folder_of(spec.repo);
  for (const Sibling& file : wanted) {
    if (file.blob.empty()) throw std::runtime_error(std::format("{}: the hub lists no hash for {}", spec.repo, file.name));
    out.downloaded_bytes += download(hub, spec, listing.commit, file, repo_dir, locks, options);
    link_snapshot(repo_dir, listing.commit, file);
  }
  if (spec.revision != listing.commit) {
    std::error_code ec;
    fs::create_directories(repo_dir / "refs" / fs::path(spec.revision).parent_path(), ec);
    std::ofstream(repo_dir / "refs" / spec.revision, std::ios::trunc) << listing.commit;
  }
  const fs::path snapshot = repo_dir / "snapshots" / listing.commit;
  out.model = snapshot / choice.model.front().name;
  if (options.projector && choice.projector) out.mmproj = snapshot / choice.projector->name;
  return out;
}

}  // namespace prefixd::hub
