// prefixd mkmodel_cli — the `prefixd-mkmodel` program: writes a GGUF model with random weights
// and a real architecture's shapes (src/modelgen) for tests, demos and benchmarks.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace prefixd::mkmodel_cli {

// Registers the program's options on `app` and returns the function that runs it (exit status).
std::function<int()> add_mkmodel_options(CLI::App& app);

}  // namespace prefixd::mkmodel_cli
