// An editor's code completion, written from the request pattern of llama.vscode and llama.vim: the
// user visits files, moves the cursor and types; every few keystrokes the editor sends /infill
// with the lines around the cursor (the prefix up to the line, the line typed so far as `prompt`,
// the line's rest and the lines after it as the suffix) and a ring of chunks taken from the files
// the user left (`input_extra`), which rotates — newest last, oldest dropped — at each switch. A
// completion the user typed past is dropped: the client hangs up after 50 ms unless the reply has
// ended; the one at the end of each line, where the user pauses, is waited for.
#include <algorithm>
#include <deque>
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kCode = 53;
constexpr int kFiles = 4;
constexpr int kFileLines = 120;
constexpr int kLineTokens = 8;      // at BENCH_SCALE 1
constexpr int kPrefixLines = 48;    // llama.vscode sends 256 before the cursor and 64 after it
constexpr int kSuffixLines = 16;
constexpr int kChunkLines = 40;     // llama.vscode's ring chunks are 64 lines, 16 of them at most
constexpr int kRingChunks = 6;
constexpr int kKeysPerRequest = 3;  // a request every few keystrokes
constexpr int kLinesTyped = 2;      // per visit
constexpr double kTypedOnAfterS = 0.05;
constexpr int kReplyTokens = 8;
constexpr const char* kTypedOn = "typed on (dropped after 50 ms)";
constexpr const char* kPause = "pause at the end of a line";

struct Visit {
  int file = 0;
  int line = 0;  // where the cursor goes
};
// Every file open from the start (a chunk of each in the ring), then six visits, two of them back
// to a file seen before.
constexpr int kOpenedFirst[] = {1, 2, 3, 0};
constexpr Visit kVisits[] = {{0, 40}, {1, 60}, {2, 30}, {3, 80}, {0, 70}, {2, 50}};

std::string file_name(int file) { return std::format("src/module_{}.py", file); }

std::string joined(const std::vector<std::string>& lines, int begin, int end) {
  std::string out;
  for (int i = std::max(0, begin); i < std::min<int>(end, static_cast<int>(lines.size())); ++i) {
    out += lines[static_cast<std::size_t>(i)];
    out += '\n';
  }
  return out;
}

nlohmann::json chunk_of(const std::vector<std::string>& lines, int file, int around) {
  const int begin = std::clamp(around - kChunkLines / 2, 0, std::max(0, static_cast<int>(lines.size()) - kChunkLines));
  return {{"filename", file_name(file)}, {"text", joined(lines, begin, begin + kChunkLines)}};
}

}  // namespace

Workload make_codecomplete(const WorkloadParams& p) {
  Workload w = named_workload("codecomplete", "Code completion in an editor (/infill)", "request", 1,
                              plain_arms({kPause, kTypedOn}));
  w.latency = true;  // TTFT p50 and p99: what the user waits for at a pause
  const int line_tokens = scaled(kLineTokens, p.scale, 2);
  w.description = std::format(
      "One editor session, written from llama.vscode's request pattern: {} files of {} lines (about {} tokens a line); "
      "all are open from the start, then the cursor visits a file {} times (twice one seen before) and types {} new lines "
      "there. Every {} keystrokes an /infill request: the {} lines before the cursor as input_prefix, the line typed "
      "so far as prompt, the {} lines after as input_suffix, and input_extra a ring of at most {} chunks of {} lines "
      "from the files the user left (the newest last; the oldest drops out), so each file switch rotates it. "
      "n_predict {}, greedy. A request the user typed past is dropped: the client hangs up 50 ms after sending unless "
      "the reply ended; the last of each line is waited for (the user pauses). --parallel 1 on both servers.",
      kFiles, kFileLines, line_tokens, std::size(kVisits), kLinesTyped, kKeysPerRequest, kPrefixLines, kSuffixLines,
      kRingChunks, kChunkLines, kReplyTokens);

  std::vector<std::vector<std::string>> files(kFiles);
  for (int f = 0; f < kFiles; ++f) {
    for (int i = 0; i < kFileLines; ++i) {
      const std::string indent = i % 4 == 0 ? "" : "    ";
      files[static_cast<std::size_t>(f)].push_back(
          indent + text_of(derive_seed(p.seed, kCode, static_cast<std::uint64_t>(f), static_cast<std::uint64_t>(i)),
                           line_tokens, p.words_per_token));
    }
  }
  std::deque<nlohmann::json> ring;
  const auto add_to_ring = [&](nlohmann::json chunk) {
    std::erase(ring, chunk);
    ring.push_back(std::move(chunk));
    while (static_cast<int>(ring.size()) > kRingChunks) ring.pop_front();
  };
  for (const int f : kOpenedFirst) add_to_ring(chunk_of(files[static_cast<std::size_t>(f)], f, kFileLines / 2));

  // The prompt budget the context must leave room for: llama-server's infill layout keeps other
  // files' chunks only where the context exceeds its 2,048-token window and twice n_predict.
  const int planned = 2048 + 2 * kReplyTokens + kRingChunks * kChunkLines * line_tokens * 11 / 10;
  int typed = 0;
  for (std::size_t v = 0; v < std::size(kVisits); ++v) {
    const Visit visit = kVisits[v];
    auto& lines = files[static_cast<std::size_t>(visit.file)];
    int cursor_line = visit.line;
    for (int l = 0; l < kLinesTyped; ++l) {
      const std::string text = "    " + text_of(derive_seed(p.seed, kCode, 1000 + v, static_cast<std::uint64_t>(l)),
                                                 line_tokens, p.words_per_token);
      nlohmann::json extra = nlohmann::json::array();
      for (const auto& chunk : ring) extra.push_back(chunk);
      const std::string prefix = joined(lines, cursor_line - kPrefixLines, cursor_line);
      const std::string suffix = "\n" + joined(lines, cursor_line, cursor_line + kSuffixLines);
      for (std::size_t keys = kKeysPerRequest; ; keys += kKeysPerRequest) {
        const bool end_of_line = keys >= text.size();
        const std::string so_far = text.substr(0, std::min(keys, text.size()));
        w.steps.push_back({.arm = end_of_line ? kPause : kTypedOn,
                           .session = "editor",
                           .infill = {{"input_prefix", prefix},
                                      {"input_suffix", suffix},
                                      {"input_extra", extra},
                                      {"prompt", so_far},
                                      {"samplers", {"top_k", "top_p", "infill"}},
                                      {"t_max_prompt_ms", 500},
                                      {"t_max_predict_ms", 1000}},
                           .cancel_after_s = end_of_line ? 0.0 : kTypedOnAfterS,
                           .max_tokens = kReplyTokens,
                           .planned_tokens = planned,
                           .x = static_cast<double>(++typed)});
        if (end_of_line) break;
      }
      // Enter: the line is part of the file and the cursor is on the next one.
      lines.insert(lines.begin() + cursor_line, text);
      ++cursor_line;
    }
    // Leaving the file: the chunk around the cursor joins the ring.
    add_to_ring(chunk_of(lines, visit.file, cursor_line));
  }
  return w;
}

}  // namespace prefixd::bench
