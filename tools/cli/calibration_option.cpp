#include "tools/cli/calibration_option.h"


namespace lacuna::cli {

void add_calibration_options(CLI::App* sub, CalibrationOption& option) {
  sub->add_option("--calibration", option.profile,
                  "time kernels with the measurements in PROFILE (written by `lacuna calibrate`) instead of the "
                  "roofline; shapes it did not measure are interpolated or extrapolated (the run reports how many)");
  sub->add_flag("--allow-device-mismatch", option.allow_device_mismatch,
                "use a calibration profile measured on another device than the scenario's GPU");
}

}  // namespace lacuna::cli
