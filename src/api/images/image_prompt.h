// prefixd api — a rendered prompt with images into tokens: the text between the image markers is
// tokenized as any prompt is, and each marker becomes its image's tokens (the text the model writes
// around an image and the image's stand-in positions, engine/vision.h).
#pragma once

#include <expected>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "api/errors.h"
#include "api/images/image_input.h"
#include "engine/engine.h"
#include "scheduler/request.h"

namespace prefixd::api {

struct ImagePrompt {
  std::vector<engine::Token> tokens;
  std::vector<scheduler::PromptImage> images;  // in prompt order
};

// Tokenizes one piece of the prompt: (text, add_special, literal ranges within the piece).
using PieceTokenizer =
    std::function<std::vector<engine::Token>(std::string_view, bool, std::span<const engine::TextRange>)>;

// Decodes each image with `vision` (a 400 naming its field when it cannot be read) and builds the
// prompt. `literal`: the byte ranges of `text` tokenized as text (special_text.h); no marker lies
// inside one. A 400 when the template did not render each image's marker exactly once, in order.
std::expected<ImagePrompt, ApiError> tokenize_with_images(std::string_view text, std::span<const engine::TextRange> literal,
                                                          std::span<const ImageInput> inputs, const engine::Vision& vision,
                                                          const PieceTokenizer& tokenize);

// The images of a request prepared (decoded, cut into tokens) in order; a 400 naming the part that
// cannot be read.
std::expected<std::vector<std::shared_ptr<const engine::PreparedImage>>, ApiError> prepare_images(
    std::span<const ImageInput> inputs, const engine::Vision& vision);

}  // namespace prefixd::api
