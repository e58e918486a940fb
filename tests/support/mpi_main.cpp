// Catch2 main for MPI tests: an RAII MPI environment around the session; every rank runs every test
// case; the exit code is failed on every rank when any rank failed, so mpiexec reports it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "dist/mpi.hpp"

int main(int argc, char** argv) {
  hsipipe::dist::Environment env(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  if (rank != 0) session.configData().showSuccessfulTests = false;
  const int rc = session.run(argc, argv);
  int worst = rc;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
