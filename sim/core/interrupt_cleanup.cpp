#include "sim/core/interrupt_cleanup.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace lacuna {
namespace {

constexpr int kSlots = 64;
constexpr size_t kPathBytes = 4096;  // PATH_MAX on Linux

struct Slot {
  std::atomic<bool> claimed{false};  // taken by a writer (paths being filled)
  std::atomic<bool> used{false};     // paths complete: the handler may read them
  char temporary[kPathBytes];
  char target[kPathBytes];
};

Slot g_slots[kSlots];
std::atomic<bool> g_installed{false};

void put(const char* s) {
  const size_t n = std::strlen(s);
  if (n > 0) (void)!::write(STDERR_FILENO, s, n);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

void on_signal(int sig) {
  int removed = 0;
  put("\nlacuna: interrupted by ");
  put(signal_name(sig));
  for (Slot& s : g_slots) {
    if (!s.used.load(std::memory_order_acquire)) continue;
    ::unlink(s.temporary);
    put(removed == 0 ? "; stopped before finishing " : ", ");
    put(s.target);
    ++removed;
  }
  put(removed == 0 ? "; no output was being written\n" : " (partial files removed)\n");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void install_interrupt_cleanup() {
  if (g_installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

int register_partial_output(const std::string& temporary, const std::string& target) {
  if (temporary.size() >= kPathBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    bool expected = false;
    if (!s.claimed.compare_exchange_strong(expected, true)) continue;
    std::memcpy(s.temporary, temporary.c_str(), temporary.size() + 1);
    const size_t n = std::min(target.size(), kPathBytes - 1);
    std::memcpy(s.target, target.data(), n);
    s.target[n] = '\0';
    s.used.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_partial_output(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  g_slots[slot].used.store(false, std::memory_order_release);
  g_slots[slot].claimed.store(false, std::memory_order_release);
}

}  // namespace lacuna
