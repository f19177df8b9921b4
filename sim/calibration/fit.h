// Fitting measured times to closed forms: a roofline per kernel table (used
// for shapes outside the measured grid) and α–β per collective (group size,
// link). `lacuna calibrate` fills the profile's fits with these.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/proto/calibration.pb.h"
#include "sim/proto/program.pb.h"

namespace lacuna::calibration {

// time ≈ max(flops / F, bytes / B) + overhead over the table's points,
// minimising the squared relative error. A roofline splits points by
// arithmetic intensity (flops / bytes): below the ridge they are memory-bound,
// above it compute-bound. Every split of the intensity-sorted points is tried;
// for each, (1/F, 1/B, overhead) is a weighted linear least-squares problem
// (weights 1/time, non-negative by trying every subset of free parameters),
// and the candidate whose max() model has the least rms relative error wins.
// A class whose points all have zero FLOPs gets F = 0 (memory only); a table
// with no memory-bound point gets B = 0 (no memory bound was observed), and
// likewise F = 0 with no compute-bound point. Exact synthetic data is
// recovered exactly. Throws lacuna::Error for an empty table.
calib::RooflineFit fit_roofline(const calib::OpTable& table);

// The predicted time in ns of the fit for an op of `flops` and `bytes`
// (a zero rate drops its bound).
double roofline_time_ns(const calib::RooflineFit& fit, double flops, double bytes);

// nccl-tests' bus factor: all-reduce 2(n−1)/n; all-gather, reduce-scatter,
// all-to-all (n−1)/n; broadcast, reduce and send/receive (p2p) 1.
double bus_factor(ir::CollectiveKind kind, bool p2p, int32_t group_size);

// time = latency + bytes · bus_factor / bus_bandwidth by least squares on the
// relative error (latency ≥ 0), over `points` (bytes > 0, time > 0). Copies
// the points into the fit with their algbw and busbw filled in. Throws
// lacuna::Error for no points or a group of fewer than 2 ranks.
calib::CollectiveFit fit_collective(ir::CollectiveKind kind, bool p2p, int32_t group_size, calib::LinkKind link,
                                    const std::vector<calib::CollectivePoint>& points);

}  // namespace lacuna::calibration
