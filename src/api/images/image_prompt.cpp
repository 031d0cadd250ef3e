#include "api/images/image_prompt.h"

#include <format>

namespace prefixd::api {

std::expected<std::vector<std::shared_ptr<const engine::PreparedImage>>, ApiError> prepare_images(
    std::span<const ImageInput> inputs, const engine::Vision& vision) {
  std::vector<std::shared_ptr<const engine::PreparedImage>> prepared;
  prepared.reserve(inputs.size());
  for (const ImageInput& input : inputs) {
    try {
      const auto* data = reinterpret_cast<const std::uint8_t*>(input.bytes.data());
      prepared.push_back(vision.prepare(std::span<const std::uint8_t>(data, input.bytes.size())));
    } catch (const engine::ImageError& e) {
      const char* what = input.audio ? "audio" : "image";
      ApiError error = invalid_param(input.param, std::format("the {} in '{}' cannot be used: {}", what, input.param, e.what()));
      error.code = input.audio ? "invalid_audio" : "invalid_image";
      return std::unexpected(std::move(error));
    }
  }
  return prepared;
}

std::expected<ImagePrompt, ApiError> tokenize_with_images(std::string_view text, std::span<const engine::TextRange> literal,
                                                          std::span<const ImageInput> inputs, const engine::Vision& vision,
                                                          const PieceTokenizer& tokenize) {
  std::vector<std::size_t> markers;
  for (std::size_t at = text.find(kImageMarker); at != std::string_view::npos; at = text.find(kImageMarker, at + 1)) {
    markers.push_back(at);
  }
  if (markers.size() != inputs.size()) {
    return std::unexpected(invalid_param(
        "messages", std::format("the model's chat template rendered {} image places for {} images; it must render each "
                                "image part once",
                                markers.size(), inputs.size())));
  }
  auto prepared = prepare_images(inputs, vision);
  if (!prepared) return std::unexpected(prepared.error());

  ImagePrompt out;
  std::size_t from = 0;
  auto add_piece = [&](std::size_t end) {
    // The literal ranges that fall in [from, end), shifted to the piece.
    std::vector<engine::TextRange> ranges;
    for (const engine::TextRange& range : literal) {
      if (range.begin >= from && range.end <= end) ranges.push_back({range.begin - from, range.end - from});
    }
    const std::vector<engine::Token> piece = tokenize(text.substr(from, end - from), /*add_special=*/from == 0, ranges);
    out.tokens.insert(out.tokens.end(), piece.begin(), piece.end());
  };
  for (std::size_t i = 0; i < markers.size(); ++i) {
    add_piece(markers[i]);
    const engine::PreparedImage& image = *(*prepared)[i];
    out.tokens.insert(out.tokens.end(), image.before.begin(), image.before.end());
    out.images.push_back(scheduler::PromptImage{static_cast<engine::Pos>(out.tokens.size()), (*prepared)[i]});
    const std::vector<engine::Token> stand_ins = engine::image_token_ids(image.digest, image.n_tokens);
    out.tokens.insert(out.tokens.end(), stand_ins.begin(), stand_ins.end());
    out.tokens.insert(out.tokens.end(), image.after.begin(), image.after.end());
    from = markers[i] + kImageMarker.size();
  }
  add_piece(text.size());
  if (!out.images.empty() && out.images.back().end() >= static_cast<engine::Pos>(out.tokens.size())) {
    return std::unexpected(invalid_param("messages", "the prompt ends with an image; the model needs text after it"));
  }
  return out;
}

}  // namespace prefixd::api
