# Sourced by every variant: CHECKOUT (the code under test), CL (scratch, default /tmp/cl), PY (the venv's python).
T=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CHECKOUT=${CHECKOUT:-$(cd "$T/../../.." && pwd)}; CL=${CL:-/tmp/cl}; export CL
PY=${PY:-/work/main/.venv/bin/python}
cd "$CHECKOUT"; export PYTHONPATH=$PWD MPLCONFIGDIR=$CL/mpl
FL=($PY -m gpubench.harness.commands.cli fleet --profile smoke --device cpu -k "matmul and fp32-n64")
RUN=($PY -m gpubench.harness.commands.cli run --device cpu --profile smoke -k "matmul and fp32-n64" --no-report)
AB=($PY -m gpubench.harness.commands.cli ab --device cpu --profile smoke --pairs 3 -k "matmul and fp32-n64")
NB=(setpriv --reuid=65534 --regid=65534 --groups=65533)   # nobody, a member of the team group gbteam (65533)
W=$CL/w; rm -rf $W; mkdir -p $W; chmod 755 $W
