# `cmake --install build --prefix PREFIX`: the tools, libdtensor (the
# compiler) and libdtensor_rt (the runtime), the public headers, a CMake
# package (find_package(DTensorMLIR): DTensorMLIR::dtensor and
# DTensorMLIR::dtensor_rt) and pkg-config files (dtensor, dtensor_rt), with
# RPATHs that work from the prefix (docs/install.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DTENSOR_TOOLS dtensor-opt dtensor-run dtensor-compile dtensor-plan
    dtensor-ckpt dtensor-check)
# Tools find the libraries next to them (../lib), libdtensor finds MLIR's.
set_target_properties(${DTENSOR_TOOLS} PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR};${LLVM_LIBRARY_DIR}")
# The libraries find each other next to them and their dependencies where
# they were linked from (CUDA, OpenMPI, MLIR).
set_target_properties(dtensor_rt dtensor PROPERTIES
  INSTALL_RPATH_USE_LINK_PATH TRUE)
get_target_property(_rtRpath dtensor_rt INSTALL_RPATH)
set(_rtInstallRpath "$ORIGIN")
if(_rtRpath)
  list(APPEND _rtInstallRpath ${_rtRpath})
endif()
set_target_properties(dtensor_rt PROPERTIES INSTALL_RPATH "${_rtInstallRpath}")
set_target_properties(dtensor PROPERTIES
  INSTALL_RPATH "$ORIGIN;${LLVM_LIBRARY_DIR}")

# What a consumer compiles with: our headers, and MLIR's for the C API
# types the compiler's headers use.
target_include_directories(dtensor INTERFACE
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${MLIR_INCLUDE_DIRS}>)
target_include_directories(dtensor_rt INTERFACE
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS ${DTENSOR_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS dtensor dtensor_rt EXPORT DTensorMLIRTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dtensor-c
  ${PROJECT_SOURCE_DIR}/include/dtensor-rt
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(DTENSOR_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/DTensorMLIR)
install(EXPORT DTensorMLIRTargets NAMESPACE DTensorMLIR::
  DESTINATION ${DTENSOR_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/DTensorMLIRConfig.cmake.in
  ${PROJECT_BINARY_DIR}/DTensorMLIRConfig.cmake
  INSTALL_DESTINATION ${DTENSOR_CMAKE_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/DTensorMLIRConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/DTensorMLIRConfig.cmake
  ${PROJECT_BINARY_DIR}/DTensorMLIRConfigVersion.cmake
  DESTINATION ${DTENSOR_CMAKE_DIR})

# pkg-config: the prefix is the install's (CMAKE_INSTALL_PREFIX at install
# time, so `cmake --install --prefix` is honoured).
foreach(_pc dtensor dtensor_rt)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${_pc}.pc.in
    ${PROJECT_BINARY_DIR}/${_pc}.pc.in.configured @ONLY)
  install(CODE "
    file(READ \"${PROJECT_BINARY_DIR}/${_pc}.pc.in.configured\" _text)
    string(REPLACE \"%%PREFIX%%\" \"\${CMAKE_INSTALL_PREFIX}\" _text \"\${_text}\")
    file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/${_pc}.pc\" \"\${_text}\")
    message(STATUS \"Installing: \${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/${_pc}.pc\")")
endforeach()
