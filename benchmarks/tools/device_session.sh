# Sourced by the prepared scripts for a GPU machine (benchmarks/speed/gpu_session.sh,
# benchmarks/studies/paper_recipes/gpu_session.sh) from the repository root, with DRY set (1: a dry run
# here, on the CPU): PYTHON (the venv's in a dry run, else the machine's python3), the package from the
# tree on PYTHONPATH, and install_wheels DIR.

if [ -z "${PYTHON:-}" ]; then
    if [ "${DRY:-0}" = 1 ] && [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# install_wheels DIR: the carried wheels of DIR (nltk, conllu, joblib: the machine's own Python has torch
# and transformers only) into a fresh folder put on PYTHONPATH; status 1 when DIR holds none
install_wheels() {
    ls "$1"/*.whl >/dev/null 2>&1 || return 1
    local site
    site=$(mktemp -d /tmp/device-site.XXXXXX)
    timeout 120 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "$1"/*.whl
    export PYTHONPATH="$PYTHONPATH:$site"
}
