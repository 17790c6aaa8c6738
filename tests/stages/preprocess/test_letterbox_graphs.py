"""The letterbox of decoder pictures by one captured graph per batch and picture size
(stages/lazy_graphs.py, stages/preprocess/torch_letterbox.py). No GPU here: a stand-in for
capture (tests/fakes/graphs.py) writes nothing until a replay, as CUDA does. What is tested
is ours: the same batch as op by op, one capture per size, the input buffer shared per picture
size, the output cloned out of the graph, and graphs turned off (with the batch still right)
where a replay differs or capture fails."""

from __future__ import annotations

import logging

import pytest

from tests.stages.preprocess.test_yuv import i420_frames
from vapipe.pipeline.device_picture import DeviceNV12, i420_to_nv12

torch = pytest.importorskip("torch")

from tests.fakes.graphs import StandInGraphs  # noqa: E402
from vapipe.stages.lazy_graphs import LazyGraphs  # noqa: E402
from vapipe.stages.preprocess.cl_kernel import TensorSpec  # noqa: E402
from vapipe.stages.preprocess.torch_letterbox import TorchLetterbox  # noqa: E402

CPU = torch.device("cpu")


def pictures(count: int, clip: str = "people") -> list[DeviceNV12]:
    planes = i420_frames(clip, count)
    return [DeviceNV12(torch.from_numpy(i420_to_nv12(p)), None, k, 1) for k, p in enumerate(planes)]


def fronts(graphs: LazyGraphs | None) -> TorchLetterbox:
    front = TorchLetterbox(TensorSpec(416, 416, "top-left", False, 1.0), torch, CPU, max_batch=4)
    front.graphs = graphs
    return front


def test_batches_by_graph_are_the_op_by_op_batches_one_capture_per_size() -> None:
    graphs = StandInGraphs(torch)
    graphed, plain = fronts(graphs), fronts(None)
    people, horses = pictures(4), pictures(3, "horses")
    batches = [people[:3], people[1:4], people[:1], horses[:3], horses[1:3], people[:3]]
    results = []
    for batch in batches:
        got, expected = graphed.submit(batch), plain.submit(batch)
        results.append(graphed.result(got))
        assert torch.equal(results[-1], plain.result(expected))
        assert got.letterboxes == expected.letterboxes and got.pictures == tuple(batch)
    rows = people[0].shape
    assert graphs.captured == [(3, *rows), (1, *rows), (3, *horses[0].shape), (2, *horses[0].shape)]
    assert graphs.replays == 2 and graphs.stats()["graphs"] == 4
    # The graphs of one picture size read the first rows of one input buffer.
    assert len(graphed._inputs) == 2
    three, one = graphs._graphs[(3, *rows)][1], graphs._graphs[(1, *rows)][1]
    assert three.data_ptr() == one.data_ptr() and three.shape[0] == 3
    # Each batch is its own tensor: a later replay of the same graph leaves it as it was.
    assert torch.equal(results[0], plain.result(plain.submit(batches[0])))
    assert results[0].data_ptr() != results[-1].data_ptr()


@pytest.mark.parametrize(
    ("fault", "said"),
    [("wrong", "a replay differed from the same call run op by op"),
     ("fail", "capture failed (operation not permitted when stream is capturing)")],
)  # fmt: skip
def test_a_replay_that_differs_or_a_failed_capture_turns_graphs_off_the_batch_stays_right(
    fault: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    graphs = StandInGraphs(torch, **{fault: True})
    graphed, plain = fronts(graphs), fronts(None)
    batch = pictures(2)
    with caplog.at_level(logging.WARNING):
        got = graphed.result(graphed.submit(batch))
    assert torch.equal(got, plain.result(plain.submit(batch)))
    assert not graphs.enabled and graphs.stats()["graphs"] == 0
    assert said in caplog.text and "running op by op" in caplog.text
    again = graphed.result(graphed.submit(batch))  # op by op from now on: no capture
    assert torch.equal(again, got) and len(graphs.captured) == (fault == "wrong")
    assert graphs.replays == 0
    assert graphs.run("any", print, print, print) is None  # nothing is called once off


def test_host_frames_and_mixed_batches_are_never_graphed() -> None:
    """Graphs take whole batches of decoder pictures of one size: host I420 frames, or a
    batch mixing them, run op by op."""
    graphs = StandInGraphs(torch)
    graphed, plain = fronts(graphs), fronts(None)
    host = i420_frames("people", 2)
    for batch in ([host[0], host[1]], [pictures(1)[0], host[1]]):
        got = graphed.result(graphed.submit(batch))
        assert torch.equal(got, plain.result(plain.submit(batch)))
    assert graphs.captured == [] and graphs.replays == 0


def test_the_preprocess_stats_say_how_many_graphs_ran() -> None:
    from vapipe.stages.preprocess.stage import PreprocessStage

    stage = PreprocessStage("pre", PreprocessStage.Config(backend="torch"))
    stage.front = fronts(StandInGraphs(torch))
    stage.device_name = "torch cpu"
    stage.front.result(stage.front.submit(pictures(2)))
    stage.front.result(stage.front.submit(pictures(2)))
    assert stage.stats() == {"device": "torch cpu", "graphs": 1, "graph_replays": 1,
                             "graphs_on": True}  # fmt: skip


def test_a_picture_with_an_event_is_waited_for_on_the_letterbox_stream_one_without_is_not() -> None:
    """A producer that hands pictures on unfinished gives each an event (``ready``): the
    letterbox's stream waits for it before it reads. The decoders' pictures are finished and
    carry none: no wait."""
    waited: list[object] = []
    front = fronts(None)
    front.stream = type("Stream", (), {"wait_event": lambda self, event: waited.append(event)})()
    finished, unfinished = pictures(2)
    unfinished.ready = event = object()
    tensors = front._readable([finished, unfinished, finished])
    assert waited == [event]
    assert [t.data_ptr() for t in tensors] == [p.tensor.data_ptr() for p in
                                               (finished, unfinished, finished)]  # fmt: skip
    front.stream = None  # where the device has no streams (the CPU): nothing to wait on
    front._readable([unfinished])
    assert waited == [event]
