# Locates the libtorch that ships inside the installed torch wheel (torch 2.11 - 2.13).
# The torch wheel is the only source of libtorch; never a separate download.
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import torch, os; print(torch.utils.cmake_prefix_path + ';' + os.path.dirname(torch.__file__) + ';' + torch.__version__ + ';' + str(torch.version.cuda is not None) + ';' + str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))"
  OUTPUT_VARIABLE _pt2q_torch_info OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _pt2q_torch_rc)
if(NOT _pt2q_torch_rc EQUAL 0)
  message(FATAL_ERROR "pt2q needs torch installed in ${Python3_EXECUTABLE}: run `pip install torch==2.13.0` (or `make deps`)")
endif()
list(GET _pt2q_torch_info 0 _pt2q_torch_prefix)
list(GET _pt2q_torch_info 1 PT2Q_TORCH_DIR)
list(GET _pt2q_torch_info 2 PT2Q_TORCH_VERSION)
list(GET _pt2q_torch_info 3 PT2Q_TORCH_HAS_CUDA)
list(GET _pt2q_torch_info 4 PT2Q_TORCH_CXX11_ABI)
message(STATUS "pt2q: torch ${PT2Q_TORCH_VERSION} at ${PT2Q_TORCH_DIR} (CUDA build: ${PT2Q_TORCH_HAS_CUDA})")
if(PT2Q_TORCH_VERSION VERSION_LESS 2.11)
  message(FATAL_ERROR "pt2q supports torch 2.11 through 2.13, found ${PT2Q_TORCH_VERSION}")
endif()

# Finding the full Torch CMake package drags in CUDA/cuDNN discovery on CUDA wheels and takes
# seconds on every configure; pt2q needs only headers, three libraries and the ABI flag.
set(PT2Q_TORCH_LIB_DIR ${PT2Q_TORCH_DIR}/lib)
add_library(pt2q_torch INTERFACE)
target_include_directories(pt2q_torch SYSTEM INTERFACE
  ${PT2Q_TORCH_DIR}/include
  ${PT2Q_TORCH_DIR}/include/torch/csrc/api/include)
target_compile_definitions(pt2q_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${PT2Q_TORCH_CXX11_ABI})
find_library(PT2Q_LIBTORCH torch PATHS ${PT2Q_TORCH_LIB_DIR} NO_DEFAULT_PATH REQUIRED)
find_library(PT2Q_LIBTORCH_CPU torch_cpu PATHS ${PT2Q_TORCH_LIB_DIR} NO_DEFAULT_PATH REQUIRED)
find_library(PT2Q_LIBC10 c10 PATHS ${PT2Q_TORCH_LIB_DIR} NO_DEFAULT_PATH REQUIRED)
find_library(PT2Q_LIBTORCH_PYTHON torch_python PATHS ${PT2Q_TORCH_LIB_DIR} NO_DEFAULT_PATH)
target_link_libraries(pt2q_torch INTERFACE ${PT2Q_LIBTORCH} ${PT2Q_LIBTORCH_CPU} ${PT2Q_LIBC10})

# at::parallel_for is a header template whose OpenMP backend is a `#pragma omp parallel`:
# without -fopenmp it silently runs on one thread. Link the libgomp the wheel ships, so that
# one OpenMP runtime serves torch and pt2q.
if(EXISTS ${PT2Q_TORCH_LIB_DIR}/libgomp.so.1)
  target_compile_options(pt2q_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fopenmp>)
  target_link_libraries(pt2q_torch INTERFACE ${PT2Q_TORCH_LIB_DIR}/libgomp.so.1)
else()
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  target_link_libraries(pt2q_torch INTERFACE OpenMP::OpenMP_CXX)
endif()
if(PT2Q_TORCH_HAS_CUDA)
  # At top level: imported targets (CUDA::cudart) are visible only below the directory that
  # found them, and libpt2q is defined at the root.
  find_package(CUDAToolkit)
  find_library(PT2Q_LIBTORCH_CUDA torch_cuda PATHS ${PT2Q_TORCH_LIB_DIR} NO_DEFAULT_PATH)
  find_library(PT2Q_LIBC10_CUDA c10_cuda PATHS ${PT2Q_TORCH_LIB_DIR} NO_DEFAULT_PATH)
endif()
set(PT2Q_TORCH_LIBS pt2q_torch)
