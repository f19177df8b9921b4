#include "sim/schedule/action.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

struct TypeToken {
  ActionType type;
  std::string_view token;
};

// Longest tokens first, so that "RECV_F" is not read as "R" + "ECV_F".
constexpr std::array<TypeToken, 15> kTypeTokens{{
    {ActionType::kBoundarySend, "BSEND"},
    {ActionType::kBoundaryRecv, "BRECV"},
    {ActionType::kReduceGrad, "REDUCE_GRAD"},
    {ActionType::kSendForward, "SEND_F"},
    {ActionType::kRecvForward, "RECV_F"},
    {ActionType::kSendBackward, "SEND_B"},
    {ActionType::kRecvBackward, "RECV_B"},
    {ActionType::kUnshard, "UNSHARD"},
    {ActionType::kReshard, "RESHARD"},
    {ActionType::kAmaxReduce, "AMAX"},
    {ActionType::kForward, "F"},
    {ActionType::kBackward, "B"},
    {ActionType::kBackwardInput, "I"},
    {ActionType::kBackwardWeight, "W"},
    {ActionType::kRecompute, "R"},
}};

constexpr std::string_view kTypeList =
    "F, B, I, W, R, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD, AMAX, BSEND or BRECV";

// A non-negative decimal that fits int32; nullopt otherwise. Advances `pos`.
std::optional<int32_t> read_number(std::string_view s, size_t& pos) {
  const size_t begin = pos;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
  if (pos == begin) return std::nullopt;
  int32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data() + begin, s.data() + pos, v);
  if (ec != std::errc() || end != s.data() + pos) return std::nullopt;
  return v;
}

bool module_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

[[noreturn]] void bad_action(std::string_view token, const std::string& where, const std::string& what) {
  throw Error(SourceLocation{where, 0, 0, "action"}, fmt::format("\"{}\": {}", token, what),
              fmt::format("write [module:]STAGE TYPE [MICROBATCH] [@FIRST-END], e.g. 0F3, 1SEND_B2, vit:0F1@4-9, "
                          "0REDUCE_GRAD; TYPE is {}",
                          kTypeList));
}

// What joins an action to the next in the text form: '+' (a batched call),
// '&' (an overlapped pair) or ' ' (nothing).
char joiner(const std::optional<ScheduleAction>& a) {
  if (!a) return ' ';
  return a->joins_next ? '+' : a->overlaps_next ? '&' : ' ';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view type_token(ActionType t) {
  for (const TypeToken& k : kTypeTokens)
    if (k.type == t) return k.token;
  return "?";
}

bool is_compute(ActionType t) { return t <= ActionType::kRecompute; }

bool builder_pass(const std::optional<ScheduleAction>& a) {
  return a && a->module.empty() && pass_of(a->type) && !(a->type == ActionType::kRecompute && a->overlaps_next);
}

bool is_transfer(ActionType t) {
  return (t >= ActionType::kSendForward && t <= ActionType::kRecvBackward) || t == ActionType::kBoundarySend ||
         t == ActionType::kBoundaryRecv;
}

bool has_microbatch(ActionType t) {
  return !(t == ActionType::kUnshard || t == ActionType::kReshard || t == ActionType::kReduceGrad ||
           t == ActionType::kAmaxReduce);
}

std::optional<Pass> pass_of(ActionType t) {
  switch (t) {
    case ActionType::kForward: return Pass::kForward;
    case ActionType::kBackward: return Pass::kBackward;
    case ActionType::kBackwardInput: return Pass::kBackwardInput;
    case ActionType::kBackwardWeight: return Pass::kBackwardWeight;
    case ActionType::kRecompute: return Pass::kRecompute;
    default: return std::nullopt;
  }
}

ActionType action_type_of(Pass p) {
  switch (p) {
    case Pass::kForward: return ActionType::kForward;
    case Pass::kBackward: return ActionType::kBackward;
    case Pass::kBackwardInput: return ActionType::kBackwardInput;
    case Pass::kRecompute: return ActionType::kRecompute;
    case Pass::kBackwardWeight: break;
  }
  return ActionType::kBackwardWeight;
}

std::string to_string(const ScheduleAction& a) {
  std::string s;
  if (!a.module.empty()) s += a.module + ":";
  s += std::to_string(a.stage);
  s += type_token(a.type);
  if (has_microbatch(a.type)) s += std::to_string(a.microbatch);
  if (a.kernels) s += fmt::format("@{}-{}", a.kernels->begin, a.kernels->end);
  return s;
}

ScheduleAction parse_action(std::string_view token, const std::string& where) {
  ScheduleAction a;
  std::string_view rest = token;
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    a.module = std::string(rest.substr(0, colon));
    if (a.module.empty() || !std::all_of(a.module.begin(), a.module.end(), module_char))
      bad_action(token, where, "a module name is letters, digits, '_', '-' or '.' before the ':'");
    rest.remove_prefix(colon + 1);
  }
  size_t pos = 0;
  const auto stage = read_number(rest, pos);
  if (!stage) bad_action(token, where, "it does not start with a stage number (0 to 2^31 − 1)");
  a.stage = *stage;
  const std::string_view after = rest.substr(pos);
  const TypeToken* type = nullptr;
  for (const TypeToken& k : kTypeTokens)
    if (after.substr(0, k.token.size()) == k.token) {
      type = &k;
      break;
    }
  if (type == nullptr) bad_action(token, where, "no action type after the stage");
  a.type = type->type;
  pos += type->token.size();
  if (has_microbatch(a.type)) {
    const auto mb = read_number(rest, pos);
    if (!mb) bad_action(token, where, fmt::format("{} needs a microbatch number after it", type->token));
    a.microbatch = *mb;
  }
  if (pos < rest.size() && rest[pos] == '@') {
    if (!is_compute(a.type)) bad_action(token, where, "only compute passes take a kernel range");
    ++pos;
    const auto first = read_number(rest, pos);
    if (!first || pos >= rest.size() || rest[pos] != '-') bad_action(token, where, "a kernel range is @FIRST-END");
    ++pos;
    const auto end = read_number(rest, pos);
    if (!end) bad_action(token, where, "a kernel range is @FIRST-END");
    if (*end <= *first) bad_action(token, where, "a kernel range's end must be past its first kernel");
    a.kernels = KernelRange{*first, *end};
  }
  if (pos != rest.size()) bad_action(token, where, fmt::format("unexpected \"{}\" at its end", rest.substr(pos)));
  return a;
}

