# Source this first in a command of the device tool (a bare GPU machine, docs/performance.md):
# the carried wheels (.whl: PyAV, PyNvVideoCodec, onnx2torch, pydantic, shapely, py-spy, ...)
# into /tmp/site, this tree built into /tmp/b-site, and the assets carried in .gpuassets.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || return 1
python3 -m pip install -q --upgrade --no-index --no-deps --no-build-isolation --no-compile \
    --target /tmp/b-site . || return 1
export PYTHONPATH=/tmp/b-site:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 \
    VAPIPE_ASSETS=$PWD/.gpuassets VAPIPE_OFFLINE=1
