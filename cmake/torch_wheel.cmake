# LibTorch from a pip wheel (torch.utils.cmake_prefix_path): what the wheel's CMake config
# leaves to its users, found here so a build needs no hand-set flags.
#
# * CUDA wheels' libtorch_cuda.so needs the NVIDIA libraries of the wheel's sibling packages
#   (site-packages/nvidia/*/lib: cuBLAS, cuDNN, NCCL, ...) through its own RUNPATH; the linker
#   resolves those NEEDED entries only with -rpath-link, so each such directory is added to
#   the link options of everything linked here (not to the run-time path: libtorch_cuda's
#   RUNPATH finds them when the program runs).
# * The wheel ships no Gloo headers, which c10d's ProcessGroupGloo.hpp includes
#   (pt2rt_distributed): PT2RT_GLOO_INCLUDE_DIR is looked up beside the wheel's headers first;
#   distributed/CMakeLists.txt says what to install when they are nowhere. NCCL's nccl.h
#   (ProcessGroupNCCL.hpp includes it) is looked up in the wheel's nvidia-nccl package.
# Sets PT2RT_TORCH_WHEEL (ON/OFF) for the summary line.
set(PT2RT_TORCH_WHEEL OFF)
get_filename_component(pt2rt_torch_root "${TORCH_INSTALL_PREFIX}" REALPATH)
get_filename_component(pt2rt_site "${pt2rt_torch_root}" DIRECTORY)
if(EXISTS "${pt2rt_torch_root}/__init__.py")
  set(PT2RT_TORCH_WHEEL ON)
  file(GLOB pt2rt_nvidia_libs LIST_DIRECTORIES true "${pt2rt_site}/nvidia/*/lib"
       "${pt2rt_site}/nvidia/cu*/lib")
  foreach(dir IN LISTS pt2rt_nvidia_libs)
    if(IS_DIRECTORY "${dir}")
      add_link_options("LINKER:-rpath-link,${dir}")
    endif()
  endforeach()
  list(LENGTH pt2rt_nvidia_libs pt2rt_nvidia_count)
  message(STATUS "pt2rt: LibTorch of the torch wheel at ${pt2rt_torch_root} "
                 "(${pt2rt_nvidia_count} NVIDIA library directories for -rpath-link)")
endif()
set(PT2RT_GLOO_HINTS "${pt2rt_torch_root}/include")
# NCCL's header for ProcessGroupNCCL (distributed/CMakeLists.txt): the wheel's nvidia-nccl.
file(GLOB PT2RT_NCCL_HINTS LIST_DIRECTORIES true "${pt2rt_site}/nvidia/nccl/include"
     "${pt2rt_site}/nvidia/cu*/include")