std::string format_schedule(const ActionSchedule& s) {
  std::string out;
  for (size_t r = 0; r < s.size(); ++r) {
    out += fmt::format("rank {}:", r);
    char separator = ' ';
    for (const auto& a : s[r]) {
      out += separator;
      out += a ? to_string(*a) : std::string("_");
      separator = joiner(a);
    }
    out += "\n";
  }
  return out;
}

std::string format_csv(const ActionSchedule& s) {
  std::string out;
  for (const RankActions& rank : s) {
    for (size_t i = 0; i < rank.size(); ++i) {
      if (i > 0) out += joiner(rank[i - 1]) == ' ' ? ',' : joiner(rank[i - 1]);
      if (rank[i]) out += to_string(*rank[i]);
    }
    out += "\n";
  }
  return out;
}

ActionSchedule parse_schedule(std::string_view text, const std::string& file) {
  ActionSchedule out;
  bool text_form = false, decided = false;
  int line_no = 0;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(begin, end - begin);
    ++line_no;
    begin = end + 1;
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') {
      if (end == text.size()) break;
      continue;
    }
    const bool rank_line = line.substr(0, 5) == "rank ";
    if (!decided) {
      text_form = rank_line;
      decided = true;
    }
    auto at = [&](size_t col) { return SourceLocation{file, line_no, static_cast<int>(col + 1), "schedule"}; };
    // One token: an action, a batched call "a+b+c" of sends and receives, or
    // a pair "F&B" (DualPipe's overlapped forward and backward) or "R&B" (a
    // recompute interleaved with its own backward).
    auto parse_call = [&](std::string_view token, size_t column, RankActions& into) {
      size_t start = 0;
      const size_t first = into.size();
      while (true) {
        const size_t cut = token.find_first_of("+&", start);
        const std::string_view part = token.substr(start, cut == std::string_view::npos ? cut : cut - start);
        const std::string where = fmt::format("{}:{}:{}", file, line_no, column + start + 1);
        ScheduleAction a = parse_action(part, where);
        const char before = start > 0 ? token[start - 1] : ' ';
        const char after = cut == std::string_view::npos ? ' ' : token[cut];
        auto refuse = [&](const std::string& what, const std::string& fix) {
          throw Error(SourceLocation{where, 0, 0, "action"}, fmt::format("\"{}\": {}", part, what), fix);
        };
        if ((before == '+' || after == '+') && !is_transfer(a.type))
          refuse("only sends and receives join into one call with '+'", "write compute passes as separate actions");
        if (before == '&' && after != ' ')
          refuse("an overlapped pair '&' is two passes", "write \"F&B\": one forward and one backward");
        if (after == '&' && a.type != ActionType::kForward && a.type != ActionType::kRecompute)
          refuse("an overlapped pair starts with a forward (F&B) or a recompute (R&B)",
                 "write \"F&B\", e.g. 0F5&7B1, or \"R&B\", e.g. 3R1&3B1");
        if (before == '&' && a.type != ActionType::kBackward && a.type != ActionType::kBackwardInput)
          refuse("an overlapped pair ends with a backward (B or I)", "write \"F&B\", e.g. 0F5&7B1");
        if (before == '&' && into.size() > first && into.back()->type == ActionType::kRecompute &&
            (into.back()->stage != a.stage || into.back()->microbatch != a.microbatch ||
             into.back()->module != a.module))
          refuse("a recompute interleaves with its own backward only",
                 "write \"R&B\" of one stage and microbatch, e.g. 3R1&3B1");
        if ((before == '&' || after == '&') && (a.kernels || into.size() > first + (before == '&' ? 1 : 0)))
          refuse(a.kernels ? "an overlapped pair runs whole passes" : "'&' pairs two passes and does not mix with '+'",
                 "write \"F&B\", e.g. 0F5&7B1");
        a.joins_next = after == '+';
        a.overlaps_next = after == '&';
        into.push_back(std::move(a));
        if (cut == std::string_view::npos) break;
        start = cut + 1;
      }
    };
    const size_t indent = static_cast<size_t>(line.data() - raw.data());
    RankActions rank;
    if (text_form) {
      if (!rank_line)
        throw Error(at(indent), "a line of the text form starts with \"rank R:\"",
                    "write every line as \"rank R: ACTION ACTION ...\", or the whole file as CSV");
      size_t pos = 5;
      const auto r = read_number(line, pos);
      if (!r || pos >= line.size() || line[pos] != ':')
        throw Error(at(indent), "a line of the text form starts with \"rank R:\"", "");
      if (*r != static_cast<int32_t>(out.size()))
        throw Error(at(indent), fmt::format("rank {} where rank {} comes next", *r, out.size()),
                    "list the ranks once each, in order from 0");
      ++pos;
      while (pos < line.size()) {
        while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
        if (pos >= line.size()) break;
        const size_t start = pos;
        while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
        const std::string_view token = line.substr(start, pos - start);
        if (token == "_") {
          rank.push_back(std::nullopt);
          continue;
        }
        parse_call(token, indent + start, rank);
      }
    } else {
      if (rank_line)
        throw Error(at(indent), "a \"rank R:\" line in a CSV schedule", "use one form for the whole file");
      size_t start = 0;
      while (start <= line.size()) {
        size_t comma = line.find(',', start);
        if (comma == std::string_view::npos) comma = line.size();
        const std::string_view cell = trim(line.substr(start, comma - start));
        if (cell.empty()) {
          rank.push_back(std::nullopt);
        } else {
          parse_call(cell, indent + static_cast<size_t>(cell.data() - line.data()), rank);
        }
        if (comma == line.size()) break;
        start = comma + 1;
      }
    }
    out.push_back(std::move(rank));
    if (end == text.size()) break;
  }
  if (out.empty())
    throw Error(SourceLocation{file, 0, 0, "schedule"}, "the schedule lists no rank",
                "write one line per pipeline rank (\"rank 0: 0F0 0B0\", or CSV)");
  return out;
}

