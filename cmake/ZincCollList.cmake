# The collective list (src/abi/coll_list.h) as the test lists need it, read at configure time so
# that a row added there adds its tests here. Every row is one line
#   X(id, name, api, bench, reduces, rooted, send, recv, kernel, ring, sendrecv, zc, bus) \
# (the header says what each column means). Sets, in the list's order, the benchmark names
# (the bench column: zinc-perf's and nccl-tests' names, e.g. all_reduce):
#   ZINC_COLL_BENCHES            every row's but none
#   ZINC_COLL_BENCHES_RING       rows that ring kernels run on the GPU (ring 1)
#   ZINC_COLL_BENCHES_ALLREDUCE  rows of each GPU kernel family (kernel ALLREDUCE, DIRECT, P2P)
#   ZINC_COLL_BENCHES_DIRECT
#   ZINC_COLL_BENCHES_P2P
# and zinc_coll_check(name...), which stops the configuration at a name that is no benchmark
# (for the hand-picked subsets). tests/unit/coll_list_test.c checks these lists against the
# header as the compiler reads it.

# (cmake -DZINC_COLL_LIST_H=FILE -P this file reads another header: tests/unit checks that one
# without rows stops the configuration.)
if(NOT ZINC_COLL_LIST_H)
  set(ZINC_COLL_LIST_H ${CMAKE_SOURCE_DIR}/src/abi/coll_list.h)
endif()
if(NOT CMAKE_SCRIPT_MODE_FILE)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ZINC_COLL_LIST_H})
endif()

file(STRINGS ${ZINC_COLL_LIST_H} zinc_coll_rows REGEX "^[ \t]*X\\(")
# Each row ends in the macro's line continuation, which would escape the list separator.
string(REPLACE "\\" "" zinc_coll_rows "${zinc_coll_rows}")
set(ZINC_COLL_BENCHES)
set(ZINC_COLL_BENCHES_RING)
set(ZINC_COLL_BENCHES_ALLREDUCE)
set(ZINC_COLL_BENCHES_DIRECT)
set(ZINC_COLL_BENCHES_P2P)
foreach(row IN LISTS zinc_coll_rows)
  if(NOT row MATCHES "X\\(([^()]*)\\)")
    message(FATAL_ERROR "${ZINC_COLL_LIST_H}: cannot read the row '${row}'")
  endif()
  string(REPLACE "," ";" fields "${CMAKE_MATCH_1}")
  list(TRANSFORM fields STRIP)
  list(LENGTH fields nfields)
  if(NOT nfields EQUAL 13)
    message(FATAL_ERROR "${ZINC_COLL_LIST_H}: the row '${row}' has ${nfields} columns, not 13")
  endif()
  list(GET fields 3 bench)
  list(GET fields 8 kernel)
  list(GET fields 9 ring)
  if(NOT bench MATCHES "^[a-z_]+$" OR NOT kernel MATCHES "^(ALLREDUCE|DIRECT|P2P)$" OR
     NOT ring MATCHES "^[01]$")
    message(FATAL_ERROR "${ZINC_COLL_LIST_H}: unexpected bench, kernel or ring column in '${row}'")
  endif()
  if(bench STREQUAL "none")
    continue()
  endif()
  list(APPEND ZINC_COLL_BENCHES ${bench})
  list(APPEND ZINC_COLL_BENCHES_${kernel} ${bench})
  if(ring)
    list(APPEND ZINC_COLL_BENCHES_RING ${bench})
  endif()
endforeach()
list(LENGTH ZINC_COLL_BENCHES zinc_coll_nbenches)
if(zinc_coll_nbenches LESS 2)
  message(FATAL_ERROR "${ZINC_COLL_LIST_H}: found ${zinc_coll_nbenches} benchmarks in ZN_COLL_LIST "
                      "(rows are lines that start with X( ); the test lists would be empty")
endif()

function(zinc_coll_check)
  foreach(name ${ARGN})
    if(NOT name IN_LIST ZINC_COLL_BENCHES)
      message(FATAL_ERROR "'${name}' is no benchmark of the collective list (${ZINC_COLL_LIST_H}): "
                          "${ZINC_COLL_BENCHES}")
    endif()
  endforeach()
endfunction()
