#!/bin/bash
# The lab VM's command with the topology probe first:
# vm-command.sh PROBE MARK COMMAND
# The host splits the output at MARK: the probe's report before it, the
# command's output after it.
bash "${1:?usage: vm-command.sh PROBE MARK COMMAND}"
echo "${2:?}"
exec bash -c "${3:?}"
