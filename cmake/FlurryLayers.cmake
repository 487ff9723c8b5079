# flurry_include_roots(TARGET): the include roots of one library of src/ (docs/architecture.md,
# "Layers"). Each library sees
#   - its own folder, privately: its private headers, spelled relative to it ("monitor.h");
#   - its own include/ folder, publicly (build tree only; nothing there is installed): the headers
#     the layers above may use, spelled "<library>/<header>.h" ("service/service.h").
# Nothing else of src/: another library's headers come only through target_link_libraries(),
# and only its include/ folder, so an include of a private header of another library, or of a
# library this one does not link, does not compile. tools/check-layers.py checks the same rule on
# the sources, and that every arrow points down.
function(flurry_include_roots target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE
                               $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
    return()
  endif()
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    if(type STREQUAL "MODULE_LIBRARY" OR type STREQUAL "EXECUTABLE")
      target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    else()
      target_include_directories(${target} PUBLIC
                                 $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
    endif()
  endif()
endfunction()
