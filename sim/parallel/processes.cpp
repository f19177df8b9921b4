#include "sim/parallel/processes.h"

#include <cstdlib>
#include <initializer_list>

#ifdef LACUNA_WITH_MPI
#include <mpi.h>
#endif

namespace lacuna::parallel {

bool built_with_mpi() {
#ifdef LACUNA_WITH_MPI
  return true;
#else
  return false;
#endif
}

bool launched_by_mpi() {
  // Open MPI's mpirun, MPICH / Hydra and Slurm's srun (PMI and PMIx) each set
  // one of these in every process they start.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

World world() {
#ifdef LACUNA_WITH_MPI
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    World w;
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    return w;
  }
#endif
  return World{};
}

void abort_others(int code) {
#ifdef LACUNA_WITH_MPI
  if (world().size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
}

MpiSession::MpiSession(int* argc, char*** argv) {
#ifdef LACUNA_WITH_MPI
  if (launched_by_mpi()) {
    // Only the calling thread talks to MPI (map_items gathers after its
    // threads joined), so MPI_THREAD_FUNNELED is enough.
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    opened_ = true;
  }
#else
  (void)argc;
  (void)argv;
#endif
}

MpiSession::~MpiSession() {
#ifdef LACUNA_WITH_MPI
  if (opened_) MPI_Finalize();
#endif
}

}  // namespace lacuna::parallel
