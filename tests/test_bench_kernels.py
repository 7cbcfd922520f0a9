"""devtools/bench's tools beside a run, on one block: the chain of the
blocks' weights against the memory probe, and the working tree's kernels
against a git revision's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from common.cli import UsageError
from common.steps import REPO
from devtools.bench import chain, kernels_ab
from devtools.bench.probe import READERS
from tests.fixtures import run_tool


def test_the_projection_chain_reports_its_speed_against_the_probe(tmp_path: Path) -> None:
    """devtools.bench.chain on one block, both dtypes and every way, two
    rounds: a table with the probe's GB/s and each chain's GB/s, its share of
    the probe and, but for the one call itself, of the one call."""
    out = tmp_path / "chain.md"
    result = run_tool(
        "devtools.bench.chain",
        *("--blocks", "1", "--rounds", "2", "--calls", "1", "--probe-mb", "64", "--out", str(out)),
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    table = out.read_text()
    assert table.startswith("Machine: ") and "The weights of 1 GPT-2 block (" in table
    readings = [
        f"{dtype} weights, {way}"
        for dtype in ("float32", "bfloat16")
        for way in chain.WAYS.values()
    ]
    probes = ["the probe: the faster sum over 64 MiB"]
    probes += [f"the probe, by {reader}" for reader in READERS.values()]
    for reading in (*probes, *readings):
        (row,) = [line for line in table.splitlines() if reading in line]
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[1].split()[0]) > 0, row
        if reading not in probes:
            assert cells[2].split()[0].endswith("%"), row
            one_call = reading.endswith(chain.WAYS["one_call"])
            assert cells[3] == "-" if one_call else cells[3].split()[0].endswith("%"), row


def mojo_sources(folder: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in folder.glob("*.mojo")}


def test_a_revisions_kernels_are_copied_with_their_ops_renamed(tmp_path: Path) -> None:
    """kernels_ab loads a revision's kernels next to the working tree's: every
    file of the package is copied, and every op it registers is renamed, so
    that none shadows the working tree's."""
    kernels_ab.kernels_at("HEAD", tmp_path)
    copied = mojo_sources(tmp_path)
    working_tree = mojo_sources(REPO / "fast" / "kernels")
    assert copied.keys() == working_tree.keys()
    assert not any('register("gpt2_' in source for source in copied.values())
    renamed = sum(source.count('register("base_gpt2_') for source in copied.values())
    assert renamed == sum(source.count('register("gpt2_') for source in working_tree.values()) > 0


def test_a_revision_with_the_kernels_in_one_file_is_copied_too(tmp_path: Path) -> None:
    """Before the package was split by concern, every kernel was in
    gpt2_kernels.mojo: kernels_ab still loads such a revision."""
    split = subprocess.run(
        [
            "git",
            "log",
            "-1",
            "--format=%H",
            "--diff-filter=D",
            "--",
            "fast/kernels/gpt2_kernels.mojo",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not split:
        pytest.skip("the history here does not reach the kernels in one file")
    kernels_ab.kernels_at(f"{split}^", tmp_path)
    copied = mojo_sources(tmp_path)
    assert sorted(copied) == ["__init__.mojo", "gpt2_kernels.mojo"]
    assert 'register("base_gpt2_decode_blocks")' in copied["gpt2_kernels.mojo"]
    assert 'register("gpt2_' not in copied["gpt2_kernels.mojo"]


def test_a_revision_without_kernels_is_named(tmp_path: Path) -> None:
    first = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.split()[-1]
    with pytest.raises(UsageError, match=f"{first} has no fast/kernels"):
        kernels_ab.kernels_at(first, tmp_path)


MEASURED = {  # kernels_ab's arguments beside --against HEAD: its report lines
    "decode": (
        ("--position", "40"),  # attention over 41 keys: runs side by side and a tail
        [f"bfloat16, 1 block at position 40, {chain.WAYS['token']}: "],
    ),
    "prompt": (
        ("--rows", "8"),
        [
            "bfloat16, the MLP's first projection (3072 x 768) at 8 rows: ",
            "bfloat16, the MLP's second projection (768 x 3072) at 8 rows: ",
        ],
    ),
}


@pytest.mark.parametrize("measured", MEASURED)
def test_the_kernels_against_a_revision_run_in_turns_and_agree(measured: str) -> None:
    """The working tree's kernels against HEAD's, two rounds of one bfloat16
    block (the decode, at position 40) or of the projection kernel at 8 rows
    (a prompt): a line per measurement with both versions' calls and their
    ratio; the committed kernels compute exactly what the working tree's do
    (CI runs a clean clone)."""
    extra, starts = MEASURED[measured]
    args = ("--against", "HEAD", "--dtypes", "bfloat16", "--blocks", "1", "--rounds", "2")
    result = run_tool("devtools.bench.kernels_ab", *args, "--calls", "1", *extra, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("bfloat16, ")]
    assert len(lines) == len(starts), lines
    assert [line[: len(start)] for line, start in zip(lines, starts, strict=True)] == starts
    changed = subprocess.run(
        ["git", "status", "--porcelain", "fast/kernels"], cwd=REPO, capture_output=True, text=True
    ).stdout
    for line in lines:
        assert "over 2 rounds" in line
        assert float(line.split("the working tree ")[1].split("x as fast")[0]) > 0
        if not changed:
            assert line.endswith("outputs differ by at most 0"), line


@pytest.mark.parametrize(
    "args, named",
    [
        (("--against", "no-such-revision"), "no-such-revision"),
        (("--against", "HEAD", "--rows", "0"), "--rows must be at least 1"),
        (("--against", "HEAD", "--position", "1024"), "--position must be from 0 to 1023"),
    ],
)
def test_the_kernels_against_a_bad_revision_or_count_say_so(args: tuple, named: str) -> None:
    result = run_tool("devtools.bench.kernels_ab", *args, timeout=120)
    assert result.returncode != 0
    assert named in result.stderr and "Traceback" not in result.stderr
