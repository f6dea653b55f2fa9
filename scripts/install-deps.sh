#!/usr/bin/env bash
# Installs what building and testing Tessera needs, and only what is missing.
#
#   scripts/install-deps.sh            Debian packages: compiler, CMake, Ninja, MLIR/LLVM 22, ONNX, CBC, GoogleTest, nlohmann-json,
#                                      clang 22 with its sanitizer and libFuzzer runtimes (scripts/fuzz.sh),
#                                      and a Python venv (at $TESSERA_VENV, default <repo>/.venv) holding the
#                                      header-only cuDNN frontend, which the CUDA runtime's attention builds on
#   scripts/install-deps.sh --python   the same, plus onnx, onnxruntime and numpy in the venv, for the scripts
#                                      that build ONNX test models and for tests that compare against onnxruntime
#
# Every check is local (dpkg and the venv's package metadata), so a run that finds everything in
# place touches no network, takes well under two seconds and prints the single line
# "dependencies present". Package lists are refreshed only when something has to be installed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${TESSERA_VENV:-$repo/.venv}"

usage() {
  sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

want_python=0
for arg in "$@"; do
  case "$arg" in
    --python) want_python=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

system_packages=(
  cmake ninja-build g++
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  coinor-libcbc-dev pkg-config libgtest-dev nlohmann-json3-dev
  clang-22 libclang-rt-22-dev
  python3 python3-venv
)
# onnx is pinned to the minor version whose IR (10) and opset (20) the test models use.
python_requirements=('onnx==1.23.*' onnxruntime numpy)
# Only its headers are used (include/ in the wheel), so none of its Python dependencies.
cudnn_frontend='nvidia-cudnn-frontend==1.32.0'

# "dpkg -s" also succeeds for a package that was removed but left its configuration files
# behind, so the status line itself is what tells an installed package apart.
is_installed() {
  dpkg -s "$1" 2>/dev/null | grep -qx 'Status: install ok installed'
}

# Root runs apt-get directly (CI, containers); anyone else goes through sudo.
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  else
    sudo "$@"
  fi
}

# Reads the installed versions from package metadata instead of importing the modules:
# importing onnxruntime alone takes longer than the whole fast path is allowed to.
venv_is_complete() {
  [[ -x "$venv/bin/python" ]] || return 1
  "$venv/bin/python" - <<'EOF' 2>/dev/null
from importlib.metadata import version, PackageNotFoundError
try:
    ok = version("onnx").startswith("1.23.") and version("onnxruntime") and version("numpy")
except PackageNotFoundError:
    ok = False
raise SystemExit(0 if ok else 1)
EOF
}

frontend_is_installed() {
  [[ -x "$venv/bin/python" ]] || return 1
  "$venv/bin/python" -c "
from importlib.metadata import version
raise SystemExit(0 if version('nvidia-cudnn-frontend') == '${cudnn_frontend#*==}' else 1)" 2>/dev/null
}

missing=()
for package in "${system_packages[@]}"; do
  is_installed "$package" || missing+=("$package")
done

python_missing=0
if [[ $want_python -eq 1 ]] && ! venv_is_complete; then
  python_missing=1
fi

frontend_missing=0
frontend_is_installed || frontend_missing=1

if [[ ${#missing[@]} -eq 0 && $python_missing -eq 0 && $frontend_missing -eq 0 ]]; then
  echo "dependencies present"
  exit 0
fi

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps.sh: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ $python_missing -eq 1 || $frontend_missing -eq 1 ]]; then
  # The system interpreter, whose venv module python3-venv provides, not whichever python3 is first on PATH.
  [[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv "$venv"
fi

if [[ $frontend_missing -eq 1 ]]; then
  echo "install-deps.sh: putting the cuDNN frontend's headers in the venv at $venv ($cudnn_frontend)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$cudnn_frontend"
  frontend_is_installed || { echo "install-deps.sh: $cudnn_frontend did not install into $venv" >&2; exit 1; }
fi

if [[ $python_missing -eq 1 ]]; then
  echo "install-deps.sh: setting up the Python venv at $venv (${python_requirements[*]})"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${python_requirements[@]}"
  venv_is_complete || { echo "install-deps.sh: the venv at $venv is still incomplete" >&2; exit 1; }
fi

echo "install-deps.sh: done"
