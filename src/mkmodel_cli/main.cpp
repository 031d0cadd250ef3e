#include <iostream>

#include "mkmodel_cli/mkmodel_options.h"

int main(int argc, char** argv) {
  CLI::App app{"prefixd-mkmodel: writes a GGUF model with random weights and a real architecture's shapes (for "
               "tests and demos)"};
  app.set_version_flag("--version", std::string("prefixd-mkmodel 0.1.0"));
  const auto run = prefixd::mkmodel_cli::add_mkmodel_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "prefixd-mkmodel: error: " << e.what() << "\n";
    return 1;
  }
}
