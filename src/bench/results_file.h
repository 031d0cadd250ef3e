// prefixd bench — the raw results file of a run: every request on every server, as JSON. Written
// compressed (zstd) when its name ends in `.zst`, which is how `prefixd-bench compare` keeps runs
// in bench/results: a run's raw JSON is ten to twenty times larger than what it compresses to.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// The file name a run called `stem` writes its raw results to (`<stem>.json.zst`).
std::string results_file_name(const std::string& stem);

// Writes `results` to `path`, compressed when the name ends in `.zst`. Throws std::runtime_error
// when the file cannot be written.
void write_results(const std::filesystem::path& path, const nlohmann::json& results);

// Reads a results file, compressed (`.zst`) or not. Throws std::runtime_error for a missing,
// unreadable or damaged file, nlohmann::json::parse_error for text that is not JSON.
nlohmann::json read_results(const std::filesystem::path& path);

// The run's name of a results file: its file name without `.json` or `.json.zst`.
std::string results_stem(const std::filesystem::path& path);

}  // namespace prefixd::bench
