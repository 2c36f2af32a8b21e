# usage: T.sh TARGET... -- gpubench fleet --cluster slurm (stand-in sbatch) with these --target values; the #SBATCH lines sent
. "$(dirname "$0")/common.sh"; mkdir -m 700 $W/home; export PATH=$T/fakeslurm:$PATH
args=(); for t in "$@"; do args+=(--target "$t"); done
timeout 60 "${FL[@]}" --cluster slurm --store $W/S --jobs-dir $W/home/jobs "${args[@]}" > $W/log 2>&1; echo "exit $?"
grep -v "^    " $W/log | cut -c1-250; grep -h "^#SBATCH --\(partition\|gres\|constraint\|nodelist\|job-name\)" $W/sbatch-*.sh 2>/dev/null | cut -c1-200
ls $W/pwned 2>/dev/null && echo "a command in a value ran" || echo "no command ran"
