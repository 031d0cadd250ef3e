// RAII owners for libllama objects. Internal to src/engine/.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <llama.h>

namespace prefixd::engine::detail {

struct ModelDeleter {
  void operator()(llama_model* model) const { llama_model_free(model); }
};
struct ContextDeleter {
  void operator()(llama_context* ctx) const { llama_free(ctx); }
};
struct SamplerDeleter {
  void operator()(llama_sampler* sampler) const { llama_sampler_free(sampler); }
};

struct AdapterDeleter {
  void operator()(llama_adapter_lora* adapter) const { llama_adapter_lora_free(adapter); }
};

using ModelPtr = std::unique_ptr<llama_model, ModelDeleter>;
// Freed before its model, after every context that applied it (declare it between the two).
using AdapterPtr = std::unique_ptr<llama_adapter_lora, AdapterDeleter>;
using ContextPtr = std::unique_ptr<llama_context, ContextDeleter>;
using SamplerPtr = std::unique_ptr<llama_sampler, SamplerDeleter>;

// A llama_batch sized once for the context; llama_batch_free runs on destruction.
class OwnedBatch {
 public:
  // `embd` > 0: a batch of embedding rows of that width instead of token ids.
  explicit OwnedBatch(int capacity, int embd = 0) : batch_(llama_batch_init(capacity, embd, 1)), capacity_(capacity) {}
  ~OwnedBatch() { llama_batch_free(batch_); }
  OwnedBatch(const OwnedBatch&) = delete;
  OwnedBatch& operator=(const OwnedBatch&) = delete;

  llama_batch& get() { return batch_; }
  int capacity() const { return capacity_; }

 private:
  llama_batch batch_;
  int capacity_;
};

// While alive, libllama's warning and error lines logged on the constructing thread are collected
// here (and logged at debug level only): what turns a parser's complaint into an error value.
// Captures nest; the innermost one collects. Must be destroyed on the thread that made it.
class LlamaErrorCapture {
 public:
  LlamaErrorCapture();
  ~LlamaErrorCapture();
  LlamaErrorCapture(const LlamaErrorCapture&) = delete;
  LlamaErrorCapture& operator=(const LlamaErrorCapture&) = delete;

  // The collected lines joined by "; ".
  const std::string& text() const { return text_; }
  // The capture active on this thread, or null. Used by the log callback.
  static LlamaErrorCapture* active();
  void add(std::string_view line);

 private:
  LlamaErrorCapture* outer_;
  std::string text_;
};

// Process-wide libllama initialisation (backends, log routing); idempotent and thread-safe.
void ensure_backend_initialized();
// Whether a GPU (discrete or integrated) backend device is present. REQUIRES: initialised.
bool has_gpu_device();

}  // namespace prefixd::engine::detail