std::string format_grid(const ActionSchedule& s, int32_t first_step, int32_t last_step,
                        std::optional<std::pair<int32_t, int32_t>> mark) {
  // Many ranks: the nine around the marked one (a message stays readable).
  size_t first_rank = 0, end_rank = s.size();
  if (mark && s.size() > 9) {
    first_rank = static_cast<size_t>(std::clamp<int64_t>(mark->first - 4, 0, static_cast<int64_t>(s.size()) - 9));
    end_rank = first_rank + 9;
  }
  size_t steps = 0;
  for (const RankActions& r : s) steps = std::max(steps, r.size());
  const int32_t last = std::min<int64_t>(last_step, static_cast<int64_t>(steps) - 1);
  const int32_t first = std::max(0, first_step);
  size_t width = fmt::format("rank {}", s.empty() ? 0 : end_rank - 1).size();
  for (size_t r = first_rank; r < end_rank; ++r)
    for (const auto& a : s[r])
      if (a) width = std::max(width, to_string(*a).size() + 2);
  std::string out = fmt::format("{:>6}", "step");
  for (size_t r = first_rank; r < end_rank; ++r) out += fmt::format(" {:>{}}", fmt::format("rank {}", r), width);
  out += "\n";
  for (int32_t step = first; step <= last; ++step) {
    out += fmt::format("{:>6}", step);
    for (size_t r = first_rank; r < end_rank; ++r) {
      const auto& rank = s[r];
      std::string cell;
      if (static_cast<size_t>(step) < rank.size() && rank[static_cast<size_t>(step)]) {
        const auto& a = rank[static_cast<size_t>(step)];
        cell = to_string(*a) + (joiner(a) == ' ' ? std::string() : std::string(1, joiner(a)));
      }
      if (mark && mark->first == static_cast<int32_t>(r) && mark->second == step) cell += "*";
      out += fmt::format(" {:>{}}", cell, width);
    }
    out += "\n";
  }
  return out;
}

