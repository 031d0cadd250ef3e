// prefixd cli — how the server's heap hands memory back to the operating system.
#pragma once

namespace prefixd::cli {

// Makes every allocation of 128 KiB or more its own mapping, unmapped when freed, for the whole
// process. Call once at startup, before threads start. Why: glibc maps large blocks separately
// only above a threshold (128 KiB at start) that it raises to the size of each such block freed,
// up to 32 MiB. After one burst of megabyte-sized requests (bodies, parsed copies, tokenizer
// buffers) the same sizes came from the heap arenas instead and stayed resident once freed: the
// resident set stayed hundreds of megabytes above its level before the burst. Fixing the
// threshold at glibc's own starting value turns that adaptation off (and with it the matching rise
// of the heap trim threshold), so a burst's memory goes back as soon as its requests are done. The
// price is a fresh mapping (and its page faults) for each large block instead of reusing a freed
// one.
void return_large_blocks_to_the_os();

}  // namespace prefixd::cli
