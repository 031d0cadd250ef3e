// How a model call must be padded for every row to be computed alike whatever the call holds,
// measured on the model itself. Internal to src/engine/.
//
// A GPU backend picks its kernels and tiles by the rows of a call (ggml's Vulkan backend: a
// matrix-vector product up to 8 rows, a tiled flash attention from 65), and a row in a tile the
// call fills only in part can be summed otherwise than in a full one. `prefixd_row_probe --gpu`
// shows the kernels' side; this measures the whole model: the positions of a prompt computed in one
// call or split into two at several places, alone or beside other sequences, after a short and a
// long history, with each call padded by a candidate rule, compared bit for bit in their logits
// with the same positions computed in a call of the largest size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <llama.h>

namespace prefixd::engine::detail {

// Pad a sequence's rows in a call to at least `least` and to a multiple of `multiple`.
struct CallPadding {
  std::int32_t least = 0;  // 0: no rule was found
  std::int32_t multiple = 1;
  // The rows a sequence with `rows` rows takes in its call.
  std::int32_t rows_for(std::int32_t rows) const {
    const std::int32_t at_least = std::max(rows, least);
    return (at_least + multiple - 1) / multiple * multiple;
  }
};

struct CallRows {
  CallPadding padding;    // the cheapest rule under which every comparison was alike
  std::int32_t largest = 0;  // the reference call's rows: rules pad to at most this
  std::string rejected;   // "least/multiple" of the cheaper rules that computed a row otherwise
};

// Measures CallRows on `ctx`, a context with a KV stream per sequence. Uses sequences 0 to
// `sequences` - 1 (at most 4; REQUIRES: empty, each holding at least `stream_cells` cells) and
// empties them again. Throws std::runtime_error when a call fails.
CallRows measure_call_rows(llama_context* ctx, std::int32_t n_vocab, std::int32_t n_batch, std::int32_t stream_cells,
                           std::int32_t sequences);

}  // namespace prefixd::engine::detail
