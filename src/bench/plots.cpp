#include "bench/plots.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <format>
#include <fstream>
#include <vector>

#include "bench/report_latency.h"
#include "bench/report_stats.h"
#include "bench/target.h"

extern char** environ;

namespace prefixd::bench {
namespace {

const std::vector<std::string> kTargets = {"prefixd", "llama-server"};

const nlohmann::json* find_workload(const nlohmann::json& results, const std::string& name) {
  for (const auto& w : list_at(results, "workloads")) {
    if (w.value("name", "") == name) return &w;
  }
  return nullptr;
}

const nlohmann::json& target_record(const nlohmann::json& w, const std::string& name) {
  static const nlohmann::json kEmpty = nlohmann::json::object();  // immutable: "did not run"
  if (!w.contains("targets") || !w.at("targets").contains(name)) return kEmpty;
  return w.at("targets").at(name);
}

std::string cell(double v, bool present) { return present ? std::format("{}", v) : "?"; }

// gnuplot string literal: double quotes, backslash and quote escaped.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string terminal(int width, int height) {
  // pngcairo draws anti-aliased lines; plain png (libgd) is the fallback some builds only have.
  return std::format(
      "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {{\n  set terminal pngcairo size {},{} noenhanced font \"sans,10\"\n"
      "}} else {{\n  set terminal png size {},{} noenhanced\n}}\n",
      width, height, width, height);
}

struct Builder {
  std::string data_dir;
  std::string png_dir;
  std::string stem;
  PlotSet set;

  std::string data_path(const std::string& name) const { return data_dir + "/" + name; }
  std::string begin(const std::string& suffix, const std::string& title, const std::string& workload, int w = 960,
                    int h = 560) {
    const std::string file = stem + "-" + suffix + ".png";
    set.plots.push_back({{"file", file}, {"title", title}, {"workload", workload}});
    return "reset\n" + terminal(w, h) + "set datafile missing \"?\"\nset key top left\nset grid\nset output " +
           quoted(png_dir + "/" + file) + "\n";
  }

  // One line of a line plot: a data column against the first, drawn in a gnuplot style.
  struct Line {
    int column;
    std::string style;  // "linespoints lw 2", ...
    std::string title;
  };

