#include "bench/results_file.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <zstd.h>

namespace prefixd::bench {
namespace fs = std::filesystem;

namespace {

constexpr int kCompressionLevel = 19;  // a run is written once and read rarely: smallest wins

bool compressed(const fs::path& path) { return path.extension() == ".zst"; }

std::string compress(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const std::size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), kCompressionLevel);
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

std::string decompress(const std::string& bytes, const fs::path& path) {
  // Streaming, so a frame without its content size (the zstd tool's, from a pipe) reads too.
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  std::string out;
  std::string chunk(ZSTD_DStreamOutSize(), '\0');
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  std::size_t last = 1;
  while (in.pos < in.size) {
    ZSTD_outBuffer buffer{chunk.data(), chunk.size(), 0};
    last = ZSTD_decompressStream(ctx.get(), &buffer, &in);
    if (ZSTD_isError(last)) {
      throw std::runtime_error(path.string() + ": not a zstd file (" + ZSTD_getErrorName(last) + ")");
    }
    out.append(chunk.data(), buffer.pos);
  }
  if (last != 0) throw std::runtime_error(path.string() + ": the compressed file is cut short");
  return out;
}

}  // namespace

std::string results_file_name(const std::string& stem) { return stem + ".json.zst"; }

void write_results(const fs::path& path, const nlohmann::json& results) {
  const std::string text = results.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const std::string bytes = compressed(path) ? compress(text) : text;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

nlohmann::json read_results(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return nlohmann::json::parse(compressed(path) ? decompress(bytes, path) : bytes);
}

std::string results_stem(const fs::path& path) {
  std::string name = path.filename().string();
  for (const std::string suffix : {".zst", ".json"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) name.resize(name.size() - suffix.size());
  }
  return name;
}

}  // namespace prefixd::bench
