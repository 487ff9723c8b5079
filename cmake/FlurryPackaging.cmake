# Debian packages with CPack (`make package`; docs/operations.md, "Running under systemd"):
#   flurry          component `server`: the server and CLI, its modules, the systemd units,
#                   /etc/flurry/flurry.toml (a conffile), man pages and docs
#   libflurry-dev   component `dev`: headers, static libraries, CMake and pkg-config files
# cpack -G DEB --config <build>/CPackConfig.cmake -B <dir> writes both .deb files.
#
# What only a package needs (the units, the packaged flurry.toml, the Debian changelog and
# copyright) is EXCLUDE_FROM_ALL: a plain `cmake --install` leaves it out, while CPack (which
# installs one component at a time) and `cmake --install --component NAME` get it. Every
# destination is relative to the install prefix, so that `cmake --install --prefix P` of any
# component writes inside P only (tests/package/check_prefix.sh): the changelog and copyright in
# P/share/doc/<package>, the units in P/lib/systemd/system, the configuration in P/etc/flurry.
# Only the prefix /usr (CPack's, CPACK_PACKAGING_INSTALL_PREFIX below) puts the units and the
# configuration where Debian keeps them, /lib/systemd/system and /etc/flurry, as GNUInstallDirs
# maps sysconfdir to /etc for /usr.

set(FLURRY_DEB_DIR ${PROJECT_SOURCE_DIR}/packaging/debian)
set(FLURRY_DEB_STAGE ${PROJECT_BINARY_DIR}/packaging)

# /etc/flurry/flurry.toml: examples/flurry.toml (every key with its default and what it does)
# with data_dir set to the unit's StateDirectory. Made here so that the two never drift apart.
file(READ ${PROJECT_SOURCE_DIR}/examples/flurry.toml FLURRY_EXAMPLE_TOML)
set(FLURRY_DATA_DIR_DEFAULT_LINE "# data_dir = \"/var/lib/flurry\"\n")
string(FIND "${FLURRY_EXAMPLE_TOML}" "${FLURRY_DATA_DIR_DEFAULT_LINE}" FLURRY_DATA_DIR_AT)
if(FLURRY_DATA_DIR_AT LESS 0)
  message(FATAL_ERROR "examples/flurry.toml has no line '# data_dir = \"/var/lib/flurry\"': "
                      "update cmake/FlurryPackaging.cmake, which sets it for the package")
endif()
string(REPLACE "${FLURRY_DATA_DIR_DEFAULT_LINE}"
               "# The flurry package: systemd's StateDirectory=flurry (flurry.service).\ndata_dir = \"/var/lib/flurry\"\n"
               FLURRY_PACKAGED_TOML "${FLURRY_EXAMPLE_TOML}")
set(FLURRY_EXAMPLE_HEAD
    "# flurry serve: an example configuration. Every key is optional; the values below are the\n# defaults. Use it with `flurry serve --config examples/flurry.toml` (or FLURRY_CONFIG=...).\n")
string(FIND "${FLURRY_PACKAGED_TOML}" "${FLURRY_EXAMPLE_HEAD}" FLURRY_EXAMPLE_HEAD_AT)
if(NOT FLURRY_EXAMPLE_HEAD_AT EQUAL 0)
  message(FATAL_ERROR "examples/flurry.toml does not start as cmake/FlurryPackaging.cmake expects")
endif()
string(REPLACE "${FLURRY_EXAMPLE_HEAD}"
               "# flurry serve's settings under systemd, installed by the flurry package (a conffile: an\n# upgrade keeps your changes). flurry.service runs\n#   flurry serve --config /etc/flurry/flurry.toml --admin-token-file $CREDENTIALS_DIRECTORY/admin-token\n# with the token of /etc/flurry/admin-token (made by the package). Every key is optional; the\n# values below are the defaults, but for data_dir (the unit's state directory).\n"
               FLURRY_PACKAGED_TOML "${FLURRY_PACKAGED_TOML}")
file(CONFIGURE OUTPUT ${FLURRY_DEB_STAGE}/flurry.toml CONTENT "${FLURRY_PACKAGED_TOML}" @ONLY)

# Debian's changelog and copyright files, as dpkg and lintian expect them (gzip -9n: no name, no
# time stamp, so the package is reproducible).
# Made at configure time, so that cpack needs no build step for them.
find_program(FLURRY_GZIP gzip REQUIRED)
execute_process(COMMAND ${FLURRY_GZIP} -9n -c ${FLURRY_DEB_DIR}/changelog
                OUTPUT_FILE ${FLURRY_DEB_STAGE}/changelog.Debian.gz COMMAND_ERROR_IS_FATAL ANY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${FLURRY_DEB_DIR}/changelog)

foreach(component_package IN ITEMS "server;flurry" "dev;libflurry-dev")
  list(GET component_package 0 component)
  list(GET component_package 1 package)
  install(FILES ${FLURRY_DEB_STAGE}/changelog.Debian.gz ${FLURRY_DEB_DIR}/copyright
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}
          PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
          COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

