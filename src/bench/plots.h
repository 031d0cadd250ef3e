// prefixd bench — PNG plots of a results file with gnuplot: TTFT vs prompt length, tokens
// evaluated per agent turn, hit ratio and TTFT over the multi-session trace, RSS over time.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// Everything gnuplot needs, built from a results file without touching the disk.
struct PlotSet {
  std::map<std::string, std::string> data;  // data file name (in the data folder) → contents
  std::string script;                       // a gnuplot script writing every PNG
  nlohmann::json plots = nlohmann::json::array();  // [{"file": "<stem>-x.png", "title", "workload"}]
};
PlotSet build_plots(const nlohmann::json& results, const std::string& data_dir, const std::string& png_dir,
                    const std::string& stem);

// Writes the data and `plots.gp` into `<dir>/<stem>-plots/` and runs gnuplot, which writes the PNGs
// into `dir`. Returns the plots made (file names relative to `dir`); empty when gnuplot is not on
// PATH or fails, with the reason in `why`.
// Runs gnuplot on `script`; false (with the reason in `why`) when gnuplot is not on PATH or fails.
bool run_gnuplot(const std::filesystem::path& script, std::string& why);

nlohmann::json make_plots(const nlohmann::json& results, const std::string& dir, const std::string& stem, std::string& why);

}  // namespace prefixd::bench