  // Keeps `data` as the data file `data_name` and adds a plot of its lines to the script, after
  // the plot's own settings (title, axes, scales).
  void line_plot(const std::string& data_name, std::string data, const std::string& suffix, const std::string& title,
                 const std::string& workload, const std::string& settings, const std::vector<Line>& lines) {
    set.data[data_name] = std::move(data);
    const std::string file = quoted(data_path(data_name));
    std::string plot = "plot ";
    for (std::size_t i = 0; i < lines.size(); ++i) {
      plot += std::format("{}{} using 1:{} with {} title {}", i == 0 ? "" : ", \\\n  ", file, lines[i].column,
                          lines[i].style, quoted(lines[i].title));
    }
    set.script += begin(suffix, title, workload) + settings + plot + "\n";
  }
};

void ttft_vs_length(const nlohmann::json& results, Builder& b) {
  const auto* w = find_workload(results, "resend");
  if (w == nullptr) return;
  // Rows by prompt length; the arms are "cold N" / "warm N".
  std::map<int, std::vector<std::string>> rows;
  for (const auto& arm : list_at(*w, "arms")) {
    const std::string name = arm.value("name", "");
    const auto space = name.find(' ');
    if (space == std::string::npos) continue;
    const int length = std::atoi(name.c_str() + space + 1);
    const int column = name.starts_with("cold") ? 0 : 1;
    auto& row = rows[length];
    row.resize(5, "?");
    for (std::size_t t = 0; t < kTargets.size(); ++t) {
      const ArmStats s = arm_stats(target_record(*w, kTargets[t]), name);
      if (s.prompt_tokens.n > 0) row[0] = cell(s.prompt_tokens.median, true);
      row[1 + 2 * t + static_cast<std::size_t>(column)] = cell(s.ttft_ms.median, s.ttft_ms.n > 0);
    }
  }
  if (rows.empty()) return;
  std::string data = "# prompt_tokens prefixd_cold prefixd_warm llama_cold llama_warm (median TTFT ms)\n";
  for (const auto& [length, row] : rows) {
    data += (row[0] == "?" ? std::to_string(length) : row[0]);
    for (std::size_t i = 1; i < row.size(); ++i) data += " " + row[i];
    data += "\n";
  }
  b.line_plot("ttft-vs-length.dat", std::move(data), "ttft-vs-length", "TTFT vs prompt length (median)", "resend",
              "set title \"Identical resend: median TTFT vs prompt length\"\nset xlabel \"prompt tokens\"\n"
              "set ylabel \"TTFT (ms, log scale)\"\nset logscale xy\n",
              {{2, "linespoints lw 2", "prefixd cold"},
               {3, "linespoints lw 2", "prefixd warm"},
               {4, "linespoints lw 2 dt 2", "llama-server cold"},
               {5, "linespoints lw 2 dt 2", "llama-server warm"}});
}

void agent_turns(const nlohmann::json& results, Builder& b) {
  const auto* w = find_workload(results, "agent");
  if (w == nullptr) return;
  std::string data = "# turn prompt_tokens prefixd_evaluated llama_evaluated (means over the runs)\n";
  int rows = 0;
  for (const auto& arm : list_at(*w, "arms")) {
    const std::string name = arm.value("name", "");
    const ArmStats p = arm_stats(target_record(*w, "prefixd"), name);
    const ArmStats l = arm_stats(target_record(*w, "llama-server"), name);
    const auto mean = [](const ArmStats& s) { return cell(static_cast<double>(s.evaluated_sum) / std::max(1, s.n), s.n > 0); };
    const auto& prompt = p.n > 0 ? p.prompt_tokens : l.prompt_tokens;
    data += std::format("{} {} {} {}\n", ++rows, cell(prompt.mean, prompt.n > 0), mean(p), mean(l));
  }
  if (rows == 0) return;
  b.line_plot("agent-evaluated.dat", std::move(data), "agent-evaluated", "Tokens evaluated per agent turn", "agent",
              "set title \"Agent loop: prompt tokens evaluated per turn (mean over runs)\"\nset xlabel \"turn\"\n"
              "set ylabel \"tokens\"\nset xtics 1\nset yrange [0:*]\n",
              {{2, "lines lw 1 lc rgb \"gray\"", "prompt tokens"},
               {3, "linespoints lw 2", "prefixd evaluated"},
               {4, "linespoints lw 2 dt 2", "llama-server evaluated"}});
}

void multisession(const nlohmann::json& results, Builder& b) {
  const auto* w = find_workload(results, "multisession");
  if (w == nullptr) return;
  std::vector<std::string> files;
  for (const auto& t : kTargets) {
    const auto& record = target_record(*w, t);
    std::string data = "# start_s ttft_ms hit_ratio cumulative_hit_ratio\n";
    std::vector<const nlohmann::json*> requests;
    for (const auto& r : list_at(record, "requests")) {
      if (!r.contains("error")) requests.push_back(&r);
    }
    std::ranges::sort(requests, {}, [](const nlohmann::json* r) { return r->value("start_s", 0.0); });
    double cached = 0;
    double prompt = 0;
    const double t0 = requests.empty() ? 0.0 : requests.front()->value("start_s", 0.0);  // server startup excluded
    for (const auto* r : requests) {
      const double p = static_cast<double>(r->value("prompt_tokens", -1L));
      const double c = static_cast<double>(r->value("cached", -1L));
      if (p > 0 && c >= 0) {
        cached += c;
        prompt += p;
      }
      data += std::format("{} {} {} {}\n", r->value("start_s", 0.0) - t0, cell(r->value("ttft_ms", -1.0), r->value("ttft_ms", -1.0) >= 0),
                          cell(c / p, p > 0 && c >= 0), cell(cached / prompt, prompt > 0));
    }
    files.push_back("multisession-" + t + ".dat");
    b.set.data[files.back()] = data;
  }
  const std::string p = quoted(b.data_path(files[0]));
  const std::string l = quoted(b.data_path(files[1]));
  b.set.script += b.begin("multisession", "Multi-session trace: hit ratio and TTFT over time", "multisession", 960, 760) +
                  "set multiplot layout 2,1 title \"Multi-session chat trace (16 sessions, --parallel 2)\"\n"
                  "set ylabel \"cached / prompt tokens\"\nset yrange [0:1.05]\nset xlabel \"\"\n"
                  "plot " + p + " using 1:3 with points pt 7 ps 0.6 title \"prefixd per request\", \\\n  " + p +
                  " using 1:4 with lines lw 2 title \"prefixd cumulative\", \\\n  " + l +
                  " using 1:3 with points pt 6 ps 0.6 title \"llama-server per request\", \\\n  " + l +
                  " using 1:4 with lines lw 2 dt 2 title \"llama-server cumulative\"\n"
                  "set yrange [*:*]\nset logscale y\nset ylabel \"TTFT (ms, log scale)\"\n"
                  "set xlabel \"seconds since the trace started (each server has its own run)\"\n"
                  "plot " + p + " using 1:2 with points pt 7 ps 0.6 title \"prefixd\", \\\n  " + l +
                  " using 1:2 with points pt 6 ps 0.6 title \"llama-server\"\n"
                  "unset multiplot\n";
}

void rss(const nlohmann::json& results, Builder& b) {
  std::string panels;
  int count = 0;
  for (const auto& w : list_at(results, "workloads")) {
    std::vector<std::string> lines;
    for (const auto& t : kTargets) {
      const auto& record = target_record(w, t);
      if (!record.contains("rss") || record.at("rss").empty()) continue;
      std::string data = "# seconds rss_mib\n";
      for (const auto& sample : record.at("rss")) {
        data += std::format("{} {}\n", sample.at(0).get<double>(), sample.at(1).get<double>() / 1024.0);
      }
      const std::string name = "rss-" + w.value("name", "") + "-" + t + ".dat";
      b.set.data[name] = data;
      lines.push_back(quoted(b.data_path(name)) + " using 1:2 with lines lw 2" + (t == "prefixd" ? "" : " dt 2") +
                      " title \"" + t + "\"");
    }
    if (lines.empty()) continue;
    ++count;
    panels += "set title " + quoted(w.value("name", "")) + "\nplot ";
    for (std::size_t i = 0; i < lines.size(); ++i) panels += (i ? ", \\\n  " : "") + lines[i];
    panels += "\n";
  }
  if (count == 0) return;
  const int columns = std::min(3, count);
  const int rows = (count + columns - 1) / columns;
  b.set.script += b.begin("rss", "Resident memory over time", "", 1200, 360 * rows) +
                  std::format("set multiplot layout {},{} title \"RSS (MiB) over each server's run of each workload\"\n", rows,
                              columns) +
                  "set xlabel \"seconds\"\nset ylabel \"MiB\"\nset key bottom right\n" + panels + "unset multiplot\n";
}

// The concurrency sweep: TTFT p99 and output tokens/s against clients, one line per server
// (medians over repetitions).
void sweep(const nlohmann::json& results, Builder& b) {
  const auto points = sweep_points(results);
  if (points.empty()) return;
  std::vector<std::string> names;
  for (const auto& s : list_at(results, "servers")) names.push_back(s.value("name", ""));
  std::string data = "# clients, then per server: ttft_p99_ms output_tokens_per_s (medians over repetitions)\n";
  for (const auto* w : points) {
    data += std::to_string(w->value("clients", 0));
    for (const auto& n : names) {
      std::vector<double> ttft, output;
      for (int rep = 0; rep < repetitions(*w); ++rep) {
        if (const auto l = latency_of(target_record(*w, n), rep)) {
          ttft.push_back(l->ttft_p99_ms);
          output.push_back(l->output_per_s);
        }
      }
      data += " " + cell(summarize(ttft).median, !ttft.empty()) + " " + cell(summarize(output).median, !output.empty());
    }
    data += "\n";
  }
  b.set.data["sweep.dat"] = std::move(data);
  const std::string file = quoted(b.data_path("sweep.dat"));
  auto lines = [&](int offset) {
    std::string plot = "plot ";
    for (std::size_t t = 0; t < names.size(); ++t) {
      plot += std::format("{}{} using 1:{} with linespoints lw 2{} title \"{}\"", t == 0 ? "" : ", \\\n  ", file,
                          2 + 2 * static_cast<int>(t) + offset, t == 0 ? "" : std::format(" dt {}", t + 1), names[t]);
    }
    return plot + "\n";
  };
  b.set.script += b.begin("sweep", "Concurrency sweep: TTFT p99 and output tokens/s against clients", "sweep", 960, 760) +
                  "set multiplot layout 2,1 title \"Concurrency sweep (closed loop, as many slots as clients)\"\n"
                  "set logscale x 2\nset xlabel \"\"\nset logscale y\nset ylabel \"TTFT p99 (ms, log scale)\"\n" +
                  lines(0) + "unset logscale y\nset yrange [0:*]\nset ylabel \"output tokens/s\"\nset xlabel \"clients\"\n" +
                  lines(1) + "unset multiplot\n";
}

}  // namespace

