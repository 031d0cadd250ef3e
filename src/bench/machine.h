// prefixd bench — what the report says about the machine and the clock.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// hostname, cpus, cpu_model, mem_total_mib, load_average_1m.
nlohmann::json machine_json();
// "2024-06-01T12:00:00Z" and "2024-06-01", UTC.
std::string utc_timestamp();
std::string utc_date();
// A file-name-safe version of `text` (letters, digits, '-', '_', '.'; others become '-').
std::string file_safe(const std::string& text);

}  // namespace prefixd::bench
