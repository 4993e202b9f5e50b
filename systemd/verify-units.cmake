# Runs systemd-analyze verify on the generated units, with ExecStart pointed at the built binary
# (verify checks that the executable exists).
file(MAKE_DIRECTORY ${DIR}/verify)
foreach(unit hostprep.service hostprep-prepare.service)
  file(READ ${DIR}/${unit} text)
  string(REPLACE "${SBINDIR}/hostprep" "${BINARY}" text "${text}")
  file(WRITE ${DIR}/verify/${unit} "${text}")
endforeach()
execute_process(COMMAND ${ANALYZE} verify --man=no ${DIR}/verify/hostprep.service ${DIR}/verify/hostprep-prepare.service
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
# Dependencies that do not exist on a build machine (kubelet, nvidia services) are not errors.
string(REGEX REPLACE "[^\n]*(kubelet|nvidia-persistenced|nvidia-fabricmanager)[^\n]*\n?" "" err "${err}")
string(STRIP "${err}" err)
if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
  message(FATAL_ERROR "systemd-analyze verify: rc=${rc}\n${out}\n${err}")
endif()
