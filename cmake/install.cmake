# `cmake --install`: what goes where, in two components (docs/architecture.md, "Installed layout").
#   server: the `flurry` binary, its modules in lib/flurry/ (set in apps/flurry, src/grpc and
#           src/tls), the man pages, the docs and the example configuration.
#   dev:    the public headers of the exported libraries, the static libraries, the CMake package
#           (find_package(flurry CONFIG)) and the pkg-config files (flurry.pc, flurry-order.pc,
#           flurry-client.pc).
# Static libraries only: flurry is 0.x with no ABI promise, and a shared library would need a
# runtime package per SONAME (Debian policy 8.1); docs/architecture.md says so.
include(CMakePackageConfigHelpers)

set(FLURRY_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flurry)

# --- server -------------------------------------------------------------------------------------
install(FILES ${PROJECT_SOURCE_DIR}/examples/flurry.toml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT server)
file(GLOB FLURRY_DOCS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${FLURRY_DOCS}
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT server)

# Man pages from the CLI's own help (tools/man-page.sh runs help2man), gzip -9n'd: flurry.1 and
# one page per verb of `flurry --help` (tests/package/check_install.sh checks that none is
# missing). AUTO builds them when help2man is found; ON requires it (the package build).
if(FLURRY_BUILD_CLI AND NOT FLURRY_MAN_PAGES STREQUAL "OFF")
  if(FLURRY_MAN_PAGES STREQUAL "ON")
    find_program(FLURRY_HELP2MAN help2man)
    if(NOT FLURRY_HELP2MAN)
      message(FATAL_ERROR "FLURRY_MAN_PAGES=ON but help2man is not installed: "
                          "apt-get install help2man (or configure with -DFLURRY_MAN_PAGES=OFF)")
    endif()
  elseif(FLURRY_MAN_PAGES STREQUAL "AUTO")
    find_program(FLURRY_HELP2MAN help2man)
  else()
    message(FATAL_ERROR "FLURRY_MAN_PAGES is AUTO, ON or OFF, not '${FLURRY_MAN_PAGES}'")
  endif()
  if(FLURRY_HELP2MAN)
    set(FLURRY_MAN_VERBS next decode layout bench serve nodes segment order)
    set(FLURRY_MAN_OUT ${CMAKE_BINARY_DIR}/man)
    set(FLURRY_MAN_PAGES_BUILT)
    foreach(page flurry ${FLURRY_MAN_VERBS})
      if(page STREQUAL "flurry")
        set(page_file flurry.1.gz)
        set(verb "")
      else()
        set(page_file flurry-${page}.1.gz)
        set(verb ${page})
      endif()
      add_custom_command(
        OUTPUT ${FLURRY_MAN_OUT}/${page_file}
        COMMAND ${PROJECT_SOURCE_DIR}/tools/man-page.sh ${FLURRY_HELP2MAN} $<TARGET_FILE:flurry>
                ${PROJECT_VERSION} ${FLURRY_MAN_OUT}/${page_file} ${verb}
        DEPENDS flurry ${PROJECT_SOURCE_DIR}/tools/man-page.sh
        COMMENT "help2man ${page_file}"
        VERBATIM)
      list(APPEND FLURRY_MAN_PAGES_BUILT ${FLURRY_MAN_OUT}/${page_file})
    endforeach()
    add_custom_target(flurry_man ALL DEPENDS ${FLURRY_MAN_PAGES_BUILT})
    install(FILES ${FLURRY_MAN_PAGES_BUILT} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
            COMPONENT server)
  else()
    message(STATUS "help2man not found: no man pages (FLURRY_MAN_PAGES=AUTO)")
  endif()
endif()

# --- dev ----------------------------------------------------------------------------------------
# The exported libraries under the names users write (flurry::core, ...), and the internal static
# libraries they link (flurry::db, flurry::tls), which a static link needs too.
set(FLURRY_EXPORTED_LIBRARIES flurry_core flurry_order flurry_registry flurry_tso flurry_segment
                              flurry_db flurry_tls_loader flurry_client)
# Position-independent, so that a user's shared library (a language binding, a plugin) can link
# them too, not only a program. -fno-semantic-interposition keeps GCC inlining and calling directly
# within a library as it does for an executable (nothing interposes a static library's symbols).
set_target_properties(${FLURRY_EXPORTED_LIBRARIES} PROPERTIES POSITION_INDEPENDENT_CODE ON)
foreach(library ${FLURRY_EXPORTED_LIBRARIES})
  target_compile_options(${library} PRIVATE -fno-semantic-interposition)
endforeach()
set_target_properties(flurry_core PROPERTIES EXPORT_NAME core)
set_target_properties(flurry_order PROPERTIES EXPORT_NAME order)
set_target_properties(flurry_client PROPERTIES EXPORT_NAME client)
set_target_properties(flurry_registry PROPERTIES EXPORT_NAME registry)
set_target_properties(flurry_tso PROPERTIES EXPORT_NAME tso)
set_target_properties(flurry_segment PROPERTIES EXPORT_NAME segment)
set_target_properties(flurry_db PROPERTIES EXPORT_NAME db)
set_target_properties(flurry_tls_loader PROPERTIES EXPORT_NAME tls)
install(TARGETS ${FLURRY_EXPORTED_LIBRARIES} EXPORT flurryTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The headers of include/flurry/ itself: those of the exported libraries, none of which includes
# anything of src/ (tests/package/check_install.sh compiles each alone against the install). The
# headers of src/*/include/ (service/, ops/, http/, grpc_api/, app/, ...) stay out with their
# libraries.
file(GLOB FLURRY_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/include/flurry/*.h)
install(FILES ${FLURRY_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/flurry
        COMPONENT dev)

install(EXPORT flurryTargets NAMESPACE flurry:: DESTINATION ${FLURRY_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flurryConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/cmake/flurryConfig.cmake
                              INSTALL_DESTINATION ${FLURRY_CMAKE_DIR})
# SameMinorVersion: while flurry is 0.x a minor release may change the API (semantic versioning's
# rule for 0.y.z), so 0.1.x satisfies find_package(flurry 0.1) and 0.2.0 does not.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/flurryConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/flurryConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/flurryConfigVersion.cmake
        DESTINATION ${FLURRY_CMAKE_DIR} COMPONENT dev)

# pkg-config: written at install time, so that prefix= is the prefix installed to
# (`cmake --install --prefix DIR`, or CPack's /usr), not the one configured.
foreach(pc flurry flurry-order flurry-client)
  install(CODE "
    set(FLURRY_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    set(FLURRY_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
    set(FLURRY_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
    set(FLURRY_PC_VERSION \"${PROJECT_VERSION}\")
    set(pc_file \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/${pc}.pc\")
    message(STATUS \"Installing: \${pc_file}\")
    configure_file(\"${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in\" \"\${pc_file}\" @ONLY)
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${pc_file}\")
  " COMPONENT dev)
endforeach()