PlotSet build_plots(const nlohmann::json& results, const std::string& data_dir, const std::string& png_dir,
                    const std::string& stem) {
  Builder b{data_dir, png_dir, stem, {}};
  ttft_vs_length(results, b);
  agent_turns(results, b);
  multisession(results, b);
  rss(results, b);
  sweep(results, b);
  return std::move(b.set);
}

bool run_gnuplot(const std::filesystem::path& script, std::string& why) {
  const std::string gnuplot = find_executable("gnuplot");
  if (gnuplot.empty()) {
    why = "gnuplot is not on PATH; run `gnuplot " + script.string() + "` where it is";
    return false;
  }
  std::vector<std::string> args = {gnuplot, script.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, gnuplot.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    why = "cannot start gnuplot";
    return false;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why = "gnuplot failed on " + script.string();
    return false;
  }
  return true;
}

nlohmann::json make_plots(const nlohmann::json& results, const std::string& dir, const std::string& stem, std::string& why) {
  namespace fs = std::filesystem;
  const fs::path png_dir = fs::absolute(dir);
  const fs::path data_dir = png_dir / (stem + "-plots");
  fs::create_directories(data_dir);
  PlotSet set = build_plots(results, data_dir.string(), png_dir.string(), stem);
  for (const auto& [name, contents] : set.data) std::ofstream(data_dir / name) << contents;
  const fs::path script = data_dir / "plots.gp";
  std::ofstream(script) << set.script;
  if (!run_gnuplot(script, why)) return nlohmann::json::array();
  nlohmann::json made = nlohmann::json::array();
  for (const auto& plot : set.plots) {
    if (fs::exists(png_dir / plot.at("file").get<std::string>())) made.push_back(plot);
  }
  return made;
}

}  // namespace prefixd::bench
