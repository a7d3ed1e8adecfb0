# Multi-host integration tests (label `multihost`): collectives_test's process
# matrix on 2 and 3 emulated hosts x 2 ranks (network namespaces joined by a
# bridge, scripts/netns_testbed.sh), every collective and p2p case at count
# 1023 over 4 KiB chunks (several chunks per message, so pipelines cross the
# network), ~3-5 s each. multihost_test.sh checks which transports carried the
# traffic and exits 77 (SKIPPED, with the reason) where namespaces cannot be
# created (not root).
if(NOT TARGET loomrun OR NOT TARGET collectives_test)
  return()
endif()
set(LOOM_MULTIHOST_DRIVER ${CMAKE_CURRENT_SOURCE_DIR}/multihost_test.sh)
set(LOOM_TESTBED ${PROJECT_SOURCE_DIR}/scripts/netns_testbed.sh)
set(LOOM_MULTIHOST_ARGS --gtest_filter=Process* --large-count=0 --only-count=1023)
# name | hosts | transports expected to carry the traffic | environment (+ separated)
set(LOOM_MULTIHOST_CASES
  "h2.shm_tcp|2|shm,tcp|LOOM_UCX_DISABLE=1+LOOM_IB_DISABLE=1"
  "h3.shm_tcp|3|shm,tcp|LOOM_UCX_DISABLE=1+LOOM_IB_DISABLE=1"
  "h2.tcp|2|tcp|LOOM_TRANSPORT=tcp"
  "h3.tcp|3|tcp|LOOM_TRANSPORT=tcp+LOOM_NSOCKS=3")
if(TARGET loom_transport_ucx)
  # The policy's default: shared memory within a host, UCX between hosts
  # (no RDMA device here); and UCX for every peer, over its TCP transport.
  list(APPEND LOOM_MULTIHOST_CASES
    "h2.default|2|shm,ucx|UCX_TLS=tcp,self"
    "h3.ucx|3|ucx|LOOM_TRANSPORT=ucx+UCX_TLS=tcp,self")
endif()
foreach(case ${LOOM_MULTIHOST_CASES})
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 name)
  list(GET fields 1 hosts)
  list(GET fields 2 expect)
  list(GET fields 3 env)
  string(REPLACE "+" ";" env "${env}")
  set(test multihost.${name})
  add_test(NAME ${test} COMMAND bash ${LOOM_MULTIHOST_DRIVER} ${LOOM_TESTBED} $<TARGET_FILE:loomrun> ${hosts} 2
           ${expect} $<TARGET_FILE:collectives_test> ${LOOM_MULTIHOST_ARGS})
  set_tests_properties(${test} PROPERTIES ENVIRONMENT "LOOM_CHUNK_SIZE=4096;${env}" LABELS "multihost"
                       TIMEOUT 100 SKIP_RETURN_CODE 77 PROCESSORS 2)
endforeach()
