// prefixd_stream_probe: whether one prompt's greedy reply depends on where its cells lie in
// libllama's KV memory and on what else the memory holds, and what the remedies cost in decode
// speed. Two layouts are compared: the unified pool prefixd serves from (every sequence's cells in
// one buffer) and one KV stream per sequence (engine::ContextOptions::stream_per_sequence).
//
// Usage: prefixd_stream_probe MODEL.gguf [--threads N] [--prompt TOKENS] [--reply TOKENS] [--steps N]
//                             [--deterministic] [--check]
//
// --deterministic: the engines compute as `serve --deterministic` does: the prompt in row-wise
// calls of at most Engine::rowwise_rows() rows at aligned positions, every lone row padded (in
// the pool, by a row of the pad sequence; with streams, by a row at the next position of its own
// sequence, LlamaEngine::run_rowwise_streams).
// --check: no speeds; exits 1 unless, with a stream per sequence, every scenario but `beside`
// agrees, or with --deterministic every scenario (what the server's layouts rest on; ctest
// `stream_invariance_cpu` and `stream_invariance_deterministic_cpu` run it).
//
// Every scenario computes the same prompt the same way — chunks of 512 rows from position 0 (the
// tiled kernels), then the last prompt token in a padded row-wise call, as the scheduler does — and
// then decodes a greedy reply one lone row per step (decode), or one padded row per step
// (decode_padded). Only the memory around it changes:
//   empty       the memory holds nothing else (the reference);
//   after-held  another sequence's 1,041 cells were written first and stay;
//   into-hole   the other sequence is removed after half the prompt, so the rest lands in the cells
//               it freed, below the prompt's first half;
//   restored    the prompt (all but its last token) is saved, the memory cleared, the other sequence
//               written, and the prompt restored (as a host-tier hit restores it);
//   beside      the other sequence decodes in the same calls, a row each (a concurrent request).
// A scenario "agrees" when its reply has the reference's tokens and bit-identical logits.
//
// Then decode speed at 2,000 cells: one sequence alone (lone rows, and padded rows) and two at once.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <format>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace {

using prefixd::engine::BatchToken;
using prefixd::engine::DecodeStatus;
using prefixd::engine::Engine;
using prefixd::engine::Pos;
using prefixd::engine::SeqId;
using prefixd::engine::Token;

struct Options {
  std::string model;
  int threads = 2;
  int prompt = 1042;
  int reply = 8;
  int steps = 48;
  bool check = false;
  bool deterministic = false;
};

// Tokens from a fixed linear congruential sequence: the same prompt on every run.
std::vector<Token> tokens_from(std::uint32_t seed, int count, std::int32_t vocab) {
  std::vector<Token> out;
  std::uint32_t x = seed;
  for (int i = 0; i < count; ++i) {
    x = x * 1664525u + 1013904223u;
    out.push_back(static_cast<Token>(100 + (x >> 8) % static_cast<std::uint32_t>(vocab - 200)));
  }
  return out;
}

void check(DecodeStatus status, std::string_view what) {
  if (status != DecodeStatus::ok) {
    std::fprintf(stderr, "prefixd_stream_probe: decode failed (%s)\n", std::string(what).c_str());
    std::exit(2);
  }
}

// Positions [from, to) of `tokens` into `seq`, in chunks of 512 rows (of the row-wise size when
// the engine is deterministic) between multiples of that size, no logits.
void prefill(Engine& engine, SeqId seq, const std::vector<Token>& tokens, Pos from, Pos to) {
  const Pos chunk = engine.deterministic() ? engine.rowwise_rows() : 512;
  for (Pos p = from; p < to;) {
    const Pos end = std::min<Pos>(to, p - p % chunk + chunk);
    std::vector<BatchToken> batch;
    for (Pos q = p; q < end; ++q) batch.push_back({.token = tokens[static_cast<size_t>(q)], .pos = q, .seq = seq});
    check(engine.decode(batch), "prefill");
    p = end;
  }
}

