// Partial outputs never outlive an interrupted run (docs/outputs.md,
// "Interrupted runs"). Each AtomicFile registers its temporary file here while
// it is open; on SIGINT, SIGTERM or SIGHUP the handler unlinks every
// registered file, says on stderr which outputs the run stopped before
// finishing, and re-raises the signal with its default action (so the exit
// status still says "killed by signal").
//
// Signal handlers cannot reach objects, so the registry is process-wide
// state: a fixed table of path buffers, written only outside the handler and
// read only by it (async-signal-safe: no allocation, no locks, unlink(2) and
// write(2) only).
#pragma once

#include <string>

namespace lacuna {

// Installs the handlers for SIGINT, SIGTERM and SIGHUP (idempotent).
void install_interrupt_cleanup();

// Registers `temporary` (removed on a signal) for the output `target`;
// returns a slot for unregister_partial_output, or −1 when the table is full
// (the file is then only removed by its owner).
int register_partial_output(const std::string& temporary, const std::string& target);
void unregister_partial_output(int slot);

}  // namespace lacuna
