// `prefixd pull OWNER/NAME[:QUANT]`: a model's GGUF (and its vision projector) from a Hugging
// Face–compatible hub into the Hugging Face cache (hub/hub_model.h), then the paths `serve` loads.
#include <iostream>
#include <memory>
#include <stdexcept>

#include "cli/commands.h"
#include "hub/hub_model.h"

namespace prefixd::cli {

std::function<int()> add_pull_command(CLI::App& app) {
  struct Options {
    std::string repo;
    std::string file;
    std::string revision = "main";
    bool projector = true;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "pull", "Download a GGUF model (and its vision projector) from a Hugging Face hub into its cache: "
              "OWNER/NAME[:QUANT] (HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE)");
  cmd->add_option("repo", o->repo, "OWNER/NAME[:QUANT], e.g. Qwen/Qwen3-8B-GGUF:Q4_K_M (default quant: Q4_K_M)")->required();
  cmd->add_option("--hf-file", o->file, "The GGUF file to take, by its name in the repository, instead of a quant");
  cmd->add_option("--hf-revision", o->revision, "Branch, tag or commit")->capture_default_str();
  cmd->add_flag("!--no-mmproj", o->projector, "Leave the repository's vision projector out");
  return [o] {
    std::string error;
    auto spec = hub::parse_model_spec(o->repo, error);
    if (!spec) throw std::runtime_error(error);
    spec->file = o->file;
    spec->revision = o->revision;
    const hub::FetchedModel got = hub::fetch_model(
        *spec, {.projector = o->projector, .progress = [](const std::string& line) { std::cerr << line << "\n"; }});
    std::cout << "model: " << got.model.string() << "\n";
    if (got.mmproj) std::cout << "mmproj: " << got.mmproj->string() << "\n";
    std::cout << "commit: " << got.commit << "\n"
              << "downloaded: " << got.downloaded_bytes << " bytes\n";
    return 0;
  };
}

}  // namespace prefixd::cli
