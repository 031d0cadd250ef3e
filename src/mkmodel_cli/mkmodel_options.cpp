#include "mkmodel_cli/mkmodel_options.h"

#include <iostream>
#include <memory>

#include "modelgen/modelgen.h"

namespace prefixd::mkmodel_cli {

std::function<int()> add_mkmodel_options(CLI::App& app) {
  auto options = std::make_shared<modelgen::GenerateOptions>();
  auto list = std::make_shared<bool>(false);
  std::string presets_help = "Preset to generate:";
  for (const auto& p : modelgen::presets()) presets_help += "\n  " + p.name + ": " + p.summary;
  app.add_option("--preset", options->preset, presets_help)->capture_default_str();
  app.add_option("--out", options->out_path, "Output GGUF path");
  app.add_option("--seed", options->seed, "Seed of the random weights (same seed, same file)")->capture_default_str();
  app.add_option("--type", options->weight_type, "Weight type: f32, f16 or q8_0 (default: the preset's)")
      ->check(CLI::IsMember({"", "f32", "f16", "q8_0"}));
  app.add_option("--layers", options->layers,
                 "Keep only the first N blocks (same seed: the full model's first blocks, vocabulary and head; "
                 "a drafter for it)");
  app.add_option("--inert-from", options->inert_from,
                 "Blocks from index N on add nothing to the residual stream but cost their full compute (a "
                 "target that the --layers N model drafts right)");
  app.add_option("--lora-rank", options->lora_rank,
                 "Write a LoRA adapter of rank N for the preset instead of the model (random weights seeded by "
                 "--seed; libllama loads it for the preset's model, e.g. llama-server --lora)")
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--lora-alpha", options->lora_alpha,
                 "The adapter's adapter.lora.alpha; libllama scales it by alpha/rank (default: the rank, scale 1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lora-targets", options->lora_targets,
                 "Comma-separated weights the adapter changes in every block that has them, named without "
                 "blk.N. and .weight (e.g. attn_q,ffn_up; output for the head) (default: attn_q,attn_k,attn_v,"
                 "attn_output)")
      ->delimiter(',');
  app.add_flag("--quiet", options->quiet, "Print nothing on success");
  app.add_flag("--list", *list, "List the presets and exit");
  return [options, list]() {
    if (*list) {
      for (const auto& p : modelgen::presets()) std::cout << p.name << "\t" << p.architecture << "\t" << p.summary << "\n";
      return 0;
    }
    if (options->out_path.empty()) {
      std::cerr << "prefixd-mkmodel: error: --out is required\n";
      return 2;
    }
    modelgen::generate_model(*options);
    return 0;
  };
}

}  // namespace prefixd::mkmodel_cli
