// Silences protobuf's own log lines ("[libprotobuf ERROR ...] invalid UTF-8")
// while a binary input is parsed: lacuna reports a bad file once, as a
// lacuna::Error naming the file, and the library's line would only repeat it
// in its own words. Protobuf releases without stubs/logging.h (those built on
// Abseil logging) get a no-op.
#pragma once

#if __has_include(<google/protobuf/stubs/logging.h>)
#include <google/protobuf/stubs/logging.h>
#endif

namespace lacuna {

#if __has_include(<google/protobuf/stubs/logging.h>)
using QuietProtobuf = google::protobuf::LogSilencer;
#else
struct QuietProtobuf {};
#endif

}  // namespace lacuna
