#include "bench/report_disk.h"

#include <algorithm>
#include <format>
#include <map>

#include "bench/report_cells.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double number(const nlohmann::json& j, const char* pointer, double fallback = -1) {
  const nlohmann::json::json_pointer where(pointer);
  return j.contains(where) && j.at(where).is_number() ? j.at(where).get<double>() : fallback;
}

// Median TTFT of one arm per repetition.
std::map<int, double> median_per_rep(const nlohmann::json& record, const std::string& arm) {
  std::map<int, std::vector<double>> samples;
  for (const auto& r : list_at(record, "requests")) {
    if (r.contains("error") || r.value("arm", "") != arm) continue;
    if (const double t = r.value("ttft_ms", -1.0); t >= 0) samples[r.value("rep", 0)].push_back(t);
  }
  std::map<int, double> out;
  for (auto& [rep, values] : samples) out[rep] = summarize(values).median;
  return out;
}

std::string ms_cell(const Summary& s) { return s.n == 0 ? "n/a" : format_summary(s) + " ms"; }

std::string mib_per_s_cell(const std::vector<double>& values) {
  if (values.empty()) return "n/a";
  std::vector<double> mib;
  for (double v : values) mib.push_back(v / kMiB);
  return format_summary(summarize(mib)) + " MiB/s";
}

}  // namespace

RestartFacts restart_facts(const nlohmann::json& record) {
  RestartFacts f;
  const std::map<int, double> cold = median_per_rep(record, kRestartColdArm);
  const std::map<int, double> warm = median_per_rep(record, kRestartWarmArm);
  std::vector<double> cold_all, warm_all, restart_all;
  for (const auto& r : list_at(record, "requests")) {
    if (r.contains("error")) continue;
    const std::string arm = r.value("arm", "");
    const double ttft = r.value("ttft_ms", -1.0);
    if (ttft < 0) continue;
    if (arm == kRestartColdArm) cold_all.push_back(ttft);
    if (arm == kRestartWarmArm) warm_all.push_back(ttft);
    if (arm != kRestartArm) continue;
    ++f.restarts;
    restart_all.push_back(ttft);
    const int rep = r.value("rep", 0);
    if (const auto it = cold.find(rep); it != cold.end()) {
      if (const auto x = ratio(it->second, ttft)) f.cold_over_restart.push_back(*x);
    }
    if (const auto it = warm.find(rep); it != warm.end()) {
      if (const auto x = ratio(ttft, it->second)) f.restart_over_warm.push_back(*x);
    }
    const auto prompt = static_cast<std::int64_t>(r.value("prompt_tokens", -1.0));
    const auto cached = static_cast<std::int64_t>(r.value("cached", -1.0));
    if (prompt >= 0 && cached >= 0) {
      f.prompt_tokens = std::max(f.prompt_tokens, prompt);
      f.fewest_cached = f.fewest_cached < 0 ? cached : std::min(f.fewest_cached, cached);
      f.most_missing = std::max(f.most_missing, prompt - cached);
    }
    if (!r.contains("disk")) continue;
    const nlohmann::json& d = r.at("disk");
    f.disk = true;
    const double bytes = number(d, "/restore/read_bytes");
    const double seconds = number(d, "/restore/read_seconds");
    if (bytes >= 0) {
      f.files_read.push_back(number(d, "/restore/reads", 0));
      f.bytes_read.push_back(bytes);
    }
    const auto restore = bytes > 0 && seconds > 0 ? std::optional<double>(bytes / seconds) : std::nullopt;
    if (restore) f.restore_bytes_per_s.push_back(*restore);
    if (const double seq = number(d, "/sequential_read/bytes_per_second"); seq > 0) {
      f.sequential_bytes_per_s.push_back(seq);
      if (restore) f.bandwidth_fraction.push_back(*restore / seq);
    }
    f.dropped_files = std::max(f.dropped_files, static_cast<std::int64_t>(number(d, "/page_cache/files", 0)));
    f.dropped_bytes = std::max(f.dropped_bytes, static_cast<std::uint64_t>(number(d, "/page_cache/bytes", 0)));
    f.resident_after_drop =
        std::max(f.resident_after_drop, static_cast<std::uint64_t>(number(d, "/page_cache/resident_bytes", 0)));
    const nlohmann::json::json_pointer settled("/write_behind/settled");
    if (d.contains(settled) && !d.at(settled).get<bool>()) ++f.unsettled_write_behind;
  }
  f.cold_ms = summarize(cold_all);
  f.warm_ms = summarize(warm_all);
  f.restart_ms = summarize(restart_all);
  return f;
}

