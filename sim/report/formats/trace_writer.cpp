#include "sim/report/formats/trace_writer.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/ir/bound_program.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/names.h"

namespace lacuna::report {

namespace {

std::string json_quoted(const std::string& s) { return nlohmann::json(s).dump(); }

std::string category(const ir::Op& op) {
  if (op.has_collective()) return "collective";
  if (op.has_send()) return "send";
  if (op.has_recv()) return "recv";
  // Encoder compute gets its own category ("encoder_forward", ...) so that it
  // can be filtered and told apart from the LLM's.
  if (op.module() > 0) return "encoder_" + std::string(phase_key(op.phase()));
  return std::string(phase_key(op.phase()));
}

}  // namespace

std::string op_name(const ir::Program& program, int32_t rank, const ir::Op& op) {
  std::string s;
  // Ops of an encoder (module > 0) are prefixed with its name:
  // "vit-22b F mb2 L3 fc1", "vit-22b AR enc_tp".
  if (op.module() > 0) s = module_name(program, op.module()) + " ";
  if (op.has_compute()) {
    const ir::Compute& c = op.compute();
    std::string_view role = role_name(c.role());
    if (role.empty()) role = op_class_name(c.op_class());
    s += std::string(phase_letter(op.phase()));
    const bool per_microbatch = op.phase() >= ir::FORWARD && op.phase() <= ir::RECOMPUTE;
    if (per_microbatch) s += fmt::format(" mb{}", op.microbatch());
    if (per_microbatch && program.info().virtual_stages() > 1) s += fmt::format(" c{}", op.chunk());
    if (op.layer() >= 0) s += fmt::format(" L{}", op.layer());
    s += fmt::format(" {}", role);
  } else if (op.has_collective()) {
    const int32_t slot = op.collective().group_slot();
    const std::string& slot_name =
        slot >= 0 && slot < program.group_slots_size() ? program.group_slots(slot).name() : std::string("?");
    s += fmt::format("{} {}", collective_short(op.collective().kind()), slot_name);
  } else if (op.has_send()) {
    s += fmt::format("send→r{} mb{}", ir::BoundProgram(program).p2p_key(rank, op).dst, op.microbatch());
  } else if (op.has_recv()) {
    s += fmt::format("recv←r{} mb{}", ir::BoundProgram(program).p2p_key(rank, op).src, op.microbatch());
  } else if (op.has_record()) {
    s += fmt::format("record e{}", op.record().event());
  } else if (op.has_wait()) {
    s += fmt::format("wait e{}≥{}", op.wait().event(), op.wait().value());
  }
  return s;
}

TraceWriter::TraceWriter(const ir::Program& program, const std::string& path, RankSpec spec)
    : program_(program),
      spec_(std::move(spec)),
      file_(path),
      link_counters_([this](std::string_view event) { emit(event); }) {}

TraceWriter::~TraceWriter() = default;

void TraceWriter::event_prefix() {
  std::fputs(first_event_ ? "\n" : ",\n", file_.handle());
  first_event_ = false;
}

void TraceWriter::emit(std::string_view event) {
  event_prefix();
  std::fwrite(event.data(), 1, event.size(), file_.handle());
}

void TraceWriter::on_run_begin(const engine::RunInfo& info) {
  iterations_ = std::max(1, info.iterations);
  traced_ = select_simulated_ranks(spec_, program_, info);
  slot_of_rank_.assign(static_cast<size_t>(program_.ranks_size()), -1);
  memory_.assign(traced_.size(), 0);
  slot_names_.clear();
  for (const ir::Slot& s : program_.group_slots()) slot_names_.push_back(json_quoted(s.name()));

  std::FILE* f = file_.handle();
  std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
  std::vector<size_t> represents_count(static_cast<size_t>(program_.ranks_size()), 1);
  for (size_t i = 0; i < info.simulated_ranks.size() && i < info.represents.size(); ++i) {
    represents_count[static_cast<size_t>(info.simulated_ranks[i])] = info.represents[i].size();
  }
  for (size_t i = 0; i < traced_.size(); ++i) {
    const int32_t rank = traced_[i];
    slot_of_rank_[static_cast<size_t>(rank)] = static_cast<int32_t>(i);
    std::string label = rank_label(program_, rank);
    const size_t n = represents_count[static_cast<size_t>(rank)];
    if (n > 1) label += fmt::format(" [stands for {} ranks]", n);
    event_prefix();
    fmt::print(f, "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":{}}}}}", rank,
               json_quoted(label));
    event_prefix();
    fmt::print(f, "{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}", rank,
               i);
    const ir::RankClass& cls = ir::BoundProgram(program_).rank_class(rank);
    for (int s = 0; s < cls.streams_size(); ++s) {
      event_prefix();
      fmt::print(f, "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}", rank,
                 s + 1, json_quoted(cls.streams(s).name()));
      event_prefix();
      fmt::print(f,
                 "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}",
                 rank, s + 1, s);
    }
    const ir::MemoryBaseline& m = cls.memory();
    memory_[i] = m.weights_bytes() + m.gradients_bytes() + m.optimizer_bytes() + m.other_bytes();
    event_prefix();
    fmt::print(f, "{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":{},\"ts\":0.000,\"args\":{{\"bytes\":{}}}}}", rank,
               memory_[i]);
  }
  // Link counters: a process after the ranks (pid = number of ranks, which no
  // rank has), for the links the traced ranks' traffic can cross. A GPU uses
  // NIC gpu · nics / gpus_per_node (docs/network.md, rails).
  const int64_t gpus = program_.cluster().gpus_per_node();
  const int64_t nics = program_.cluster().nics_per_node();
  std::vector<LinkCounterTrace::Place> places;
  for (int32_t rank : traced_) {
    const ir::RankBinding& b = program_.ranks(rank);
    const int32_t rail = gpus > 0 ? static_cast<int32_t>(b.local_gpu() * nics / gpus) : 0;
    places.push_back({b.node(), b.local_gpu(), rail});
  }
  link_counters_.begin(program_.ranks_size(), static_cast<int32_t>(traced_.size()), std::move(places));
}

