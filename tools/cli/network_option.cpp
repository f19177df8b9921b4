#include "tools/cli/network_option.h"

#include <map>


namespace lacuna::cli {

void add_network_option(CLI::App* sub, NetworkMode& mode) {
  const std::map<std::string, NetworkMode> names = {{"flow", NetworkMode::kFlow}, {"analytic", NetworkMode::kAnalytic}};
  sub->add_option("--network", mode,
                  "communication model: flow (links shared max-min fairly, NCCL algorithm steps as flows, "
                  "compute slowed while NCCL runs; default) or analytic (contention-free closed forms, faster)")
      ->transform(CLI::CheckedTransformer(names, CLI::ignore_case));
}

}  // namespace lacuna::cli
