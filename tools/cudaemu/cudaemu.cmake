# cudaemu_backend(TARGET): builds TARGET's CUDA backend (kernels.cu, cuda_backend.c) on cudaemu
# instead of the CUDA toolkit. Used for ss_kernels_cudaemu (tools/cudaemu), and for ss_kernels
# itself with -DSERVESIM_CUDAEMU=ON, which makes every command's --backend cuda run on it.
set(CUDAEMU_DIR ${CMAKE_CURRENT_LIST_DIR})
function(cudaemu_backend target)
  target_sources(${target} PRIVATE ${CUDAEMU_DIR}/runtime.cpp ${CUDAEMU_DIR}/launch.cpp
                 ${CUDAEMU_DIR}/cublas.cpp ${CUDAEMU_DIR}/kernels_emu.cpp
                 ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_backend.c)
  set_target_properties(${target} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  target_include_directories(${target} BEFORE PUBLIC ${CUDAEMU_DIR}/include)
  target_compile_definitions(${target} PUBLIC SERVESIM_CUDA_BACKEND SERVESIM_CUDAEMU)
  # Device code follows nvcc's habits: #pragma unroll (and kernels_emu.cpp's sign-compare).
  # The fiber switch returns to an address it did not call from: no shadow stacks (CET).
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-unknown-pragmas>
                         $<$<COMPILE_LANGUAGE:CXX>:-fcf-protection=none>)
endfunction()
