#include "engine/types.h"

namespace prefixd::engine {

const char* family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::dense: return "dense";
    case ModelFamily::sliding_window: return "sliding_window";
    case ModelFamily::recurrent: return "recurrent";
    case ModelFamily::hybrid: return "hybrid";
  }
  return "unknown";
}

}  // namespace prefixd::engine