void TraceWriter::on_op_end(const engine::OpSpan& span) {
  const int32_t idx = slot_of_rank_[static_cast<size_t>(span.rank)];
  if (idx < 0) return;
  const ir::Op& op = *span.ir;
  if (op.has_record() || op.has_wait()) return;
  std::FILE* f = file_.handle();

  fmt::memory_buffer args;
  auto out = std::back_inserter(args);
  fmt::format_to(out, "\"phase\":\"{}\"", phase_key(op.phase()));
  if (op.phase() >= ir::FORWARD && op.phase() <= ir::RECOMPUTE) {
    fmt::format_to(out, ",\"mb\":{},\"chunk\":{}", op.microbatch(), op.chunk());
  }
  if (op.layer() >= 0) fmt::format_to(out, ",\"layer\":{}", op.layer());
  if (iterations_ > 1) fmt::format_to(out, ",\"iter\":{}", span.iteration);
  if (op.module() > 0) fmt::format_to(out, ",\"module\":{}", json_quoted(module_name(program_, op.module())));
  if (op.has_compute()) {
    fmt::format_to(out, ",\"flops\":{},\"bytes\":{}", op.compute().flops(), op.compute().bytes());
    if (op.compute().memory_delta_bytes() != 0) {
      fmt::format_to(out, ",\"memory_delta_bytes\":{}", op.compute().memory_delta_bytes());
    }
  } else if (op.has_collective()) {
    fmt::format_to(out, ",\"bytes\":{}", op.collective().bytes());
  } else if (op.has_send()) {
    fmt::format_to(out, ",\"bytes\":{},\"tag\":{}", op.send().bytes(), op.send().tag());
  } else if (op.has_recv()) {
    fmt::format_to(out, ",\"bytes\":{},\"tag\":{}", op.recv().bytes(), op.recv().tag());
  }
  // host_us: its host issued it late (docs/engine.md#host); waited_us: then it
  // waited for peers or a compute slot.
  if (span.issued > span.ready) fmt::format_to(out, ",\"host_us\":{}", micros_exact((span.issued - span.ready).count()));
  const TimeNs issued = std::max(span.issued, span.ready);
  if (span.start > issued) fmt::format_to(out, ",\"waited_us\":{}", micros_exact((span.start - issued).count()));

  // chrome://tracing honours "cname" (a reserved colour name); Perfetto colours
  // by slice name, which the module prefix already sets apart.
  const std::string_view cname = op.has_compute() && op.module() > 0 ? ",\"cname\":\"olive\"" : "";
  event_prefix();
  fmt::print(f,
             "{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"name\":{},\"cat\":\"{}\"{},\"args\":{{{}}}}}",
             span.rank, span.stream + 1, micros_exact(span.start.count()), micros_exact((span.end - span.start).count()),
             json_quoted(op_name(program_, span.rank, op)), category(op), cname,
             std::string_view(args.data(), args.size()));

  if (op.has_compute() && op.compute().memory_delta_bytes() != 0) {
    int64_t& mem = memory_[static_cast<size_t>(idx)];
    mem += op.compute().memory_delta_bytes();
    event_prefix();
    fmt::print(f, "{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":{},\"ts\":{},\"args\":{{\"bytes\":{}}}}}", span.rank,
               micros_exact(span.end.count()), mem);
  }
}

void TraceWriter::on_transfer(const engine::OpSpan& send, const engine::OpSpan& recv) {
  if (slot_of_rank_[static_cast<size_t>(send.rank)] < 0 || slot_of_rank_[static_cast<size_t>(recv.rank)] < 0) return;
  const uint64_t id = next_flow_++;
  std::FILE* f = file_.handle();
  // Both ends sit at the transfer start, inside their slices, so Perfetto binds
  // the arrow to the send and the recv slice ("bp":"e": enclosing slice).
  event_prefix();
  fmt::print(f, "{{\"ph\":\"s\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"name\":\"p2p\",\"cat\":\"p2p\"}}", id,
             send.rank, send.stream + 1, micros_exact(send.start.count()));
  event_prefix();
  fmt::print(f,
             "{{\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"name\":\"p2p\",\"cat\":\"p2p\"}}",
             id, recv.rank, recv.stream + 1, micros_exact(recv.start.count()));
}

void TraceWriter::on_run_end(TimeNs end) {
  link_counters_.finish();
  if (epilogue_) epilogue_(traced_, [this](std::string_view event) { emit(event); });
  // Several iterations: the end is the run's, and the count is given.
  const std::string iterations = iterations_ > 1 ? fmt::format(",\"iterations\":{}", iterations_) : std::string();
  fmt::print(file_.handle(),
             "\n],\"otherData\":{{\"scenario\":{},\"{}\":{}{},\"traced_ranks\":{},\"rank_selection\":{}}}}}\n",
             json_quoted(program_.info().scenario_name()), iterations_ > 1 ? "run_time_ns" : "iteration_time_ns",
             end.count(), iterations, traced_.size(), json_quoted(spec_.text));
  finished_ = true;
}

void TraceWriter::commit() {
  if (!finished_) throw InternalError("internal: trace committed before the simulation finished");
  file_.commit();
}

}  // namespace lacuna::report