Token argmax(std::span<const float> logits) {
  return static_cast<Token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

struct Reply {
  std::vector<Token> tokens;
  std::vector<std::vector<float>> logits;  // the row each token was drawn from
};

// The prompt's last token (padded), then `n` greedy tokens one row per step. `beside`: another
// sequence whose own greedy reply is decoded in the same calls.
Reply answer(Engine& engine, SeqId seq, const std::vector<Token>& prompt, int n, bool padded,
             std::optional<std::pair<SeqId, Pos>> beside = std::nullopt) {
  Reply out;
  const auto last = static_cast<Pos>(prompt.size()) - 1;
  std::vector<BatchToken> first{{.token = prompt.back(), .pos = last, .seq = seq, .logits = true}};
  check(engine.decode_padded(first), "last prompt token");
  Token next = argmax(engine.logits(0));
  Token other = 0;
  for (int i = 0; i < n; ++i) {
    out.tokens.push_back(next);
    const std::span<const float> row = engine.logits(0);
    out.logits.emplace_back(row.begin(), row.end());
    std::vector<BatchToken> step{{.token = next, .pos = last + 1 + i, .seq = seq, .logits = true}};
    if (beside) step.push_back({.token = other, .pos = beside->second + i, .seq = beside->first, .logits = true});
    check(padded && !beside ? engine.decode_padded(step) : engine.decode(step), "reply");
    next = argmax(engine.logits(0));
    if (beside) other = argmax(engine.logits(1));
  }
  return out;
}

struct Verdict {
  bool same_tokens = true;
  double max_diff = 0;
  int first_token_differing = -1;
};

Verdict compare(const Reply& reference, const Reply& got) {
  Verdict v;
  for (size_t i = 0; i < reference.tokens.size() && i < got.tokens.size(); ++i) {
    if (reference.tokens[i] != got.tokens[i] && v.first_token_differing < 0) {
      v.first_token_differing = static_cast<int>(i);
      v.same_tokens = false;
    }
    for (size_t k = 0; k < reference.logits[i].size(); ++k) {
      v.max_diff = std::max(v.max_diff, std::abs(static_cast<double>(reference.logits[i][k]) - got.logits[i][k]));
    }
    if (!v.same_tokens) break;  // later rows follow other tokens: not comparable
  }
  return v;
}

std::unique_ptr<Engine> load(const Options& o, bool streams) {
  prefixd::engine::ContextOptions context;
  context.n_ctx = 4096;
  context.n_batch = 512;
  context.n_parallel = 2;
  context.n_holder_seqs = 0;
  context.n_threads = o.threads;
  context.kv_layout = streams ? prefixd::engine::KvLayout::streams : prefixd::engine::KvLayout::pool;
  context.deterministic = o.deterministic;
  return prefixd::engine::load_llama_engine(o.model, context);
}

// Prints the layout's rows; returns how many scenarios disagreed (other than `beside` unless the
// engine is deterministic).
int probe_layout(const Options& o, bool streams) {
  const std::unique_ptr<Engine> engine = load(o, streams);
  const std::int32_t vocab = engine->vocab().size();
  const std::vector<Token> prompt = tokens_from(7, o.prompt, vocab);
  const std::vector<Token> other = tokens_from(11, 1041, vocab);
  const auto n = static_cast<Pos>(prompt.size());
  const std::string layout = std::string(streams ? "stream per sequence" : "unified pool") +
                             (o.deterministic ? ", deterministic" : "");
  int disagreed = 0;

  // A deterministic engine pads every lone row itself: lone and padded are one case.
  for (const bool padded : o.deterministic ? std::vector<bool>{true} : std::vector<bool>{false, true}) {
    engine->clear();
    prefill(*engine, 0, prompt, 0, n - 1);
    const Reply reference = answer(*engine, 0, prompt, o.reply, padded);

    std::vector<std::pair<std::string, std::function<Reply()>>> scenarios;
    scenarios.emplace_back("after-held", [&] {
      engine->clear();
      prefill(*engine, 1, other, 0, static_cast<Pos>(other.size()));
      prefill(*engine, 0, prompt, 0, n - 1);
      return answer(*engine, 0, prompt, o.reply, padded);
    });
    scenarios.emplace_back("into-hole", [&] {
      engine->clear();
      prefill(*engine, 1, other, 0, static_cast<Pos>(other.size()));
      const Pos half = engine->deterministic() ? 8 * engine->rowwise_rows() : 512;  // a chunk boundary
      prefill(*engine, 0, prompt, 0, half);
      engine->remove_sequence(1, 0, -1);
      prefill(*engine, 0, prompt, half, n - 1);
      return answer(*engine, 0, prompt, o.reply, padded);
    });
    scenarios.emplace_back("restored", [&] {
      engine->clear();
      prefill(*engine, 0, prompt, 0, n - 1);
      const prefixd::engine::Bytes state = engine->save_sequence(0);
      engine->clear();
      prefill(*engine, 1, other, 0, static_cast<Pos>(other.size()));
      if (!engine->restore_sequence(state, 0)) {
        std::fprintf(stderr, "prefixd_stream_probe: the restore failed\n");
        std::exit(2);
      }
      return answer(*engine, 0, prompt, o.reply, padded);
    });
    scenarios.emplace_back("beside", [&] {
      engine->clear();
      prefill(*engine, 1, other, 0, static_cast<Pos>(other.size()) - 1);
      prefill(*engine, 0, prompt, 0, n - 1);
      std::vector<BatchToken> last{{.token = other.back(), .pos = static_cast<Pos>(other.size()) - 1, .seq = 1}};
      check(engine->decode_padded(last), "other's last token");
      return answer(*engine, 0, prompt, o.reply, padded, std::pair<SeqId, Pos>{1, static_cast<Pos>(other.size())});
    });
    for (const auto& [name, run] : scenarios) {
      const Verdict v = compare(reference, run());
      if ((name != "beside" || o.deterministic) && !(v.same_tokens && v.max_diff == 0)) disagreed += 1;
      std::printf("| %s | %s | %s | %s | %s | %.3g |\n", layout.c_str(), padded ? "padded" : "lone", name.c_str(),
                  v.same_tokens && v.max_diff == 0 ? "yes" : "no",
                  v.same_tokens ? "all" : std::format("from token {}", v.first_token_differing).c_str(), v.max_diff);
    }
  }
  return disagreed;
}

// Decode tokens per second at 2,000 cells: `seqs` sequences stepping together, lone or padded rows.
double decode_speed(Engine& engine, const Options& o, int seqs, bool padded) {
  engine.clear();
  const std::vector<Token> prompt = tokens_from(13, 2000, engine.vocab().size());
  for (int s = 0; s < seqs; ++s) prefill(engine, s, prompt, 0, static_cast<Pos>(prompt.size()));
  Token next = prompt.back();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) {
    std::vector<BatchToken> step;
    for (int s = 0; s < seqs; ++s) step.push_back({.token = next, .pos = 2000 + i, .seq = s, .logits = true});
    check(padded ? engine.decode_padded(step) : engine.decode(step), "decode speed");
    next = argmax(engine.logits(0));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o.steps * seqs / seconds;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&]() -> int {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "prefixd_stream_probe: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      const int v = std::atoi(argv[++i]);
      if (v <= 0) {
        std::fprintf(stderr, "prefixd_stream_probe: %s must be a positive number\n", argv[i - 1]);
        std::exit(2);
      }
      return v;
    };
    if (arg == "--threads") {
      o.threads = value();
    } else if (arg == "--prompt") {
      o.prompt = std::max(value(), 600);
    } else if (arg == "--reply") {
      o.reply = value();
    } else if (arg == "--steps") {
      o.steps = value();
    } else if (arg == "--deterministic") {
      o.deterministic = true;
    } else if (arg == "--check") {
      o.check = true;
    } else if (!arg.starts_with("--") && o.model.empty()) {
      o.model = std::string(arg);
    } else {
      std::fprintf(stderr, "usage: prefixd_stream_probe MODEL.gguf [--threads N] [--prompt TOKENS] [--reply TOKENS] [--steps N] [--deterministic] [--check]\n");
      std::exit(2);
    }
  }
  if (o.model.empty()) {
    std::fprintf(stderr, "usage: prefixd_stream_probe MODEL.gguf [--threads N] [--prompt TOKENS] [--reply TOKENS] [--steps N] [--deterministic] [--check]\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    std::printf("prompt %d tokens, reply %d tokens, %d threads; the reference: the same prompt on an empty memory\n\n",
                o.prompt, o.reply, o.threads);
    std::printf("| layout | reply rows | scenario | agrees | same tokens | max logit difference |\n");
    std::printf("| --- | --- | --- | --- | --- | --- |\n");
    probe_layout(o, false);
    if (const int disagreed = probe_layout(o, true); o.check) {
      if (disagreed > 0) {
        std::printf("\nFAIL: with a stream per sequence, %d scenarios answered unlike the empty memory\n", disagreed);
        return 1;
      }
      std::printf("\nOK: with a stream per sequence, where a sequence's cells lie and what else the memory holds "
                  "changed nothing\n");
      return 0;
    }
    std::printf("\n| layout | sequences | rows | decode tok/s |\n| --- | --- | --- | --- |\n");
    for (const bool streams : {false, true}) {
      const std::unique_ptr<Engine> engine = load(o, streams);
      const char* layout = streams ? "stream per sequence" : "unified pool";
      std::printf("| %s | 1 | lone | %.1f |\n", layout, decode_speed(*engine, o, 1, false));
      std::printf("| %s | 1 | padded | %.1f |\n", layout, decode_speed(*engine, o, 1, true));
      std::printf("| %s | 2 | together | %.1f |\n", layout, decode_speed(*engine, o, 2, false));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prefixd_stream_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
