// prefixd fuzz — what the fuzz targets share: a property check that turns a broken promise of the
// code under test into a crash libFuzzer reports (and keeps the input of).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <source_location>

namespace prefixd::fuzz {

// Aborts with `what` and the caller's line when `ok` is false. Sanitizer reports and uncaught
// exceptions are crashes already; this is for results that are well-formed but wrong.
inline void require(bool ok, const char* what, std::source_location where = std::source_location::current()) {
  if (ok) return;
  std::fprintf(stderr, "fuzz: property violated at %s:%u: %s\n", where.file_name(), where.line(), what);
  std::abort();
}

}  // namespace prefixd::fuzz
