// Fuzz target: the chat template inputs — a chat request's messages, tools, tool_choice and
// chat_template_kwargs rendered by the prompt builder (api/prompt_builder.h) with a real model's
// template and vocabulary: the tiny preset's ChatML template and byte-level BPE vocabulary, loaded
// through libllama as the server loads any model. Then tokenizing, the prompt-length check, the
// turn layout (where each user turn begins, what follows a reply) and the cache namespace.
//
// Each input is a chat request body; what the parser accepts is built as POST /v1/chat/completions
// would build it. Besides the sanitizers (and any exception escaping, which the server would
// answer with a 500), it checks the builder's promises: a refusal is a 4xx whose body can be
// written; an accepted prompt is non-empty, within the length limit and the vocabulary, its turn
// boundaries are ascending positions inside it; the same request renders and builds the same way
// twice (the builder is shared by every HTTP thread).
//
// The model comes from PREFIXD_FUZZ_MODEL, else the tiny preset is generated into a temporary file
// at startup.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "api/prompt/prompt_builder.h"
#include "api/openai/request_parser.h"
#include "engine/engine.h"
#include "fuzz_check.h"
#include "modelgen/modelgen.h"

namespace prefixd::fuzz {
namespace {

// The prompt limit of a small server (--ctx-size 2048), so long inputs reach the length check.
constexpr std::int32_t kMaxPromptTokens = 2048;

struct Fixture {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<api::PromptBuilder> builder;
  api::ParseOptions options;
};

std::unique_ptr<engine::Engine> load_model() {
  namespace fs = std::filesystem;
  if (const char* path = std::getenv("PREFIXD_FUZZ_MODEL")) {
    return engine::load_llama_engine(path, engine::ContextOptions{.n_ctx = 256, .n_batch = 64, .n_parallel = 1,
                                                                  .n_holder_seqs = 1, .n_threads = 1});
  }
  const fs::path dir = fs::temp_directory_path() / ("prefixd-fuzz-model-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / "tiny.gguf";
  modelgen::generate_model({.preset = "tiny", .out_path = path.string(), .quiet = true});
  auto engine = engine::load_llama_engine(path.string(), engine::ContextOptions{.n_ctx = 256, .n_batch = 64, .n_parallel = 1,
                                                                                .n_holder_seqs = 1, .n_threads = 1});
  fs::remove_all(dir);  // the engine keeps what it needs
  return engine;
}

Fixture& fixture() {
  static Fixture f = [] {
    Fixture out;
    out.engine = load_model();
    const engine::ModelInfo& model = out.engine->model();
    out.builder = std::make_unique<api::PromptBuilder>(out.engine->vocab(), api::model_chat_template(model, out.engine->vocab()),
                                                       "fuzz-model", "fuzz-runtime");
    out.options.model_names = {"default"};
    out.options.vocab_size = out.engine->vocab().size();
    return out;
  }();
  return f;
}

void check_refusal(const api::ApiError& error) {
  require(error.status >= 400 && error.status < 500, "a bad request is answered with a 4xx");
  require(!error.message.empty(), "a refusal says why");
  require(!error.to_json().dump().empty(), "the error body can be written");
}

void check_built(const scheduler::GenerationRequest& built, std::int32_t vocab_size) {
  require(!built.prompt.empty(), "a prompt has tokens");
  require(built.prompt.size() <= static_cast<std::size_t>(kMaxPromptTokens), "a prompt fits the limit");
  for (const auto t : built.prompt) require(t >= 0 && t < vocab_size, "prompt tokens are in the vocabulary");
  for (const auto t : built.cache.continuation) require(t >= 0 && t < vocab_size, "continuation tokens are in the vocabulary");
  engine::Pos last = 0;
  for (const auto b : built.cache.boundaries) {
    require(b > 0 && b >= last, "boundaries are positive and ascend");
    require(b < static_cast<engine::Pos>(built.prompt.size()), "boundaries lie inside the prompt");
    last = b;
  }
  require(!built.cache.namespace_digest.empty(), "every request has a namespace");
}

}  // namespace
}  // namespace prefixd::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::warn);
  prefixd::fuzz::fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace prefixd;
  fuzz::Fixture& f = fuzz::fixture();
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto request = api::parse_chat_request(body, f.options);
  if (!request) return 0;  // the parser's own target checks refusals
  const auto text = f.builder->render(*request);
  const auto built = f.builder->build(*request, fuzz::kMaxPromptTokens);
  if (!text) {
    fuzz::check_refusal(text.error());
    fuzz::require(!built && built.error().code == text.error().code, "a request the template refuses is not built");
    return 0;
  }
  const auto again = f.builder->render(*request);
  fuzz::require(again && *again == *text, "rendering is deterministic");
  if (!built) {
    fuzz::check_refusal(built.error());
    return 0;
  }
  fuzz::check_built(*built, f.engine->vocab().size());
  const auto rebuilt = f.builder->build(*request, fuzz::kMaxPromptTokens);
  fuzz::require(rebuilt && rebuilt->prompt == built->prompt && rebuilt->cache.namespace_digest == built->cache.namespace_digest &&
                    rebuilt->cache.boundaries == built->cache.boundaries,
                "building is deterministic");
  return 0;
}
