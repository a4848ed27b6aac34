# make install (cmake --install build --prefix PREFIX): what a project needs to build against
# zinc the way it builds against NCCL.
#
#   PREFIX/include/          nccl.h, zinc.h (every public header of include/)
#   PREFIX/lib/              libnccl.so.2.30.7, libnccl.so.2, libnccl.so, libnccl_static.a,
#                            libnccl-net-zinc.so (zinc's nets as an NCCL net plugin)
#                            libmscclpp.so.0.1.0, libmscclpp.so.0, libmscclpp.so
#   PREFIX/bin/              zinc-run, zinc-perf, zinc-info (tools/CMakeLists.txt)
#   PREFIX/lib/pkgconfig/    nccl.pc, zinc.pc, mscclpp.pc   pkg-config --cflags --libs nccl
#   PREFIX/lib/cmake/zinc/   zincConfig.cmake + version find_package(zinc) -> zinc::nccl,
#                            zinc::mscclpp
#
# Every installed file locates the others relative to itself (${pcfiledir}, the config file's
# directory), so the tree works wherever it is installed or moved to; nothing here depends on
# the prefix given at configure time.

include(CMakePackageConfigHelpers)
get_target_property(ZINC_NCCL_VERSION nccl VERSION)

install(TARGETS nccl nccl_static nccl_net_zinc mscclpp
        LIBRARY DESTINATION lib
        ARCHIVE DESTINATION lib)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/ DESTINATION include FILES_MATCHING PATTERN "*.h")

# What the static library needs beside itself (the shared one records its own dependencies).
set(ZINC_PC_PRIVATE "-lpthread -ldl -lrt -lm")
set(ZINC_CFG_STATIC_DEPS "Threads::Threads;${CMAKE_DL_LIBS};rt;m")
set(ZINC_CFG_FIND_CUDA "")
if(ZINC_HAVE_CUDA)
  string(APPEND ZINC_PC_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lstdc++")
  list(APPEND ZINC_CFG_STATIC_DEPS CUDA::cudart_static stdc++)
  set(ZINC_CFG_FIND_CUDA "find_dependency(CUDAToolkit)")
endif()

set(zinc_gen ${CMAKE_BINARY_DIR}/cmake-install)
configure_file(${CMAKE_SOURCE_DIR}/cmake/nccl.pc.in ${zinc_gen}/nccl.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/zinc.pc.in ${zinc_gen}/zinc.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/mscclpp.pc.in ${zinc_gen}/mscclpp.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/zincConfig.cmake.in ${zinc_gen}/zincConfig.cmake @ONLY)
write_basic_package_version_file(${zinc_gen}/zincConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${zinc_gen}/nccl.pc ${zinc_gen}/zinc.pc ${zinc_gen}/mscclpp.pc DESTINATION lib/pkgconfig)
install(FILES ${zinc_gen}/zincConfig.cmake ${zinc_gen}/zincConfigVersion.cmake
        DESTINATION lib/cmake/zinc)

# Installed tools find the installed library next to them (RUNPATH: LD_LIBRARY_PATH still
# overrides it, which is how zinc-perf is pointed at another NCCL for comparisons).
foreach(tool zinc-perf zinc-info)
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES INSTALL_RPATH "\$ORIGIN/../lib")
  endif()
endforeach()
