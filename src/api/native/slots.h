// prefixd api — llama-server's /slots: GET /slots (what runs in each of the --parallel sequences)
// and POST /slots/{id}?action=save|restore|erase, mapped onto prefixd's cache. A slot is one of
// the sequences requests run in; the scheduler places requests itself, so a slot's cache is what
// the last request that ran in it left to the prompt cache, which every request may reuse:
//   save     {"filename"} → that sequence's longest cached prefix as an artifact file in
//            --slot-save-path (the format of POST /v1/cache/save: verified and model-locked);
//   restore  {"filename"} → the file verified and stored in the host tier, where any request that
//            starts with its prefix restores it;
//   erase    → the cache forgets that sequence past what another slot's last sequence shares.
// The answers have llama-server's fields (id_slot, filename, n_saved, n_written, n_restored,
// n_read, n_erased, timings). Admin callers only when API keys are configured: a slot serves
// every tenant.
#pragma once

#include <filesystem>

#include "api/route_support.h"
#include "http/server.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

struct SlotOptions {
  std::filesystem::path save_path;  // --slot-save-path; empty: save and restore are refused (501)
  std::int32_t context = 0;         // the KV cells a request may use (reported as each slot's n_ctx)
};

// GET /slots[?fail_on_no_slot=1]: 503 with that parameter when no slot is idle.
http::Response serve_slots(scheduler::Scheduler& scheduler, const RouteContext& route, const SlotOptions& options,
                           http::Request& req);
// POST /slots/{id}?action=...; `id` is the path after /slots/.
http::Response serve_slot_action(scheduler::Scheduler& scheduler, const RouteContext& route, const SlotOptions& options,
                                 http::Request& req, std::string_view id);

}  // namespace prefixd::api
