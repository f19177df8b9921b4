// Hand-written `simulate --json`-shaped documents for the tests of `lacuna
// diff` (diff_test.cpp, diff_svg_test.cpp): two ranks of a tiny pipeline whose
// gaps are known, and helpers to derive the "measured" variants.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace lacuna::report::diff_fixture {

using Json = nlohmann::ordered_json;

// Iteration 1000 ns (default bubble threshold 10 ns).
//   rank 0 compute: op 0 [0,100) GEMM F0 · op 1 [100,150) attention F0 · op 3 [150,250) GEMM F1 ·
//                   gap 150 · op 4 [400,500) GEMM B1 · op 6 [500,600) GEMM B0 · tail 400
//          tp:      op 0 [100,120) AR tp;   pp_send_fwd: op 0 [250,260) send pp
//   rank 1 compute: gap 300 · op 0 [300,400) GEMM F0 · op 1 [400,500) GEMM B0 · tail 500
//          pp_recv_fwd: op 0 [0,300) recv pp
inline Json predicted_doc() {
  Json d;
  d["lacuna_version"] = "0.1.0";
  d["scenario"] = "tiny";
  d["scenario_file"] = "tiny.pbtxt";
  d["cost_model"] = "analytic: roofline compute";
  d["mode"] = "full";
  d["num_gpus"] = 2;
  d["simulated_ranks"] = 2;
  d["iteration_time_s"] = 1e-6;
  d["iteration_time_ns"] = 1000;
  d["ranks"] = Json::parse(R"json([
    {"rank":0,"bubble_s":{"pp_warmup":0.0,"pp_other":5.5e-7,"total":5.5e-7},"busy_s":4.5e-7},
    {"rank":1,"bubble_s":{"pp_warmup":3e-7,"pp_other":5e-7,"total":8e-7},"busy_s":2e-7}])json");
  d["timeline"] = Json::parse(R"json({"selection":"pipeline",
    "classes":["compute GEMM","compute attention","collective AR tp","send pp","recv pp"],
    "ranks":[
      {"rank":0,"label":"rank 0 (pp 0 tp 0 dp 0)","streams":[
        {"stream":0,"name":"compute","kind":"compute","ops":[
          [0,0,1,0,0,0,0,100],[1,1,1,0,0,100,100,150],[3,0,1,1,0,150,150,250],
          [4,0,2,1,0,250,400,500],[6,0,2,0,0,500,500,600]]},
        {"stream":1,"name":"tp","kind":"tp_comm","ops":[[0,2,1,0,0,100,100,120]]},
        {"stream":2,"name":"pp_send_fwd","kind":"pp_send","ops":[[0,3,1,0,0,250,250,260]]}]},
      {"rank":1,"label":"rank 1 (pp 1 tp 0 dp 0)","streams":[
        {"stream":0,"name":"compute","kind":"compute","ops":[[0,0,1,0,0,260,300,400],[1,0,2,0,0,400,400,500]]},
        {"stream":1,"name":"pp_recv_fwd","kind":"pp_recv","ops":[[0,4,1,0,0,0,0,300]]}]}]})json");
  return d;
}

// A "measurement": same program and keys, a `measured:` cost model.
inline Json measured_doc() {
  Json d = predicted_doc();
  d["cost_model"] = "measured: cpu backend";
  return d;
}

// The op array at timeline.ranks[r].streams[s].ops[k].
inline Json& op_at(Json& d, size_t r, size_t s, size_t k) {
  return d["timeline"]["ranks"][r]["streams"][s]["ops"][k];
}

// Sets an op's ready, start and end.
inline void set_times(Json& d, size_t r, size_t s, size_t k, int64_t ready_ns, int64_t start_ns, int64_t end_ns) {
  Json& op = op_at(d, r, s, k);
  op[5] = ready_ns;
  op[6] = start_ns;
  op[7] = end_ns;
}

// Every time (ops, iteration, bubbles) multiplied by `factor`.
inline void scale_times(Json& d, int64_t factor) {
  d["iteration_time_ns"] = d["iteration_time_ns"].get<int64_t>() * factor;
  d["iteration_time_s"] = d["iteration_time_s"].get<double>() * static_cast<double>(factor);
  for (Json& r : d["ranks"]) {
    for (auto& [key, v] : r["bubble_s"].items()) v = v.get<double>() * static_cast<double>(factor);
  }
  for (Json& r : d["timeline"]["ranks"]) {
    for (Json& s : r["streams"]) {
      for (Json& op : s["ops"]) {
        for (size_t i = 5; i < 8; ++i) op[i] = op[i].get<int64_t>() * factor;
      }
    }
  }
}

inline std::string text(const Json& d) { return d.dump(); }

}  // namespace lacuna::report::diff_fixture
