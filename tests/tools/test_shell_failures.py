"""The shell tool's own failures are typed results too: a program that cannot start."""

from __future__ import annotations

from pathlib import Path

from tests.tools.test_tools import shell


async def test_a_program_the_kernel_will_not_execute_is_io_error(
    tree: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    garbage = bin_dir / "zc-garbage"
    garbage.write_bytes(b"\x00\x01 not an executable format")
    garbage.chmod(0o755)
    result = await shell(
        tree,
        "zc-garbage",
        allowed_commands=frozenset({"zc-garbage"}),
        agent_env={"PATH": str(bin_dir)},
    )
    assert (result.ok, result.error_code) == (False, "io_error"), result
    assert "ENOEXEC" in result.detail
