// Default failure rates and recovery times per component kind, each from a
// public source (docs/goodput-sources.md has every figure with where it was
// read; docs/goodput.md#defaults the table these constants come from).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/goodput/goodput.h"

namespace lacuna::goodput {

// The job's components: `gpus` GPUs in `hosts` hosts.
//
// Rates: Llama 3's unexpected interruptions over its 54-day snapshot (Meta,
// "The Llama 3 Herd of Models", arXiv 2407.21783, §3.3.4, Table 5), per
// component-hour, on the assumption that all 16,384 GPUs (2,048 hosts) ran
// for all 1,296 hours (the paper does not say; at 8,192 GPUs every rate
// doubles). Table 5's rows are grouped into seven kinds: gpu (faulty GPU,
// SRAM, system processor, silent data corruption, thermal interface and
// sensor: 196), hbm (72), nic (7), network (switch and cable: 35), host (SSD,
// power supply, chassis, IO board, CPU, system memory, unplanned host
// maintenance: 46), software (software bug, dependency: 56) and other (NCCL
// watchdog timeouts, cause unknown: 7). Host kinds scale with hosts, the rest
// with GPUs (nic and network too: Llama 3 gives no NIC or switch counts).
//
// Recovery, per kind:
// - detection: 60 s for an explicit failure (ByteRobust, arXiv 2509.16293,
//   §2.2); 600 s for a hang found by NCCL's watchdog (the PyTorch timeout of
//   about 10 min in ByteRobust's Table 3 caption; its §8.1.1 says about 30).
// - diagnosis: ByteRobust's mean time from localization to restart (Table
//   6): CUDA error 93 s (gpu, hbm, other), InfiniBand error 60 s (nic,
//   network), OS kernel panic 109 s (host), code or data adjustment 57 s
//   (software).
// - replacement: ByteRobust's requeue scheduling time on `hosts` machines
//   (Table 7: 454, 545, 635 and 768 s at 128, 256, 512 and 1,024 machines,
//   interpolated in log2 of the machine count, extended by its last slope
//   and never below the first), for the kinds that evict hardware (gpu, hbm,
//   nic, network, host); its hot update (46, 51, 54, 65 s likewise) for
//   software and other, which restart in place.
// - relaunch: 30 s of communicator set-up, MegaScale's figure above 10,000
//   GPUs after its optimisations (arXiv 2402.15627, §3.5).
// - load: `load_s`, the checkpoint read back (the caller's, from its size
//   and the storage bandwidth).
std::vector<ComponentKind> default_components(int64_t gpus, int64_t hosts, double load_s);

// ByteRobust Table 7's requeue and hot-update scheduling times at `machines`
// (as above).
double requeue_s(double machines);
double hot_update_s(double machines);

}  // namespace lacuna::goodput
