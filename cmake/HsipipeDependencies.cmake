# Every third-party dependency is found here, once, as imported targets.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(PNG REQUIRED)

# Parallel HDF5. On Debian the MPI flavour lives under hdf5/openmpi; sites with modules or Spack
# set HDF5_ROOT or put h5pcc on PATH instead.
set(HDF5_PREFER_PARALLEL ON)
if(NOT HDF5_ROOT AND EXISTS /usr/lib/x86_64-linux-gnu/hdf5/openmpi)
  set(HDF5_ROOT /usr/lib/x86_64-linux-gnu/hdf5/openmpi)
endif()
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "hsipipe needs a parallel (MPI) build of HDF5; found a serial one at ${HDF5_INCLUDE_DIRS}. "
                      "On Debian install libhdf5-openmpi-dev, elsewhere point HDF5_ROOT at a parallel build.")
endif()
if(NOT TARGET hdf5::hdf5)
  add_library(hdf5::hdf5 INTERFACE IMPORTED)
  target_include_directories(hdf5::hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  target_link_libraries(hdf5::hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})
  target_compile_definitions(hdf5::hdf5 INTERFACE ${HDF5_DEFINITIONS})
endif()

# matio: link libmatio ALONE. Its pkg-config file adds Debian's *serial* libhdf5 (and its include
# directory) to our link line, and then H5Pcreate & co. bind to the serial library while
# H5Pset_fapl_mpio binds to the parallel one: property lists from one library handed to the other.
# libmatio keeps its own (symbol-versioned) serial HDF5 through its DT_NEEDED entry.
find_path(MATIO_INCLUDE_DIR matio.h REQUIRED)
find_library(MATIO_LIBRARY matio REQUIRED)
add_library(Matio::Matio INTERFACE IMPORTED)
target_include_directories(Matio::Matio INTERFACE ${MATIO_INCLUDE_DIR})
target_link_libraries(Matio::Matio INTERFACE ${MATIO_LIBRARY})
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)

if(HSIPIPE_WITH_GDAL)
  find_package(GDAL REQUIRED)
endif()

if(HSIPIPE_WITH_TORCH)
  find_package(Torch REQUIRED)
endif()

set(HSIPIPE_HAVE_NCCL OFF)
if(HSIPIPE_WITH_NCCL)
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 ENV NCCL_HOME PATH_SUFFIXES lib lib64)
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(HSIPIPE_HAVE_NCCL ON)
    add_library(hsipipe_nccl_dep INTERFACE IMPORTED)
    target_include_directories(hsipipe_nccl_dep INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(hsipipe_nccl_dep INTERFACE ${NCCL_LIBRARY} CUDA::cudart)
    message(STATUS "hsipipe: NCCL communicator enabled (${NCCL_LIBRARY})")
  else()
    message(STATUS "hsipipe: CUDA toolkit or NCCL not found, NCCL communicator not built")
  endif()
endif()
