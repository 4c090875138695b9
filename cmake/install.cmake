# Install rules and the CMake package config.
#
#   cmake --install build --prefix /opt/pt2rt
#   # in another project:  find_package(pt2rt 0.1 REQUIRED)  (CMAKE_PREFIX_PATH=/opt/pt2rt)
#   target_link_libraries(app PRIVATE pt2rt::runtime)
#
# Installed: libraries (pt2rt::loader, pt2rt::runtime, pt2rt::distributed), public headers (include/pt2rt),
# export-cli (also as the imported target pt2rt::export-cli), and the Python exporter package
# in share/pt2rt/python (export-cli save puts it on PYTHONPATH).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS pt2rt_schema pt2rt_loader pt2rt_runtime pt2rt_distributed export-cli EXPORT pt2rtTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pt2rt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/exporter/pt2rt
  DESTINATION ${CMAKE_INSTALL_DATADIR}/pt2rt/python
  PATTERN __pycache__ EXCLUDE PATTERN ".fb-*" EXCLUDE)
install(EXPORT pt2rtTargets NAMESPACE pt2rt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pt2rt)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pt2rtConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/pt2rtConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pt2rt)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pt2rtConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pt2rtConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/pt2rtConfigVersion.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pt2rt)
