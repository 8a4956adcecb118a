"""A Responses request's walk through the package (docs/architecture.md#following-a-request).

``scripts/request_walk.py`` records the package files one request enters from the HTTP edge until the
executor's ``generate``. Here: the walk reaches the executor, starts at the edge, and no call climbs from a
lower layer into a higher one by a name it imports (a layer hands results up by returning them, or through
a callback it was given: a streamed run's ``deliver``); and the recorder itself tells a climb from a callback.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest
from support.paths import ROOT


@pytest.fixture(scope="module")
def request_walk() -> ModuleType:
    spec = importlib.util.spec_from_file_location("request_walk", ROOT / "scripts" / "request_walk.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["request_walk"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("stream", [False, True])
async def test_a_request_walks_down_the_layers_to_the_executor(
    request_walk: ModuleType, stream: bool
) -> None:
    walk = await request_walk.walk(stream)
    assert walk.done
    assert walk.files[0].startswith("server/")
    assert walk.files[-1] == "executors/echo.py"
    assert walk.climbs == []
    # The loop's stepper (core/loop_steps.py) resumes the item passes the layers above hand it, as the event loop
    # resumes their coroutines: a driver, not a climb. Besides it, streamed, the run hands each step's events to
    # the writer the transport gave it, and nothing else.
    handed = {pair for pair in walk.callbacks if pair[0] != "core/loop_steps.py"}
    assert {callee for caller, callee in walk.callbacks if caller == "core/loop_steps.py"} <= {
        "adapter/adapter.py",
        "request/protocol.py",
        "responses/prepare.py",
        "responses/rendering.py",
        "responses/sealing.py",
        "harmony/render_pool.py",
        "adapter/item_renders.py",
        "core/loop_steps.py",
    }
    assert handed <= {("responses/generation.py", "server/responses.py")}
    assert bool(handed) == stream


def test_the_recorder_sees_a_climb(request_walk: ModuleType) -> None:
    assert request_walk.layer_of("core/ids.py") < request_walk.layer_of("server/router.py")
    recorder = request_walk.Walk()
    recorder.recording = True
    low = compile("def low(f):\n    return f()\n", str(request_walk.PACKAGE / "core" / "x.py"), "exec")
    high = compile("def high():\n    return 1\n", str(request_walk.PACKAGE / "server" / "y.py"), "exec")
    names: dict[str, object] = {}
    exec(low, names)
    exec(high, names)
    sys.setprofile(recorder.hook)
    try:
        names["low"](names["high"])  # type: ignore[operator]
    finally:
        sys.setprofile(None)
    assert recorder.files == ["core/x.py", "server/y.py"]
    assert recorder.climbs == [("core/x.py", "server/y.py")]  # ``low``'s module names ``high``: a climb
    recorder = request_walk.Walk()
    recorder.recording = True
    handed = {"low": names["low"]}
    exec(
        compile("def high():\n    return 2\n", str(request_walk.PACKAGE / "server" / "y.py"), "exec"), handed
    )
    del names["high"]  # ``low``'s module no longer names it: handed over, a callback
    sys.setprofile(recorder.hook)
    try:
        names["low"](handed["high"])  # type: ignore[operator]
    finally:
        sys.setprofile(None)
    assert recorder.climbs == []
    assert recorder.callbacks == [("core/x.py", "server/y.py")]
