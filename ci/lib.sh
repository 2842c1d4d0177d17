# ci/lib.sh: shared helpers for the scripts in ci/ (sourced, not run).
# Puts the shell in the repository root and sets the build environment every script needs.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT="$(pwd)"
VENV="$REPO_ROOT/.venv"
VPY="$VENV/bin/python"
LOG_DIR="$REPO_ROOT/target/ci-logs"

# Debian's LLVM 19 lives here; llvm-sys (under inkwell) looks for it through this variable.
if [[ -z "${LLVM_SYS_191_PREFIX:-}" ]]; then
    if command -v llvm-config-19 >/dev/null 2>&1; then
        LLVM_SYS_191_PREFIX="$(llvm-config-19 --prefix)"
    else
        LLVM_SYS_191_PREFIX=/usr/lib/llvm-19
    fi
    export LLVM_SYS_191_PREFIX
fi
# pyo3 builds against the venv's interpreter in both `maturin develop` and `cargo test`, so the two
# builds share pyo3's build configuration instead of invalidating each other.
if [[ -x "$VPY" ]]; then
    export PYO3_PYTHON="$VPY"
fi

# One line per step, prefixed with the script name and the elapsed time.
_CI_T0=$SECONDS
step() { printf '[%s %4ds] %s\n' "$(basename "$0")" "$((SECONDS - _CI_T0))" "$*"; }

# run_logged NAME CMD...: run CMD with its output in $LOG_DIR/NAME.log; on failure print the
# log's tail and return CMD's exit status.
run_logged() {
    local name="$1"; shift
    mkdir -p "$LOG_DIR"
    local log="$LOG_DIR/$name.log"
    local rc=0
    "$@" >"$log" 2>&1 </dev/null || rc=$?
    if ((rc != 0)); then
        echo "---- $name failed (exit $rc): last 150 lines of ${log#"$REPO_ROOT"/} ----" >&2
        tail -n 150 "$log" >&2
        echo "---- end of $name log ----" >&2
    fi
    return "$rc"
}
