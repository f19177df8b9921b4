// Where an output file really goes, decided before a run starts
// (docs/outputs.md, "Output paths"). A path given on the command line may be
// a symlink (the file it points at is written, the link stays), a device or
// a FIFO (written through: /dev/stdout streams, /dev/full reports its error),
// or a regular file or a new name (written under a temporary name and renamed
// into place). Directories, empty paths, symlink loops, the same file named
// twice and an output that is one of the run's inputs are refused up front,
// naming the option.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace lacuna {

struct OutputTarget {
  std::filesystem::path resolved;  // symlinks followed
  bool write_through = false;      // an existing non-regular file: written in place
};

// Follows symlinks (at most 40, as the kernel's ELOOP limit) and classifies
// the target. Throws lacuna::Error naming `option` for an empty path, a loop,
// a directory, or a parent directory that does not exist.
OutputTarget resolve_output(const std::string& path, std::string_view option);

struct NamedPath {
  std::string option;  // e.g. "--json"
  std::string path;    // empty: not written
};

// Every output resolved (as above) and pairwise distinct, none the same file
// as an input; the error names both options. Empty entries are skipped.
void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

}  // namespace lacuna
