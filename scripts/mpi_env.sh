# shellcheck shell=bash
# Open MPI settings for runs on ONE node (the demo, the benchmarks, the tests on this machine), sourced by
# the scripts: ranks talk through shared memory (pml ob1, btl self,vader) and Open MPI does not probe
# network fabrics (UCX, OFI) at MPI_Init: `perf stat -r 3 mpiexec -n 1` of an empty MPI program took 0.32 s
# without these settings and 0.11 s with them on the 2-core development VM (1 Dec 2026).
# Values already in the environment win. Cluster jobs do not source this: jobs/ take config/site.env.
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader}
export OMPI_MCA_osc=${OMPI_MCA_osc:-^ucx}
export OMPI_MCA_mtl=${OMPI_MCA_mtl:-^ofi}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
# PMIx keeps the job's keys in its hash store instead of the shared-memory "dstore": mpiexec spent 30-70 ms
# setting up the dstore's segments for every launch (strace: no system calls, the PMIx server thread busy),
# which MPI_Init waited for. A one-node job of a few ranks reads a handful of keys: MPI_Init went from
# 40-60 ms to 13 ms (1 and 2 ranks, 1 Dec 2026).
export PMIX_MCA_gds=${PMIX_MCA_gds:-hash}
# hwloc (mpiexec's view of the node) skips I/O devices: perf showed half of `mpiexec -n 1 true` in reading
# the PCI devices' config space, which only matters for placing ranks near network cards and GPUs across
# nodes. `perf stat -r 10 mpiexec -n 2` of a small decode: 0.071 -> 0.051 s (1 Dec 2026). CPU binding
# (cores, caches, NUMA) is unaffected; NCCL finds GPUs with its own topology code.
export HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci,-linuxio}
if [ "$(id -u)" = 0 ]; then  # containers and CI run as root; Open MPI refuses that unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
