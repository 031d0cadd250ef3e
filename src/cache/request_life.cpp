// prefixd cache — the request-life face's Ticket (request_life.h); what it holds is in
// ticket_state.h, and the coordinator's tickets and admission in prefix_cache_tickets.cpp.
#include "cache/request_life.h"

#include <utility>

#include "cache/ticket_state.h"

namespace prefixd::cache {

Ticket::Ticket(std::unique_ptr<State> state) : state_(std::move(state)) {}
Ticket::Ticket(Ticket&&) noexcept = default;
Ticket& Ticket::operator=(Ticket&&) noexcept = default;
Ticket::~Ticket() = default;

}  // namespace prefixd::cache
