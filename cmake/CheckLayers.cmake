# Fails (FATAL_ERROR) when a layer includes a higher one (docs/architecture.md):
#   schedules/ may include schedules/
#   filters/   may include schedules/, filters/
#   pipeline/  may include schedules/, filters/, pipeline/ (never apps/)
# Looks at every #include of a cbi path, "..." or <...>, with or without the
# installed cbi/ prefix or ../ steps. Argument: CBI_SOURCE_DIR.
# Run by the build before the layers compile, and by ctest (layers).
set(layers schedules filters pipeline apps)
set(bad "")
foreach(layer schedules filters pipeline)
  list(FIND layers ${layer} rank)
  file(GLOB_RECURSE files RELATIVE "${CBI_SOURCE_DIR}" "${CBI_SOURCE_DIR}/${layer}/*")
  list(SORT files)
  foreach(file IN LISTS files)
    if(NOT file MATCHES "\\.(h|hpp|cuh|c|cc|cpp|cu)$")
      continue()
    endif()
    file(STRINGS "${CBI_SOURCE_DIR}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*$" "\\1" path "${line}")
      string(REGEX REPLACE "^(\\.\\./|\\./)+" "" path "${path}")
      string(REGEX REPLACE "^cbi/" "" path "${path}")
      string(REGEX MATCH "^[^/]+" top "${path}")
      list(FIND layers "${top}" included_rank)
      if(included_rank GREATER rank)
        list(APPEND bad "${file} includes ${path} (${layer}/ must not include ${top}/)")
      endif()
    endforeach()
  endforeach()
endforeach()
list(LENGTH bad count)
if(count GREATER 0)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "cbi layers (schedules <- filters <- pipeline <- apps): "
                      "${count} forbidden includes:\n  ${text}")
endif()
message(STATUS "cbi layers: no layer includes a higher one")
