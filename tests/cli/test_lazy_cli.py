"""The click group loads command modules lazily: fast start, every command's help, one-liners in sync."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from servecap.cli.main import COMMANDS, cli, load_command

HEAVY = ("pydantic", "typer", "numpy", "httpx", "fastapi", "asyncio")


def _imported_by(args: list[str]) -> set[str]:
    code = (
        "import sys\nfrom servecap.cli.main import run\nsys.argv = ['servecap', *sys.argv[1:]]\n"
        "try:\n    run()\nexcept SystemExit:\n    pass\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    return set(proc.stderr.split())


@pytest.mark.parametrize("args", [["plan", "--json"], ["--help"]])
def test_plan_and_help_import_no_heavy_module(args: list[str]) -> None:
    mods = _imported_by(args)
    assert "servecap.cli.main" in mods
    assert not {m for m in mods if m.split(".")[0] in HEAVY}


def test_root_help_lists_every_command_without_importing_them() -> None:
    mods = _imported_by(["--help"])
    assert not {m for m in mods if m.startswith("servecap.cli.") and m.endswith("_cmd")}
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


@pytest.mark.parametrize("name", list(COMMANDS))
def test_one_liner_is_the_docstrings_first_paragraph(name: str) -> None:
    cmd = load_command(COMMANDS[name].target)
    assert cmd.help is not None
    assert " ".join(cmd.help.split("\n\n")[0].split()) == COMMANDS[name].short_help


@pytest.mark.parametrize(
    "args",
    [[name, flag] for name in COMMANDS for flag in ("--help", "-h")]
    + [["runs", sub, "--help"] for sub in ("show", "export", "delete")],
)
def test_every_help_works(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output


def test_no_args_shows_help_and_type_errors_are_usage_errors() -> None:
    result = CliRunner().invoke(cli, [])
    assert "Usage: " in result.output and "plan" in result.output
    result = CliRunner().invoke(cli, ["plan", "--tp", "abc"])
    assert result.exit_code == 2 and "'abc' is not a valid integer" in result.output
    result = CliRunner().invoke(cli, ["nope"])
    assert result.exit_code == 2 and "No such command" in result.output


def test_type_error_through_the_entry_point(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from servecap.cli.main import run

    monkeypatch.setattr("sys.argv", ["servecap", "plan", "--tp", "abc"])
    with pytest.raises(SystemExit) as exc:
        run()
    assert exc.value.code == 2
    assert "Invalid value for '--tp'" in capsys.readouterr().err


def test_keyboard_interrupt_exits_130(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import servecap.cli.main as main

    @click.command()
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("sys.argv", ["servecap", "interrupted"])
    monkeypatch.setitem(main.cli.commands, "interrupted", interrupted)
    with pytest.raises(SystemExit) as exc:
        main.run()
    assert exc.value.code == 130
    assert "interrupted" in capsys.readouterr().err
