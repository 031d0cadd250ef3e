#include "cli/serve_models.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "api/auth/access.h"
#include "cli/disk_location.h"
#include "cli/server_signals.h"
#include "events/kv_event_forwarder.h"
#include "models/model_host.h"

namespace prefixd::cli {
namespace {

// This process's command line after `serve`, less what the front owns: each child gets the rest.
std::vector<std::string> passed_on_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> all;
  for (std::size_t at = 0; at < raw.size();) {
    const std::size_t end = raw.find('\0', at);
    all.push_back(raw.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? raw.size() : end + 1;
  }
  static const std::set<std::string> with_value = {"--models-dir", "--models-max", "--models-max-bytes",
                                                   "--models-idle-seconds", "--host", "--port", "--cache-disk-path",
                                                   "--alias", "--mmproj", "-m", "--model", "--kv-events-endpoint",
                                                   "--kv-events-topic"};
  static const std::set<std::string> without_value = {"--models-autoload", "--no-models-autoload"};
  std::vector<std::string> out;
  bool after_serve = false;
  for (std::size_t i = 1; i < all.size(); ++i) {
    const std::string& a = all[i];
    if (!after_serve) {
      after_serve = a == "serve";
      continue;
    }
    const std::string name = a.substr(0, a.find('='));
    if (without_value.contains(a)) continue;
    if (with_value.contains(name)) {
      if (name == a) ++i;  // "--flag value"; "--flag=value" is one argument
      continue;
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace

std::string model_topic(const std::string& topic, const std::string& model) {
  static constexpr std::string_view kPlaceholder = "{model}";
  if (topic.find(kPlaceholder) == std::string::npos) return topic.empty() ? model : topic + "@" + model;
  std::string out;
  for (std::size_t at = 0;;) {
    const std::size_t found = topic.find(kPlaceholder, at);
    out += topic.substr(at, found == std::string::npos ? std::string::npos : found - at);
    if (found == std::string::npos) return out;
    out += model;
    at = found + kPlaceholder.size();
  }
}

void add_model_host_options(CLI::App& cmd, ModelHostFlags& flags) {
  cmd.add_option("--models-dir", flags.dir,
                 "Serve every model in this folder (each .gguf, or a folder holding one with its mmproj projector) "
                 "instead of --model: a request's `model` picks one, loaded on first use in a server of its own")
      ->envname("PREFIXD_MODELS_DIR");
  cmd.add_option("--models-max", flags.max_loaded,
                 "With --models-dir: most models loaded at once; loading another unloads the least recently used "
                 "idle one (0: no limit)")
      ->capture_default_str()->envname("PREFIXD_MODELS_MAX")->check(CLI::Range(0, 4096));
  cmd.add_option("--models-max-bytes", flags.max_bytes,
                 "With --models-dir: most bytes of model files loaded at once, unloading as --models-max does "
                 "(0: no limit)")
      ->capture_default_str()->envname("PREFIXD_MODELS_MAX_BYTES");
  cmd.add_option("--models-idle-seconds", flags.idle_seconds,
                 "With --models-dir: unload a model this long after its last request (0: never)")
      ->capture_default_str()->envname("PREFIXD_MODELS_IDLE_SECONDS")->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  cmd.add_flag("--models-autoload,!--no-models-autoload", flags.autoload,
               "With --models-dir: a request loads the model it names (off: only POST /models/load does; default on)")
      ->default_function([&flags] { return std::string(flags.autoload ? "1" : "0"); })
      ->capture_default_str()->envname("PREFIXD_MODELS_AUTOLOAD");
}

int run_model_host(const ModelHostFlags& flags, const ModelHostSetup& setup, ServerSignals& signals) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::vector<std::string> passed = passed_on_arguments();
  std::filesystem::path disk_base;
  if (setup.cache_disk) {
    disk_base = !setup.disk_path.empty() ? std::filesystem::path(setup.disk_path)
                                         : default_disk_dir().empty() ? std::filesystem::path()
                                                                      : default_disk_dir() / "models";
  }
  models::HostOptions options{
      .models = models::scan_models_dir(flags.dir),
      .http = setup.http,
      .max_loaded = flags.max_loaded,
      .max_bytes = flags.max_bytes,
      .idle_unload = std::chrono::seconds(flags.idle_seconds),
      .autoload = flags.autoload,
  };
  std::unique_ptr<events::KvEventForwarder> forwarder;
  if (!setup.kv_events_endpoint.empty()) {
    auto started = events::KvEventForwarder::start(setup.kv_events_endpoint);
    if (!started) throw std::runtime_error(started.error());
    forwarder = std::move(*started);
    spdlog::info("KV events: every model's on {} under its own topic ({}), relayed from {}", setup.kv_events_endpoint,
                 model_topic(setup.kv_events_topic, "NAME"), forwarder->inner_endpoint());
  }
  const std::string kv_inner = forwarder != nullptr ? forwarder->inner_endpoint() : std::string();
  options.child_argv = [self, passed, disk_base, kv_inner, topic = setup.kv_events_topic](const models::CatalogModel& model,
                                                                                         int port) {
    std::vector<std::string> argv = {self.string(), "serve"};
    argv.insert(argv.end(), passed.begin(), passed.end());
    argv.insert(argv.end(), {"--model", model.file.string(), "--alias", model.id, "--host",
                             "127.0.0.1", "--port", std::to_string(port)});
    if (!model.projector.empty()) argv.insert(argv.end(), {"--mmproj", model.projector.string()});
    // A folder per model: a disk tier removes records made for another model.
    if (!disk_base.empty()) argv.insert(argv.end(), {"--cache-disk-path", (disk_base / model.id).string()});
    if (!kv_inner.empty()) argv.insert(argv.end(), {"--kv-events-endpoint", kv_inner, "--kv-events-topic", model_topic(topic, model.id)});
    return argv;
  };
  options.authorize = [keys = setup.keys](const http::Request& req,
                                           std::string_view admin_for) -> std::optional<std::pair<int, std::string>> {
    const auto refused = [](const api::ApiError& e) { return std::pair<int, std::string>(e.status, e.to_json().dump()); };
    const auto caller = api::identify(keys.get(), req.header("Authorization"), req.header("X-Api-Key"));
    if (!caller) return refused(caller.error());
    if (admin_for.empty()) return std::nullopt;
    if (auto admin = api::require_admin(*caller, admin_for); !admin) return refused(admin.error());
    return std::nullopt;
  };
  models::ModelHost host(std::move(options));
  signals.start([&host](std::chrono::milliseconds grace) { host.shutdown(grace); }, setup.grace, [] {
    spdlog::info("SIGHUP: each model's server reads its keys at its next load");
  });
  const bool served = host.run();
  signals.stop();
  return served ? 0 : 1;
}

}  // namespace prefixd::cli
