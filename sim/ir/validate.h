// The program's rules, checked once for every consumer (the simulator, the
// executor, `simulate FILE.pb`): every index a consumer dereferences is in
// range, every quantity it adds up is bounded so that no derived sum can
// overflow int64, groups contain their members. A corrupt or hand-edited
// program is refused with a message naming the element instead of crashing
// or hanging what runs it.
#pragma once

#include <string>

#include "sim/proto/program.pb.h"

namespace lacuna::ir {

// Throws lacuna::Error naming the offending element, e.g. "ranks[12].peer[1]:
// rank 9000 out of range (program has 3072 ranks)". `source` names the file
// for messages.
void validate_program(const Program& program, const std::string& source = {});

}  // namespace lacuna::ir