void refuse_at(const ActionSchedule& s, int32_t rank, size_t step, const std::string& file, const std::string& what,
               const std::string& fix) {
  const int32_t st = static_cast<int32_t>(step);
  throw Error(SourceLocation{file, 0, 0, "schedule"},
              fmt::format("rank {}, step {}: {}\n{}", rank, step, what,
                          format_grid(s, st - 3, st + 3, std::make_pair(rank, st))),
              fix);
}

std::string layout_rule(const PipelineShape& shape) {
  switch (shape.layout) {
    case StageLayout::kV: return "the V layout: rank r holds stages r and 2·pp − 1 − r";
    case StageLayout::kBidirectional:
      return "the bidirectional layout: rank r holds stages r and 2·pp − 1 − r, microbatches 0 to m/2 − 1 run stages "
             "0 to pp − 1 and the rest stages pp to 2·pp − 1";
    case StageLayout::kLooped: break;
  }
  return "chunk c of rank r holds stage c·pp + r";
}

StageLayout infer_layout(const ActionSchedule& s, const PipelineShape& shape, const std::string& file) {
  // Each layout's misses: actions on a rank that layout does not give their
  // stage. A file that fits neither is reported against the layout it misses
  // least (the one it was most likely written for).
  struct Fit {
    PipelineShape shape;
    int64_t misses = 0;
    std::optional<std::pair<size_t, size_t>> first;
  };
  Fit looped{shape}, v{shape};
  looped.shape.layout = StageLayout::kLooped;
  v.shape.layout = StageLayout::kV;
  const bool v_possible = shape.virtual_stages == 2;
  for (size_t r = 0; r < s.size(); ++r)
    for (size_t step = 0; step < s[r].size(); ++step) {
      const auto& a = s[r][step];
      if (!a || !a->module.empty() || a->stage >= shape.pp * shape.virtual_stages) continue;
      for (Fit* f : {&looped, &v})
        if (rank_of_stage(f->shape, a->stage) != static_cast<int32_t>(r)) {
          ++f->misses;
          if (!f->first) f->first = std::make_pair(r, step);
        }
    }
  if (looped.misses == 0) return StageLayout::kLooped;
  if (v_possible && v.misses == 0) {
    // DualPipe's two pipelines place stages as the V does; they differ in
    // where microbatches go: each half of them stays in one half of the
    // stages (one pipeline), where the V runs every microbatch through all.
    PipelineShape two = shape;
    two.layout = StageLayout::kBidirectional;
    bool split = shape.microbatches % 2 == 0;
    for (size_t r = 0; r < s.size() && split; ++r)
      for (const auto& a : s[r])
        if (a && a->module.empty() && has_microbatch(a->type) && !stage_runs(two, a->stage, a->microbatch))
          split = false;
    return split ? StageLayout::kBidirectional : StageLayout::kV;
  }
  const Fit& closest = v_possible && v.misses < looped.misses ? v : looped;
  const auto [r, step] = *closest.first;
  const ScheduleAction& a = *s[r][step];
  const int32_t st = static_cast<int32_t>(step);
  throw Error(SourceLocation{file, 0, 0, "schedule"},
              fmt::format("rank {}, step {}: {} names stage {}, which runs on rank {} ({}){}\n{}", r, step,
                          to_string(a), a.stage, rank_of_stage(closest.shape, a.stage), layout_rule(closest.shape),
                          v_possible ? "; the actions fit neither Megatron-LM's layout nor the V layout" : "",
                          format_grid(s, st - 3, st + 3, std::make_pair(static_cast<int32_t>(r), st))),
              "move the action to its rank's line");
}

