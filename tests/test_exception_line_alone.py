"""An exception line pasted without its traceback (issue 16): classed by what the source that
raises it says of it alone, and left `unknown` (with the line as evidence) when it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.pipeline import Options, analyze

CUDA_COUNT = (
    "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
    "before calling NumCudaDevices() that might have already set an error? Error 804: forward "
    "compatibility was attempted on non supported HW"
)


def _root(tmp_path: Path, lines: list[str]):
    path = tmp_path / "pasted.txt"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    report = analyze([str(path)], Options())
    causes = [i for i in report.incidents if i.severity in ("fatal", "error")]
    return causes[0] if causes else None


@pytest.mark.parametrize(
    ("lines", "expected_class", "expected_rule"),
    [
        # torch/cuda/__init__.py _lazy_init -> torch._C._cuda_init: the GPUs could not be counted
        ([CUDA_COUNT], "environment", "frame-phase:cuda-init"),
        # torchrun's agent (torch/distributed/launcher/api.py launch_agent): a worker failed
        (
            ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "],
            "silent_death",
            "child-died",
        ),
        # sampler / renorm modules bind sgl_kernel's kernel only under a platform check
        (
            ["NameError: name 'top_k_renorm_prob' is not defined"],
            "environment",
            "guarded-import-name",
        ),
    ],
)
def test_an_exception_line_alone_is_classed_by_its_source(
    tmp_path, lines, expected_class, expected_rule
):
    root = _root(tmp_path, lines)
    assert root is not None and root.severity == "fatal"
    assert (root.rule_class, root.rule) == (expected_class, expected_rule)
    assert root.evidence and root.evidence[-1].body.startswith(lines[-1].strip())


@pytest.mark.parametrize(
    "line",
    [
        # the same text as torch.cuda.is_available's warning is no failure to start CUDA
        "UserWarning: CUDA initialization: " + CUDA_COUNT.removeprefix("RuntimeError: "),
        # a name SGLang imports unguarded (or never from a dependency) could be any script's
        "NameError: name 'AutoConfig' is not defined",
        "NameError: name 'launch_server_cmd' is not defined",
    ],
)
def test_a_near_miss_is_not_classed(tmp_path, line):
    root = _root(tmp_path, [line])
    assert root is None or root.rule_class not in ("environment", "silent_death")


@pytest.mark.parametrize(
    "line",
    [
        # their meaning depends on the code around them: unknown, with the line as evidence
        "IndexError: list index out of range",
        "AttributeError: 'NoneType' object has no attribute 'shape'",
        "AssertionError",
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        # a keyword passed twice is no release mismatch (sglang-api-mismatch,
        # engine-kwargs-mismatch), and alone it does not say whether SGLang's own launcher
        # (0.1.x Runtime.__init__: sglang-call-refused) or a program passed it twice
        "TypeError: sglang.srt.server_args.ServerArgs() got multiple values for keyword argument 'log_level'",
    ],
)
def test_a_line_whose_meaning_depends_on_context_stays_unknown(tmp_path, line):
    root = _root(tmp_path, [line])
    assert root is not None and root.rule_class == "unknown"
    assert [e.body for e in root.evidence] == [line]
