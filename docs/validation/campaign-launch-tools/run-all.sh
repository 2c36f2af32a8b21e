# run-all.sh TAG [VARIANT...]: every variant (or those named), in order; output in $CL/out/<variant>.<TAG>.txt.
# CHECKOUT=<the code under test> (default: this checkout). Run setup.sh once first, as root.
T=$(cd "$(dirname "$0")" && pwd); . "$T/common.sh"; tag=$1; shift
mkdir -p $CL/out
r() { local name=$1; shift; [ $# -gt 0 ] || return; echo "=== $name"; (cd "$CHECKOUT"; "$@") > $CL/out/$name.$tag.txt 2>&1; }
py() { $PY "$T/$1" "${@:2}"; }
declare -A V=(
 [P1]="py pickles.py $CL/pk1" [P10]="py P10.py $CL/pk2" [T4]="py T4.py"
 [G-setsid]="bash $T/G.sh setsid" [G-doublefork]="bash $T/G.sh doublefork" [G-spin-setsid]="bash $T/G.sh spin-setsid"
 [T1]="bash $T/T.sh partition=gpu\ --exclusive\ --time=0" [T2]="bash $T/T.sh partition=gрu,gres=gpu:٣"
)
for p in hangs-after python2-like noexec adir loop1 backgrounds echo-fake banner; do V[A-$p]="bash $T/A.sh $CL/py/$p"; done
all=(J1 J2 J3 J4 J5 J6 J7 J8 J9 J10 J11 J12 J13 J14 P1 P10 G-setsid G-doublefork G-spin-setsid G3 G4 G5 W1 W2 W3 W4 W5 W6
     A-hangs-after A-python2-like A-noexec A-adir A-loop1 A-backgrounds A-echo-fake A-banner A-newline A-spaces A-python3
     T1 T2 T3 T3b T4 T6 S1 S2 S3 S4 M1 M2 M3 M4 M5)
for v in "${@:-${all[@]}}"; do
  rm -rf $CL/pk1 $CL/pk2
  case $v in
    A-newline) r $v bash $T/A.sh "$CL/py/with newline
python" ;;
    A-spaces) r $v bash $T/A.sh "$CL/my venv/bin/python" ;;
    T6) r $v bash $T/T.sh 'partition=$(touch '$CL/w/pwned'),name=$(id)' ;;
    A-python3) r $v bash $T/A.sh /usr/bin/python3 ;;
    T3) r $v bash $T/T.sh "partition=$(head -c 100000 /dev/zero | tr '\0' a)" ;;
    *) if [ -n "${V[$v]}" ]; then eval r $v ${V[$v]}; else r $v bash $T/$v.sh; fi ;;
  esac
done
echo done
