// Fuzz target: images as requests carry them — the data URL and base64 reader (api/images/
// image_input.h) and the header reader that sizes an image before it is decoded
// (engine::read_image_size, which decides whether the projector's decoder ever sees the bytes).
//
// Each input is read three ways: as an image file's bytes, as a data URL, and as raw bytes that are
// base64-encoded and decoded back. Besides the sanitizers it checks the readers' promises: a
// header is read or refused with ImageError (never another exception), a data URL gives at most
// the byte limit or a rejection naming its field, and base64 round-trips.
#include <cstdint>
#include <string>
#include <string_view>

#include "api/body/field_reader.h"
#include "api/images/image_input.h"
#include "engine/vision.h"
#include "fuzz_check.h"

namespace prefixd::fuzz {
namespace {

constexpr api::ImageLimits kLimits{.max_images = 4, .max_bytes = 4096};

}  // namespace
}  // namespace prefixd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace prefixd;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const engine::ImageSize image = engine::read_image_size(std::span<const std::uint8_t>(data, size));
    (void)image;
  } catch (const engine::ImageError& e) {
    fuzz::require(std::string_view(e.what()).size() > 0, "a refused image says why");
  }
  try {
    const std::string bytes = api::image_bytes_from_url(text, "image_url.url", fuzz::kLimits);
    fuzz::require(!bytes.empty() && bytes.size() <= fuzz::kLimits.max_bytes, "a data URL gives 1..max_bytes bytes");
  } catch (const api::fields::Rejection& rejection) {
    fuzz::require(rejection.error.param == "image_url.url", "a rejection names the field");
    fuzz::require(rejection.error.status == 400, "a rejection is a 400");
  }
  const auto round_trip = api::decode_base64(api::encode_base64(text));
  fuzz::require(round_trip.has_value() && *round_trip == text, "base64 round-trips");
  return 0;
}
