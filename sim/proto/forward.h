// Forward declarations of the generated protobuf types that headers name only
// by reference, pointer or enum parameter. A header that includes this instead
// of a .pb.h (program.pb.h is 10k lines and pulls in scenario.pb.h, 16k)
// stops rebuilding its includers when a .proto changes, and costs them
// nothing to parse (docs/performance.md#build). A source file that uses a
// type's members includes the .pb.h itself.
//
// The enums can be declared here because protoc gives every enum a fixed
// underlying type (`enum X : int`), which makes an opaque declaration legal.
#pragma once

namespace lacuna::scenario {
enum ScheduleKind : int;
enum Precision : int;
class Cluster;
class Scenario;
}  // namespace lacuna::scenario

namespace lacuna::ir {
enum CollectiveKind : int;
class Compute;
class Op;
class Program;
}  // namespace lacuna::ir
