# Installs the layers' libraries, their headers (include/cbi/{schedules,filters,pipeline})
# and a CMake package, so other projects use find_package(cbi) and link
# cbi::cbi (or one layer: cbi::schedules, cbi::filters, cbi::pipeline).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

target_include_directories(cbi_schedules PUBLIC
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>       # #include <cbi/pipeline/graph.hpp>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/cbi>)  # the headers' own "schedules/..." includes
install(TARGETS cbi cbi_schedules cbi_filters cbi_pipeline EXPORT cbiTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS cbi-filter RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY schedules filters pipeline DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cbi
  FILES_MATCHING PATTERN "*.hpp")
install(EXPORT cbiTargets NAMESPACE cbi:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cbi)
configure_package_config_file(cmake/cbiConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/cbiConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cbi)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cbiConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cbiConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/cbiConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cbi)