ActionSchedule to_actions(const std::vector<std::vector<Action>>& schedule, const PipelineShape& shape) {
  ActionSchedule out(schedule.size());
  for (size_t r = 0; r < schedule.size(); ++r) {
    for (const Action& a : schedule[r]) {
      ScheduleAction x;
      x.type = action_type_of(a.pass);
      x.stage = virtual_stage(shape, static_cast<int32_t>(r), a.chunk);
      x.microbatch = a.microbatch;
      out[r].push_back(std::move(x));
    }
  }
  return out;
}

std::vector<std::vector<Action>> to_schedule(const ActionSchedule& s, const PipelineShape& shape,
                                             const std::string& file) {
  auto refuse = [&](size_t r, size_t step, const std::string& what, const std::string& fix) {
    refuse_at(s, static_cast<int32_t>(r), step, file, what, fix);
  };
  if (static_cast<int32_t>(s.size()) != shape.pp)
    throw Error(SourceLocation{file, 0, 0, "schedule"},
                fmt::format("the schedule lists {} ranks, but the pipeline has pp = {}", s.size(), shape.pp),
                "write one line per pipeline rank");
  std::vector<std::vector<Action>> out(s.size());
  for (size_t r = 0; r < s.size(); ++r) {
    for (size_t step = 0; step < s[r].size(); ++step) {
      const auto& a = s[r][step];
      if (!a || !is_compute(a->type)) continue;  // p2p is the lowering's (p2p_calls.h)
      if (!a->module.empty())
        refuse(r, step, fmt::format("{} is an encoder's action; this scenario's pipeline runs the LLM only",
                                    to_string(*a)),
               "drop the module prefix");
      if (a->kernels)
        refuse(r, step, fmt::format("{} cuts a pass into kernels; a schedule file runs whole passes", to_string(*a)),
               "drop the @FIRST-END range");
      const int32_t stages = shape.pp * shape.virtual_stages;
      if (a->stage >= stages)
        refuse(r, step, fmt::format("{} names stage {}, but the pipeline has {} stages (pp {} × virtual stages {})",
                                    to_string(*a), a->stage, stages, shape.pp, shape.virtual_stages),
               "number stages 0 to " + std::to_string(stages - 1));
      if (rank_of_stage(shape, a->stage) != static_cast<int32_t>(r))
        refuse(r, step,
               fmt::format("{} names stage {}, which runs on rank {} ({})", to_string(*a), a->stage,
                           rank_of_stage(shape, a->stage), layout_rule(shape)),
               "move the action to its rank's line");
      if (a->microbatch >= shape.microbatches)
        refuse(r, step, fmt::format("{} names microbatch {}, but the iteration has {}", to_string(*a), a->microbatch,
                                    shape.microbatches),
               "number microbatches 0 to " + std::to_string(shape.microbatches - 1));
      // An overlapped pair (overlaps_next) runs as its two passes in order;
      // "R&B" is the backward alone (builder_pass).
      if (builder_pass(a)) out[r].push_back({*pass_of(a->type), a->microbatch, chunk_of_stage(shape, a->stage)});
    }
  }
  return out;
}

std::vector<std::vector<int32_t>> overlapped_pairs(const ActionSchedule& s) {
  std::vector<std::vector<int32_t>> out(s.size());
  for (size_t r = 0; r < s.size(); ++r) {
    int32_t index = 0;  // counts what to_schedule keeps: the LLM's compute passes
    for (const auto& a : s[r]) {
      if (!builder_pass(a)) continue;
      if (a->overlaps_next) out[r].push_back(index);
      ++index;
    }
  }
  return out;
}

}  // namespace lacuna::schedule
