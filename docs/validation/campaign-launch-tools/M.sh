# helpers for the team-store variants: a store as docs/usage.md sets one up (root:65533, 3770)
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mkdir $W/store; chown root:65533 $W/store; chmod 3770 $W/store; mkdir -m 777 $W/nbhome; chmod 777 $W/nbhome
M=$($PY -c "from gpubench.harness.records.store import machine_folder_name; from gpubench.harness.devices.env import machine_identity; print(machine_folder_name(machine_identity()))")
# the member's python: Debian's 3.11 with the shared venv's packages (the venv's own python lives under /root)
RUNNB=(/usr/bin/python3.11 -m gpubench.harness.commands.cli run --device cpu --profile smoke -k "matmul and fp32-n64" --no-report)
NBRUN() { ( export HOME=$W/nbhome MPLCONFIGDIR=$W/nbhome PYTHONPATH=$PWD:$($PY -c "import site; print(site.getsitepackages()[0])"); "${NB[@]}" "$@" ); }
