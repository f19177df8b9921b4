// Building a span trace from a finished run (the read side, which the diff
// fuzz target links alone, is span_trace.cpp).
#include "sim/report/formats/span_trace.h"

#include <unordered_map>

#include "sim/report/observers/bubble_accounting.h"

namespace lacuna::report {

trace::Trace make_span_trace(const Summary& summary, const Timeline& timeline, trace::Origin origin,
                             const std::string& program_digest) {
  trace::Trace t;
  t.set_format_version(kSpanTraceFormatVersion);
  t.set_origin(origin);
  t.set_program_digest(program_digest);
  t.set_lacuna_version(summary.info.lacuna_version());
  t.set_scenario(summary.scenario_name);
  t.set_num_gpus(summary.num_gpus);
  t.set_cost_model(summary.cost_model);
  t.set_mode(summary.folded ? "folded" : "full");
  t.set_iteration_time_ns(summary.iteration_time.count());
  t.set_iterations(timeline.iterations);
  t.set_selection(timeline.selection);
  for (const std::string& c : timeline.classes) t.add_op_classes(c);
  // Each traced rank's account (with --trace-ranks all, every rank: a map,
  // not a scan per rank).
  std::unordered_map<int32_t, const RankAccount*> account_of;
  for (const RankAccount& a : summary.ranks) account_of.emplace(a.rank, &a);
  for (const TimelineRank& r : timeline.ranks) {
    trace::TraceRank* tr = t.add_ranks();
    tr->set_rank(r.rank);
    tr->set_label(r.label);
    for (const TimelineStream& s : r.streams) {
      trace::TraceStream* ts = tr->add_streams();
      ts->set_stream(s.stream);
      ts->set_name(s.name);
      ts->set_kind(s.kind);
      ts->mutable_spans()->Reserve(static_cast<int>(s.ops.size()));
      for (const TimelineOp& o : s.ops) {
        trace::Span* sp = ts->add_spans();
        sp->set_op(o.op);
        sp->set_op_class(o.class_index);
        sp->set_phase(static_cast<ir::Phase>(o.phase));
        sp->set_microbatch(o.microbatch);
        sp->set_module(o.module);
        sp->set_ready_ns(o.ready_ns);
        sp->set_start_ns(o.start_ns);
        sp->set_end_ns(o.end_ns);
        sp->set_iteration(o.iteration);
      }
    }
    // The rank's bubbles as the JSON's ranks[].bubble_s lists them.
    const auto account = account_of.find(r.rank);
    if (account == account_of.end()) continue;
    const RankAccount& a = *account->second;
    for (Bubble b : kAllBubbles) {
      if (!bubble_shown(b, summary.multimodal(), summary.moe())) continue;
      trace::BubbleTime* bt = tr->add_bubbles();
      bt->set_category(std::string(bubble_key(b)));
      bt->set_ns(a.bubble(b).count());
    }
    trace::BubbleTime* total = tr->add_bubbles();
    total->set_category("total");
    total->set_ns(a.idle().count());
  }
  return t;
}

}  // namespace lacuna::report
