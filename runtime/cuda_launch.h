// How the CUDA backend's processes find each other (host-only: no CUDA call
// here, so it is tested on the CPU in cuda_launch_test.cpp).
//
// One process per GPU, each running one executed rank. Every process needs
// the same NCCL unique ids, made by one of them, and the first process
// needs everyone's spans back:
// - Built-in launcher (run_children): the parent forks one child per rank
//   BEFORE any CUDA or NCCL call in the parent (a CUDA context does not
//   survive fork). Child 0 makes the ids and sends them to the parent, which
//   forwards them to every child; each child runs its rank and sends its
//   RankOutcome back (runtime/span_io.h messages over a socketpair). A child
//   that dies or reports an error gets the others killed (SIGKILL, by pid)
//   and is reported.
// - mpirun (OpenMPI): detect_mpi reads OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK};
//   world rank 0 writes the ids to a file in the rendezvous directory
//   ($LACUNA_RENDEZVOUS_DIR or /tmp/lacuna-<jobid>) atomically (write, then
//   rename) and the others poll for it; each rank writes its outcome there
//   the same way and rank 0 collects them.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/span_io.h"

namespace lacuna::runtime {

struct MpiEnv {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string job_id;  // filesystem-safe
};

// Reads the OpenMPI variables through `env` (getenv in production); nothing
// when OMPI_COMM_WORLD_SIZE is unset; lacuna::Error when they are malformed.
std::optional<MpiEnv> detect_mpi(const std::function<const char*(const char*)>& env);
// $LACUNA_RENDEZVOUS_DIR (when `dir_override` is non-empty) or /tmp/lacuna-<jobid>.
std::string rendezvous_dir(const MpiEnv& mpi, const std::string& dir_override);

// Writes `bytes` to path.tmp.<pid> and renames it to `path`: a reader never
// sees a partial file.
void write_file_atomically(const std::string& path, std::string_view bytes);
// Polls until `path` exists, then returns its contents; lacuna::Error after
// `timeout`, naming the file.
std::string read_file_when_ready(const std::string& path, std::chrono::milliseconds timeout,
                                 const std::string& waiting_for);

// mpirun: the ids from world rank 0's make_ids(), through the directory.
std::string exchange_ids_via_files(const MpiEnv& mpi, const std::string& dir,
                                   const std::function<std::string()>& make_ids, std::chrono::milliseconds timeout);
// mpirun: every rank publishes its outcome; world rank 0 returns all of them
// (in world-rank order, waiting up to `timeout` for each after its own), the
// others return only their own.
std::vector<RankOutcome> gather_outcomes_via_files(const MpiEnv& mpi, const std::string& dir,
                                                   const RankOutcome& mine, std::chrono::milliseconds timeout);

// The built-in launcher. Child i (0 <= i < n) runs body(i, ids), where ids is
// what make_ids() returned in child 0; the parent returns the n outcomes in
// child order. The parent waits `ids_timeout` for the ids; a child that
// throws reports the error in its outcome; a child that dies is reported by
// pid and exit status. Children end with _exit, never returning to the caller.
std::vector<RankOutcome> run_children(int n, const std::function<std::string()>& make_ids,
                                      const std::function<RankOutcome(int, const std::string&)>& body,
                                      std::chrono::milliseconds ids_timeout);

// Runs fn() in a forked child and returns its result; fn's exception is
// rethrown as lacuna::Error here. For probing the GPUs without initialising
// CUDA in this process.
std::string run_in_child(const std::function<std::string()>& fn, std::chrono::milliseconds timeout);

}  // namespace lacuna::runtime
