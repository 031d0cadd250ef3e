// prefixd api — llama-server's /lora-adapters: GET lists the loaded LoRA adapters and the server's
// scales ([{id, path, scale}, ...], with each one's name), POST [{id, scale}, ...] sets every
// scale (an adapter left out goes to 0) for the requests that come after it. POST needs an admin
// key when keys are on: the scales apply to every tenant's requests.
#pragma once

#include "api/adapters/adapter_table.h"
#include "api/route_support.h"
#include "http/server.h"

namespace prefixd::api {

http::Response serve_lora_adapters(AdapterTable& adapters, const RouteContext& route, http::Request& req);

}  // namespace prefixd::api