# flurry_install_system_files(DIR SYSTEM_DIR FILES...): FILES (mode 0644, component server, not
# in a plain install) into PREFIX/DIR, or into SYSTEM_DIR when the prefix is /usr. Decided at
# install time, when the prefix is known (`cmake --install --prefix`, CPack's /usr); DESTDIR is
# honoured either way (file(INSTALL) prepends it).
function(flurry_install_system_files dir system_dir)
  set(files)
  foreach(file ${ARGN})
    string(APPEND files " \"${file}\"")
  endforeach()
  install(CODE "
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
      set(flurry_dir \"${system_dir}\")
    else()
      set(flurry_dir \"\${CMAKE_INSTALL_PREFIX}/${dir}\")
    endif()
    file(INSTALL DESTINATION \"\${flurry_dir}\" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES ${files})
  " COMPONENT server EXCLUDE_FROM_ALL)
endfunction()
flurry_install_system_files(lib/systemd/system /lib/systemd/system
                            ${PROJECT_SOURCE_DIR}/deploy/systemd/flurry.service
                            ${PROJECT_SOURCE_DIR}/deploy/systemd/flurry@.service)
flurry_install_system_files(${CMAKE_INSTALL_SYSCONFDIR}/flurry /etc/flurry
                            ${FLURRY_DEB_STAGE}/flurry.toml)

# What the flurry package ships is linked with full RELRO (-z relro -z now: the GOT read-only
# once loaded), as Debian builds packages (lintian: hardening-no-bindnow). Only the link of these
# four changes; not with sanitizers, whose runtimes resolve symbols late. The modules'
# references into the binary (apps/flurry/exported.symbols) are then all bound at dlopen().
if(NOT FLURRY_SANITIZE AND NOT FLURRY_FUZZ)
  foreach(target flurry flurry_grpc flurry_tls flurry_etcd)
    if(TARGET ${target})
      target_link_options(${target} PRIVATE "LINKER:-z,relro,-z,now")
    endif()
  endforeach()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME flurry)
set(CPACK_PACKAGE_VENDOR "flurry developers")
set(CPACK_PACKAGE_CONTACT "flurry developers <flurry@users.noreply.github.com>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's description below starts with its own summary line; CPack prepends this one
# unless it is its default. CPack indents the lines (an empty one becomes " .").
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_NAME} built using CMake")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL server dev)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # flurry_0.1.0-1_amd64.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SOURCE flurry)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME flurry)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
# procps: /bin/kill, the units' ExecReload=; libsystemd0: sd_notify(), opened with dlopen() under
# systemd only (Type=notify), so shlibdeps cannot see it. shlibdeps adds the linked libraries.
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "procps, libsystemd0")
# libpq5: the PostgreSQL registry and segment store, opened with dlopen() on first use (so
# shlibdeps cannot see it either); a server on SQLite or etcd never needs it, and one set for
# PostgreSQL without it is refused at start with an error naming the package. apt installs
# recommendations by default.
set(CPACK_DEBIAN_SERVER_PACKAGE_RECOMMENDS "libpq5")
set(CPACK_DEBIAN_SERVER_DESCRIPTION
   "distributed unique-ID service (server and command-line tool)
flurry issues unique 64-bit IDs (snowflake-style: time, node, sequence) over
HTTP and gRPC, never a duplicate: each process leases its node ID from a
registry (SQLite on one host, etcd or PostgreSQL for a fleet) and keeps a
durable horizon, so that a restart with a clock behind or a crash never
repeats an ID. It also serves plain increasing IDs per business tag from
database ranges (segment mode) and encrypted fixed-length order numbers.

This package holds the flurry server and command-line tool, its TLS and
gRPC modules (loaded only when used), a hardened systemd unit (flurry.service,
and flurry@.service for several processes on one host) and the
configuration /etc/flurry/flurry.toml.")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${FLURRY_DEB_DIR}/postinst ${FLURRY_DEB_DIR}/prerm ${FLURRY_DEB_DIR}/postrm
    ${FLURRY_DEB_DIR}/conffiles)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libflurry-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What a consumer's build against the static libraries needs beyond a C++20 compiler: SQLite
# (find_dependency(SQLite3) in flurryConfig.cmake, Requires: sqlite3 in flurry.pc). libpq and
# OpenSSL are loaded at run time only when used (their symbols are the libraries' own
# trampolines), and the installed headers include only the standard library and each other.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libsqlite3-dev")
# What a consumer's program opens at run time when it uses it: libcrypto (libssl3) for order
# numbers' AES, libpq (libpq5) for the PostgreSQL registry and segment store, the etcd module
# lib/flurry/flurry_etcd.so (the flurry package) for the etcd registry and the TLS module
# lib/flurry/flurry_tls.so for https:// endpoints. Each is refused with
# an error naming it when missing, so none is a hard dependency.
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "libssl3")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libpq5, flurry")
set(CPACK_DEBIAN_DEV_DESCRIPTION
   "distributed unique-ID service (development files)
flurry issues unique 64-bit IDs (snowflake-style: time, node, sequence) and
never a duplicate, by leasing node IDs from a registry and keeping a durable
horizon across restarts and clock steps.

This package holds the headers and static libraries of flurry's library
(flurry::core, flurry::order and the other public targets), with its CMake
package configuration (find_package(flurry)) and pkg-config files (flurry.pc,
flurry-order.pc, and flurry-client.pc for the C++ client).")

include(CPack)