std::string ratio_spread_cell(const std::vector<double>& ratios) {
  if (ratios.empty()) return "n/a";
  const Summary s = summarize(ratios);
  if (s.n == 1) return format_number(s.median) + "×";
  return std::format("{}× ({}–{}×)", format_number(s.median), format_number(s.min), format_number(s.max));
}

std::string restart_disk_block(const nlohmann::json& workload, const std::vector<std::string>& names) {
  std::vector<RestartFacts> facts;
  for (const auto& n : names) facts.push_back(restart_facts(target_of(workload, n)));
  if (std::ranges::none_of(facts, &RestartFacts::disk)) return "";
  Table table({"target", "TTFT cold", "TTFT RAM-warm", "TTFT after restart", "cold ÷ after restart",
               "after restart ÷ warm", "cached after restart", "read from disk per restart", "restore",
               "sequential read", "restore ÷ sequential"});
  for (std::size_t i = 0; i < names.size(); ++i) {
    const RestartFacts& f = facts[i];
    if (f.restarts == 0 && f.cold_ms.n == 0) continue;
    const std::string cached =
        f.fewest_cached < 0 ? "n/a" : std::format("{} of {}", f.fewest_cached, f.prompt_tokens);
    std::string read = "no disk tier";
    if (f.disk && !f.bytes_read.empty()) {
      read = std::format("{:.0f} files, {:.1f} MiB", summarize(f.files_read).median, summarize(f.bytes_read).median / kMiB);
    } else if (f.disk) {
      read = "n/a";
    }
    table.add_row({names[i], ms_cell(f.cold_ms), ms_cell(f.warm_ms), ms_cell(f.restart_ms),
                   ratio_spread_cell(f.cold_over_restart), ratio_spread_cell(f.restart_over_warm), cached, read,
                   f.disk ? mib_per_s_cell(f.restore_bytes_per_s) : "—",
                   f.disk ? mib_per_s_cell(f.sequential_bytes_per_s) : "—",
                   f.disk ? ratio_spread_cell(f.bandwidth_fraction) : "—"});
  }
  std::string out = "After a restart: a disk tier against a re-prefill.\n\n" + table.render() + "\n";
  out += "TTFT: median (min–max). The ratios are per restart: the cold TTFT of the same repetition ÷ the "
         "after-restart TTFT, and the after-restart TTFT ÷ the median RAM-warm TTFT of the same repetition, as "
         "median (min–max) over the restarts. Cached after restart: the fewest cached tokens of an after-restart "
         "request, of its prompt. Restore: the disk tier's own counters over the request (`tiers.disk.read_bytes` ÷ "
         "`read_seconds` of /v1/cache/stats: each file opened, read and verified). Sequential read: right after each "
         "restore, the same number of bytes written to one file in the same filesystem, synced, dropped from the page "
         "cache, and read back in-process with read(2) in 8 MiB blocks (what `dd if=FILE of=/dev/null bs=8M` does), "
         "open to last byte.";
  for (std::size_t i = 0; i < names.size(); ++i) {
    const RestartFacts& f = facts[i];
    if (!f.disk) continue;
    out += std::format(" Before each after-restart request, {}'s {} disk-tier files ({:.1f} MiB) were synced and "
                       "dropped from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)`, as a reboot leaves them); "
                       "mincore found {:.1f} MiB still resident after the drop.",
                       names[i], f.dropped_files, static_cast<double>(f.dropped_bytes) / kMiB,
                       static_cast<double>(f.resident_after_drop) / kMiB);
    if (f.unsettled_write_behind > 0) {
      out += std::format(" {} restart(s) came before its write-behind had settled.", f.unsettled_write_behind);
    }
  }
  return out + "\n\n";
}

}  // namespace prefixd::bench
