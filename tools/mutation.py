"""Mutation testing of the modules named in issue 28: does a small deliberate bug in each make
some test fail? cosmic-ray (``pip install cosmic-ray``) mutates each module in place, one
mutant at a time (a comparison turned, a number changed, a ``not`` dropped, ...), and runs the
module's own tests against it; a mutant no test notices is a missing test.

    .venv/bin/python tools/mutation.py                      # every module below
    .venv/bin/python tools/mutation.py stages/events/outbox.py

It writes ``tools/results/mutation.md`` (kill rate per module, every survivor with its line
and diff) and ``tools/results/mutation.json``. Each module runs with the tests listed for it
(a lower bound: the whole suite may kill more). Files are mutated in place and restored by
cosmic-ray after each mutant; run it on a clean checkout (it refuses otherwise), and
``git checkout`` the module if it is ever interrupted with SIGKILL. A benchmark-like tool, not a
test: nothing here runs in CI.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "tools/results"

MODULES: dict[str, list[str]] = {
    "stages/source/hardware.py": [
        "tests/stages/source/test_hardware_decode.py",
        "tests/shards/test_shards.py",
    ],
    "stages/source/device_stream.py": [
        "tests/stages/source/test_hardware_decode.py",
        "tests/stages/source/test_device_stream.py",
    ],
    "pipeline/geometry.py": ["tests/pipeline/test_geometry.py", "tests/stages/test_nms.py"],
    "pipeline/object_results.py": [
        "tests/pipeline/test_object_results.py",
        "tests/pipeline/test_detections.py",
    ],
    "stages/infer/backends/registry.py": [
        "tests/stages/infer/backends/test_registry.py",
        "tests/stages/infer/test_backend_config.py",
    ],
    "pipeline/detections.py": ["tests/pipeline/test_detections.py", "tests/stages/test_nms.py"],
    "stages/source/nvdec.py": ["tests/stages/source/test_hardware_decode.py"],
    "stages/source/rocdecode.py": ["tests/stages/source/test_hardware_decode.py"],
    "pipeline/device_picture.py": [
        "tests/stages/source/test_hardware_decode.py",
        "tests/stages/preprocess/test_torch_letterbox.py",
    ],
    "vapipe/shards/plan.py": ["tests/shards/test_shards.py"],
    "stages/sinks/home_assistant.py": ["tests/stages/sinks/test_home_assistant.py"],
    "pipeline/amd_gpus.py": ["tests/pipeline/test_amd_gpus.py"],
    "pipeline/validation.py": [
        "tests/pipeline/test_config.py",
        "tests/pipeline/test_overrides.py",
        "tests/cli/test_typed_errors.py",
    ],
    "pipeline/prepare.py": [
        "tests/pipeline/test_native_stacks.py",
        "tests/cli/test_typed_errors.py",
    ],
    "stages/objects/memory.py": ["tests/stages/objects/test_memory.py"],
    "stages/crops/opencl.py": ["tests/stages/objects/test_cl_crops.py"],
    "stages/crops/cutter.py": ["tests/stages/crops/test_cutter.py"],
    "stages/cl_program.py": ["tests/stages/preprocess/test_device_choice.py"],
    "stages/track/classes.py": [
        "tests/stages/track/test_species.py",
        "tests/stages/track/test_association.py",
    ],
    "stages/crops/warp.py": ["tests/stages/objects/test_crops.py"],
    "stages/objects/gallery.py": ["tests/stages/objects/test_gallery.py"],
    "stages/events/outbox.py": ["tests/stages/events/test_outbox.py"],
    "vapipe/serve/event_hub.py": ["tests/serve/test_event_hub.py"],
    "vapipe/shards/ledger.py": ["tests/shards/test_shard_ledger.py"],
    "stages/events/http_post.py": [
        "tests/stages/events/test_http_post.py",
        "tests/stages/sinks/test_webhook.py",
    ],
    "vapipe/shards/stats.py": [
        "tests/shards/test_shards.py",
        "tests/shards/test_shard_stats.py",
    ],
    "pipeline/urls.py": ["tests/pipeline/test_urls.py"],
    "vapipe/serve/media_roots.py": ["tests/serve/test_service_checks.py"],
    "stages/source/stall.py": ["tests/stages/source/test_live_sources.py"],
    "pipeline/overrides.py": ["tests/pipeline/test_config.py", "tests/pipeline/test_overrides.py"],
    "vapipe/serve/http_api.py": [
        "tests/serve/test_http_api.py",
        "tests/serve/test_http_api_streams.py",
    ],
    "pipeline/outputs.py": ["tests/pipeline/test_outputs.py"],
    "stages/source/timeline.py": ["tests/stages/source/test_timeline.py"],
    "stages/track/bytetrack.py": [
        "tests/stages/track/test_bytetrack.py",
        "tests/stages/track/test_identity.py",
        "tests/stages/track/test_coast.py",
        "tests/stages/track/test_backtrace.py",
        "tests/stages/track/test_association.py",
    ],
    "stages/track/backtrace.py": ["tests/stages/track/test_backtrace.py"],
    "stages/track/appearance.py": ["tests/stages/track/test_appearance.py"],
    "stages/track/edges.py": [
        "tests/stages/track/test_edges.py",
        "tests/stages/track/test_species.py",
        "tests/stages/track/test_identity.py",
    ],
    "stages/track/boxes.py": [
        "tests/stages/track/test_species.py",
        "tests/stages/track/test_bytetrack.py",
        "tests/stages/track/test_identity.py",
        "tests/stages/track/test_coast.py",
    ],
    "stages/analytics/counting.py": [
        "tests/stages/analytics/test_counting.py",
        "tests/stages/analytics/test_crossing_rules.py",
        "tests/stages/analytics/test_unseen_crossings.py",
        "tests/stages/track/test_backtrace.py",
    ],
    "vapipe/serve/runner.py": ["tests/serve/test_service_runner.py"],
    # Issue 31: the Python API (its tests that run in this process: the documented examples'
    # and mypy's take longer than the per-test limit), nms's class-filter check, the hint for
    # a missing package, the licence of a model named by its path.
    "vapipe/api.py": [
        "tests/test_python_api.py::test_the_iterator_yields_what_the_events_sink_writes_in_its_order",
        "tests/test_python_api.py::test_without_empty_frames_only_frames_with_detections_come",
        "tests/test_python_api.py::test_a_graph_without_an_events_sink_still_has_its_events",
        "tests/test_python_api.py::test_in_shards_each_source_s_events_are_the_sink_s",
        "tests/test_python_api.py::test_leaving_the_loop_early_stops_the_run_and_drains_it",
        "tests/test_python_api.py::test_stop_from_another_thread_drains_as_ctrl_c_does",
        "tests/test_python_api.py::test_ctrl_c_during_run_drains_and_the_handler_is_given_back",
        "tests/test_python_api.py::test_an_exception_in_a_user_stage_is_one_line_naming_it",
        "tests/test_python_api.py::test_a_stage_registered_in_user_code_runs_with_its_config",
        "tests/test_python_api.py::test_overrides_are_applied_as_set_would",
        "tests/test_python_api.py::test_a_bad_override_or_config_raises_one_line_naming_it",
        "tests/test_python_api.py::test_a_missing_model_is_an_outcome_with_exit_2",
        "tests/test_python_api.py::test_one_run_at_a_time_and_again_after",
        "tests/test_python_api.py::test_an_override_value_reaches_the_config_as_it_was_given",
        "tests/test_python_api.py::test_an_override_value_that_toml_cannot_hold_is_a_config_error",
        "tests/test_python_api.py::test_the_handoff_gives_up_on_a_reader_that_left",
        "tests/test_python_api.py::test_the_api_is_exported_lazily_from_vapipe",
        "tests/test_python_api.py::test_ok_is_exit_0_and_interrupted_is_exit_130",
        "tests/test_python_api.py::test_by_default_frames_without_detections_are_events_too",
        "tests/test_python_api.py::test_options_are_keywords_only",
        "tests/test_python_api.py::test_shards_log_at_the_level_of_the_callers_vapipe_logger",
        "tests/test_python_api.py::test_a_handler_set_outside_python_is_restored_as_python_s_own",
        "tests/test_python_api.py::test_an_infinite_override_value_keeps_its_sign",
        "tests/test_python_api.py::test_one_frame_is_a_run_and_an_outcome_cannot_be_changed",
        "tests/test_python_api.py::test_without_a_sink_the_events_are_the_last_node_s",
        "tests/test_python_api.py::test_a_model_that_cannot_be_found_offline_never_starts_a_run",
        "tests/test_python_api.py::test_the_events_tap_keeps_no_picture_alive",
        "tests/test_python_api.py::test_a_full_handoff_waits_for_its_reader_and_loses_nothing",
        "tests/test_python_api.py::test_records_from_shards_are_filtered_as_the_events_sink_filters_them",
        "tests/test_python_api.py::test_by_default_frames_without_detections_are_events_too",
    ],
    "stages/nms.py": ["tests/stages/test_nms.py"],
    # Issue 32: rectangular inputs (the rewrite and its check, the size, batching by size)
    # and detecting less often (the schedule, the tracker's gap buffer, lines on detected
    # frames: bytetrack's and counting's parts below).
    "stages/model_input.py": [
        "tests/stages/infer/test_rect.py::test_rect_size_pads_to_the_stride_only",
        "tests/stages/preprocess/test_preprocess.py",
    ],
    "stages/infer/backends/batch_dynamic.py": [
        "tests/stages/infer/backends/test_batch_dynamic.py",
        "tests/stages/infer/test_rect.py::test_yolox_takes_rect_inputs_and_keeps_its_square_as_the_default",
        "tests/stages/infer/test_rect.py::test_a_model_with_its_anchors_fixed_cannot_and_still_batches",
        "tests/stages/infer/backends/test_onnx_runtime.py::test_batch_rewrite_is_verified",
    ],
    "stages/infer/interval.py": ["tests/stages/infer/test_interval.py"],
    "pipeline/errors.py": ["tests/cli/test_missing_packages.py"],
    "pipeline/assets.py": ["tests/cli/test_models_cmd.py"],
    # Issue 33: pictures, clips and the event history.
    "stages/media/files.py": [
        "tests/stages/media/test_media_files.py",
        "tests/stages/sinks/test_media_sinks.py",
        "tests/stages/sinks/test_snapshots.py",
    ],
    "stages/sinks/snapshots.py": ["tests/stages/sinks/test_snapshots.py"],
    "stages/sinks/clips.py": [
        "tests/stages/sinks/test_clips.py",
        "tests/stages/sinks/test_clip_edges.py",
    ],
    "stages/media/drawn_clips.py": [
        "tests/stages/sinks/test_clips.py",
        "tests/stages/media/test_drawn_clips.py",
    ],
    "stages/source/packets.py": [
        "tests/stages/sinks/test_clips.py",
        "tests/stages/source/test_packets.py",
    ],
    "stages/events/store.py": [
        "tests/stages/events/test_history.py",
        "tests/stages/events/test_history_edges.py",
    ],
    "stages/sinks/history.py": [
        "tests/stages/events/test_history.py",
        "tests/stages/sinks/test_history_sink.py",
    ],
    "vapipe/serve/history_api.py": [
        "tests/serve/test_history_api.py",
        "tests/serve/test_history_api_edges.py",
        "tests/serve/test_http_api.py",
    ],
    # Issue 28's 16-stream figure: the letterbox in torch, the preprocess node's choice of
    # it, the infer node's device batch, the torch backend's device input.
    "stages/preprocess/stage.py": [
        "tests/stages/preprocess/test_torch_letterbox.py",
        "tests/stages/preprocess/test_preprocess.py",
        "tests/stages/preprocess/test_device_choice.py",
        "tests/stages/source/test_decoded_planes.py",
    ],
    "stages/infer/stage.py": [
        "tests/stages/preprocess/test_torch_letterbox.py",
        "tests/stages/preprocess/test_opencl.py::test_as_batch_takes_consecutive_views_without_copying",
        "tests/stages/infer/test_as_batch.py",
    ],
    "stages/infer/backends/pytorch.py": ["tests/stages/infer/backends/test_pytorch.py"],
    "stages/infer/backends/fx_rewrites.py": ["tests/stages/infer/backends/test_fx_rewrites.py"],
    "stages/infer/backends/cuda_graphs.py": [
        "tests/stages/infer/backends/test_pytorch.py::test_a_replay_takes_fewer_rows_than_its_graph",
    ],
    # Pictures kept in their decoder's planes and copied once into a front end's staging.
    "stages/source/decoded.py": ["tests/stages/source/test_decoded_planes.py"],
    "pipeline/frame.py": [
        "tests/stages/source/test_decoded_planes.py",
        "tests/stages/preprocess/test_yuv.py",
        "tests/stages/motion/test_motion.py",
    ],
    "stages/motion/stage.py": ["tests/stages/motion/test_motion.py"],
    "stages/preprocess/opencl.py": [
        "tests/stages/preprocess/test_device_choice.py",
        "tests/stages/preprocess/test_yuv.py",
        "tests/stages/preprocess/test_opencl.py",
    ],
    # Issue 47: the model as data, what the graph tells each stage, the one overlap module.
    "stages/infer/model.py": [
        "tests/stages/infer/test_model.py",
        "tests/stages/infer/test_rect.py",
        "tests/stages/infer/test_interval.py",
    ],
    "pipeline/wiring.py": [
        "tests/pipeline/test_wiring.py",
        "tests/stages/preprocess/test_release_pixels.py",
    ],
    "stages/boxes.py": [
        "tests/stages/test_boxes.py",
        "tests/stages/test_nms.py",
        "tests/stages/track/test_association.py",
    ],
    "stages/track/stage.py": [
        "tests/stages/track/test_track_stage.py",
        "tests/stages/track/test_coast.py",
        "tests/stages/track/test_backtrace.py",
        "tests/stages/track/test_bytetrack.py",
    ],
    # Issue 64's new modules and rules.
    "vapipe/serve/previews.py": ["tests/serve/test_previews.py"],
    "stages/media/text.py": ["tests/stages/media/test_text.py"],
    "stages/media/redaction.py": [
        "tests/stages/media/test_redaction.py",
        "tests/stages/redact/test_stage.py",
    ],
    "stages/redact/stage.py": [
        "tests/stages/redact/test_stage.py",
        "tests/pipeline/test_redaction_graph.py",
    ],
    "stages/media/live.py": ["tests/stages/media/test_live.py"],
    "stages/plates/text.py": ["tests/stages/plates/test_text.py"],
    "stages/plates/known.py": ["tests/stages/plates/test_known.py"],
    "stages/plates/ocr.py": ["tests/stages/plates/test_ocr.py"],
    "stages/plates/memory.py": ["tests/stages/plates/test_memory.py"],
    "stages/plates/sightings.py": ["tests/stages/plates/test_memory.py"],
    "stages/plates/reader.py": ["tests/stages/plates/test_reader.py"],
    "stages/plates/stage.py": ["tests/stages/plates/test_reader.py"],
    "pipeline/queues.py": ["tests/pipeline/test_queues.py"],
    "stages/lazy_graphs.py": [
        "tests/stages/test_lazy_graphs.py",
        "tests/stages/preprocess/test_letterbox_graphs.py",
        "tests/stages/infer/test_device_decode.py::test_the_graphed_decode_keeps_exactly_what_op_by_op_keeps",
    ],
    "stages/infer/device_decode.py": ["tests/stages/infer/test_device_decode.py"],
    "pipeline/affinity.py": ["tests/pipeline/test_affinity.py"],
    "stages/preprocess/torch_letterbox.py": [
        "tests/stages/preprocess/test_letterbox_graphs.py",
        "tests/stages/preprocess/test_torch_letterbox.py",
    ],
    "stages/source/stage.py": ["tests/stages/source/test_seconds.py"],
    "stages/sinks/events.py": [
        "tests/stages/sinks/test_events_sink.py",
        "tests/faults/test_one_line_errors.py::test_a_full_disk_says_so",
    ],
    "pipeline/graph.py": [
        "tests/pipeline/test_config.py",
        "tests/pipeline/test_wiring.py",
        "tests/pipeline/test_graph_scale.py::test_a_cycle_through_thousands_of_nodes_names_twelve_and_counts_the_rest",
        "tests/pipeline/test_graph_checks.py",
    ],
}
"""Module -> the tests that cover it (run with -x: the first failure kills the mutant)."""

PARTS: dict[str, tuple[str, ...]] = {
    # What issue 64 made linear: the upstream checks, the order, the neighbours.
    "pipeline/graph.py": (
        "_check_upstream",
        "_covered",
        "_all_through",
        "_uncovered_source",
        "_topological_order",
        "successors",
        "predecessors",
        "_reachable",
    ),
    # The tracker's class votes and merging (what issue 28 names) and issue 30's identity and
    # fragment rules, not its Kalman matching: the whole module is 661 mutants at ~6 s each.
    "stages/track/bytetrack.py": (
        "_vote",
        "_grow_votes",
        "_output",
        "_start",
        "_select",
        "_same_object",
        "_fragments",
        "_at_edge",
        "_correct",
        "coast",
        "_associate",
        "_trace_back",
    ),
    "stages/nms.py": (
        "ClassFilterCheck",
        "process_batch",
        "select_frame",
        "stats",
        "__init__",
        "select",
    ),
    # What issue 61 changed in the runtime's hand-overs and the events sink.
    "pipeline/queues.py": ("put", "put_many", "put_eos"),
    # Issue 61's fewer torch calls a batch: graphs, the head decode's table, the copies.
    "stages/infer/device_decode.py": ("__call__", "_anchors", "_select", "_wanted"),
    "stages/preprocess/torch_letterbox.py": ("_graphed", "_readable", "_padded", "_finished"),
    "stages/source/device_stream.py": ("_copied",),
    "stages/source/stage.py": ("seconds",),
    "stages/sinks/events.py": ("write_all", "_write_lines", "process_batch"),
    "pipeline/errors.py": ("install_hint", "MissingDependencyError"),
    "pipeline/assets.py": ("model_entry_of_file",),
    "stages/preprocess/stage.py": (
        "_chosen_backend",
        "_open_torch",
        "workers",
        "_opencl_gpu_program",
        "_open_opencl",
        "process_batch",
    ),
    "pipeline/frame.py": (
        "luma",
        "copy_picture",
        "contiguous",
        "__post_init__",
        "i420",
        "shape",
        "_yuv",
        "_set_yuv",
    ),
    "stages/preprocess/opencl.py": ("__init__", "submit", "same_shape_runs"),
    "stages/infer/stage.py": ("as_batch", "_as_device_batch", "_detect_one_size"),
    "stages/infer/backends/pytorch.py": ("run_on_device", "_staged"),
    "stages/infer/backends/cuda_graphs.py": ("run",),
}
"""Module -> the functions mutated (default: the whole module)."""


class _NoAnnotations(ast.NodeTransformer):
    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.returns = None
        return self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        node.annotation = ast.Constant(None)
        return self.generic_visit(node)


def _same_without_annotations(module: str, line: int, changed: list[str]) -> bool:
    """Whether the module with ``changed`` applied at ``line`` is the module itself once every
    annotation is dropped (a parameter's on a wrapped signature line, say)."""
    source = (REPO / module).read_text().splitlines()
    if len(changed) < 2 or not 0 < line <= len(source) or source[line - 1] != changed[0][1:]:
        return False
    mutated = [*source[: line - 1], changed[1][1:], *source[line:]]
    try:
        trees = [ast.parse("\n".join(text)) for text in (source, mutated)]
    except SyntaxError:
        return False
    plain = [ast.dump(_NoAnnotations().visit(tree)) for tree in trees]
    return plain[0] == plain[1]


def _annotation_only(changed: list[str], module: str, line: int) -> bool:
    """Whether a mutant changed only annotations: the module with the mutant applied is the
    same program once every annotation is dropped. (A parameter's default on a ``def`` line
    is not an annotation: such a mutant counts.)"""
    return _same_without_annotations(module, line, changed)


def _lines_of(module: str, functions: tuple[str, ...]) -> list[str]:
    """The line ranges ("FIRST-LAST") of the named functions (methods too) and classes in
    ``module``."""
    tree = ast.parse((REPO / module).read_text())
    found = {
        node.name: f"{node.lineno}-{node.end_lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    missing = set(functions) - found.keys()
    if missing:
        sys.exit(f"tools/mutation.py: {module} has no {', '.join(sorted(missing))}")
    return [found[name] for name in functions]


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_command(tests: list[str]) -> list[str]:
    """One process, no parallel workers; a mutant that hangs (a wait loop's test turned) fails
    by pytest-timeout's limit, which counts as killed."""
    return [_bin("pytest"), "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
            "--timeout", "10", *tests]  # fmt: skip


def run_module(module: str, tests: list[str], work: Path, commit: str) -> dict:
    config = work / (Path(module).stem + ".toml")
    session = config.with_suffix(".sqlite")
    command = test_command(tests)
    # Tests that fail unmutated would "kill" every mutant: a kill rate of 1.0 that means nothing.
    baseline = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if baseline.returncode != 0:
        tail = (baseline.stdout + baseline.stderr).strip().splitlines()[-3:]
        sys.exit(f"tools/mutation.py: {module}'s tests fail unmutated: {' / '.join(tail)}")
    lines = _lines_of(module, PARTS[module]) if module in PARTS else None
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        "timeout = 120.0\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(' '.join(command))}\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
        + (f"[cosmic-ray.filters.line-filter.lines]\n{json.dumps(module)} = {json.dumps(lines)}\n"
           if lines else "")
    )  # fmt: skip
    session.unlink(missing_ok=True)
    started = time.monotonic()
    subprocess.run([_bin("cosmic-ray"), "init", str(config), str(session)], check=True, cwd=REPO)
    if lines:  # the mutants outside the named functions are marked skipped
        subprocess.run([_bin("cr-filter-lines"), "--config", str(config), str(session)],
                       check=True, cwd=REPO)  # fmt: skip
    subprocess.run([_bin("cosmic-ray"), "exec", str(config), str(session)], check=True, cwd=REPO)
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    outcomes: dict[str, int] = {}
    survivors = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            outcome = (result.test_outcome or result.worker_outcome).value
            if result.test_outcome == TestOutcome.SURVIVED:
                mutation = item.mutations[0]
                changed = [
                    line for line in (result.diff or "").splitlines()
                    if line[:1] in "+-" and not line.startswith(("+++", "---"))
                ]  # fmt: skip
                # Under `from __future__ import annotations` an annotation is never
                # evaluated: a mutant there (`float | None` to `float ** None`) is the same
                # program, which no test can tell apart.
                if changed and _annotation_only(changed, module, mutation.start_pos[0]):
                    outcome = "equivalent"
                else:
                    survivors.append({"line": mutation.start_pos[0],
                                      "operator": mutation.operator_name,
                                      "diff": "\n".join(changed)})  # fmt: skip
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    killed = outcomes.get(TestOutcome.KILLED.value, 0)
    survived = outcomes.get(TestOutcome.SURVIVED.value, 0)
    judged = killed + survived
    return {
        "module": module,
        "commit": commit[:10],
        "tests": tests,
        "functions": list(PARTS.get(module, ())),
        "mutants": sum(n for kind, n in outcomes.items() if kind != "skipped"),
        "outcomes": outcomes,
        "kill_rate": round(killed / judged, 3) if judged else None,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "survivors": sorted(survivors, key=lambda s: s["line"]),
    }


def _only(result: dict) -> str:
    functions = result.get("functions")
    part = f" ({', '.join(functions)})" if functions else ""
    part += f" **partial: {result['partial']}**" if result.get("partial") else ""
    again = result.get("rechecked")
    if again:
        part += (
            f" (its {again['survivors']} survivors re-run at {again['commit']} by"
            f" tools/mutation_recheck.py: {again['killed']} now killed)"
        )
    return part


def write_report(results: list[dict], commit: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "mutation.json").write_text(
        json.dumps({"commit": commit, "modules": results}, indent=1) + "\n"
    )
    lines = [
        "# Mutation testing (tools/mutation.py, cosmic-ray)",
        "",
        f"Last run at {commit[:10]}. Each module against the tests listed for it, at the",
        "commit given; the kill rate is",
        "killed / (killed + survived); incompetent mutants (code that no longer runs) and",
        "mutants of annotations (never evaluated here: the same program) left out.",
        "",
        "| module | commit | tests | mutants | killed | survived | equivalent | kill rate | min |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        killed, survived = r["outcomes"].get("killed", 0), r["outcomes"].get("survived", 0)
        lines.append(
            f"| `{r['module']}`{_only(r)} | {r['commit']} "
            f"| {', '.join(f'`{t}`' for t in r['tests'])} "
            f"| {r['mutants']} | {killed} | {survived} | {r['outcomes'].get('equivalent', 0)} "
            f"| {r['kill_rate']} | {r['minutes']} |"
        )
    for r in results:
        if r["survivors"]:
            lines += ["", f"## Survivors in `{r['module']}`", ""]
            for s in r["survivors"]:
                diff = s["diff"].replace("\n", " / ")
                lines.append(f"- line {s['line']} ({s['operator']}): `{diff}`")
    (RESULTS / "mutation.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="default: every module in MODULES")
    parser.add_argument(
        "--functions",
        help="comma-separated functions to mutate in the one module named, instead of PARTS' "
        "(its result is kept beside the module's whole one)",
    )
    args = parser.parse_args()
    if args.functions:
        if len(args.modules) != 1:
            sys.exit("tools/mutation.py: --functions takes exactly one module")
        PARTS[args.modules[0]] = tuple(args.functions.split(","))
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, cwd=REPO).stdout  # fmt: skip
    own = {"tools/results/mutation.json", "tools/results/mutation.md"}  # one run after another
    if any(line[3:] not in own for line in dirty.splitlines()):
        sys.exit("tools/mutation.py: commit or stash your changes first (modules are mutated "
                 "in place)")  # fmt: skip
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=REPO, check=True).stdout.strip()  # fmt: skip
    previous = {}
    if (RESULTS / "mutation.json").exists():
        previous = {result_key(r): r for r in json.loads(
            (RESULTS / "mutation.json").read_text())["modules"]}  # fmt: skip
    chosen = args.modules or list(MODULES)
    with tempfile.TemporaryDirectory() as work:
        for module in chosen:
            result = run_module(module, MODULES[module], Path(work), commit)
            if args.functions:
                result["only"] = True
            previous[result_key(result)] = result
            write_report(list(previous.values()), commit)
            print(f"{module}: kill rate {result['kill_rate']}", flush=True)


def result_key(result: dict) -> str:
    """A module's whole (or PARTS') result, or one of ``--functions`` kept beside it."""
    if result.get("only"):
        return result["module"] + "#" + ",".join(result["functions"])
    return result["module"]


if __name__ == "__main__":
    main()
