# Builds the TypeScript client in the build tree (run by the client_typescript_build test):
# copies the package into DEST, installs the dev tools pinned by package-lock.json, compiles.
#   cmake -DSOURCE=<clients/typescript> -DDEST=<dir> -DNPM=<npm> -DNPX=<npx> -P build.cmake
foreach(var SOURCE DEST NPM NPX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "build.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${DEST}/src ${DEST}/tests ${DEST}/dist)
file(MAKE_DIRECTORY ${DEST})
file(COPY ${SOURCE}/package.json ${SOURCE}/package-lock.json ${SOURCE}/tsconfig.json ${SOURCE}/src
          ${SOURCE}/tests DESTINATION ${DEST})
execute_process(COMMAND ${NPM} ci --no-audit --no-fund --loglevel=error WORKING_DIRECTORY ${DEST}
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${NPX} --no-install tsc WORKING_DIRECTORY ${DEST} COMMAND_ERROR_IS_FATAL ANY)
