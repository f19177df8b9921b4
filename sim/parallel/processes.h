// The processes of one lacuna run: one, or the ranks of an MPI job when lacuna
// was built with MPI and started by `mpirun` (docs/search.md#many-machines).
// MPI is optional at build time (LACUNA_WITH_MPI): without it every run is
// one process and `mpirun -np K` starts K independent copies, which the
// commands that split work refuse (they would each write the same files).
#pragma once

namespace lacuna::parallel {

// This process's place in the run: MPI_COMM_WORLD's rank and size once an
// MpiSession is open, else {0, 1}.
struct World {
  int rank = 0;
  int size = 1;
  bool root() const { return rank == 0; }
};
World world();

// Whether this binary was built with MPI.
bool built_with_mpi();

// Whether this process was started by an MPI launcher (mpirun, srun): the
// launcher's environment variables are set.
bool launched_by_mpi();

// Opens MPI for the process's lifetime when built with MPI and launched by an
// MPI launcher (MPI_Init / MPI_Finalize); otherwise does nothing, so a plain
// `lacuna` never pays for or depends on an MPI runtime. Construct once, in
// main(), before any thread starts.
// Ends every process of the run with `code` (MPI_Abort) when several run:
// one process failing alone would leave the others waiting in a collective.
// Returns (doing nothing) in a run of one process.
void abort_others(int code);

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool opened_ = false;
};

}  // namespace lacuna::parallel
