# ci/lib.sh: shared helpers for the scripts in ci/ (sourced, not run).
# Puts the shell in the repository root and sets the build environment every script needs.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT="$(pwd)"
# The environment to build into and test: .venv (the default Python, 3.11), or another one named
# by DYNAMO_VENV (ci/test uses .venv312 for CPython 3.12). Each non-default environment gets its
# own cargo target directory and log directory, so the builds for two Pythons do not invalidate
# each other's pyo3 configuration.
VENV="${DYNAMO_VENV:-$REPO_ROOT/.venv}"
[[ "$VENV" = /* ]] || VENV="$REPO_ROOT/$VENV"
VENV_TAG="$(basename "$VENV")"
VPY="$VENV/bin/python"
LOG_DIR="$REPO_ROOT/target/ci-logs"
if [[ "$VENV_TAG" != .venv ]]; then
    LOG_DIR="$REPO_ROOT/target/ci-logs/${VENV_TAG#.}"
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_ROOT/target/${VENV_TAG#.}}"
fi

# find_python X.Y: prints an interpreter for CPython X.Y (pythonX.Y on PATH, else pyenv's
# newest X.Y.*), or nothing.
find_python() {
    local ver="$1" cand
    local root="${PYENV_ROOT:-$HOME/.pyenv}"
    # A pyenv shim on PATH may not resolve (the version is installed but not selected): each
    # candidate must run and report the version asked for.
    for cand in "$(command -v "python$ver" 2>/dev/null)" \
        $(ls -d "$root/versions/$ver".* 2>/dev/null | sort -V -r | sed "s|\$|/bin/python$ver|"); do
        if [[ -n "$cand" && -x "$cand" ]] \
            && "$cand" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$ver'.split('.'))))" 2>/dev/null; then
            echo "$cand"
            return
        fi
    done
}

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
