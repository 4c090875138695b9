# Install rules and the CMake package config: find_package(pt2rt) -> pt2rt::runtime.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS pt2rt_loader pt2rt_runtime EXPORT pt2rtTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS export-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pt2rt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT pt2rtTargets NAMESPACE pt2rt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pt2rt)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pt2rtConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/pt2rtConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pt2rt)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pt2rtConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pt2rtConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/pt2rtConfigVersion.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pt2rt)
