"""The help users see is what the commands say: ``rocketstore`` (cli/main.py) is compared
with the CLI wired as it was before it loaded command modules lazily: every command
module's ``register()``, ``demo``, and mqadmin's ignored ``-n``/``-c`` on each command as it
was. Command names, sections, summaries, options and help texts must all come out the same."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import rocketstore.cli
from rocketstore.cli import main
from rocketstore.cli.demo import demo


class _EagerGroup(click.Group):
    """The old SectionedGroup: lists the loaded commands by main.SECTIONS' order."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections = [(title, [e.name for e in entries]) for title, entries in main.SECTIONS.items()]
        listed: set[str] = set()
        for title, names in (*sections, ("Other", sorted(self.commands))):
            rows = []
            for name in names:
                command = self.commands.get(name)
                if command is None or name in listed or command.hidden:
                    continue
                listed.add(name)
                rows.append((name, command.get_short_help_str(120)))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _eager_group() -> click.Group:
    group = _EagerGroup(
        "rocketstore",
        params=main.cli.params,
        help=main.cli.help,
        context_settings=main.cli.context_settings,
    )
    for module_info in pkgutil.iter_modules(rocketstore.cli.__path__):
        module = importlib.import_module(f"rocketstore.cli.{module_info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(group)
    group.add_command(demo)
    return group


IGNORED_HELP = "Accepted for mqadmin compatibility, ignored offline. "
IGNORED_OPTS = (["-n", "--namesrvAddr"], ["-c", "--cluster"])


def _is_added(param: click.Parameter) -> bool:
    """One of the -n/-c options main adds (commands have their own ignored ones: -b)."""
    return param.opts in IGNORED_OPTS and (getattr(param, "help", None) or "").startswith(
        IGNORED_HELP
    )


def _ignored_options(name: str, command: click.Command) -> list[tuple[object, ...]]:
    """mqadmin's -n (every command but the servers) and -c (the message queries and
    topicStatus), taken and ignored where the command has no option of its own by that name."""
    own = [p for p in command.params if not _is_added(p)]
    expected: list[tuple[object, ...]] = []
    for flag, long, names in (
        ("-n", "--namesrvAddr", set(EAGER.commands) - {"serve", "broker", "namesrv"}),
        (
            "-c",
            "--cluster",
            {"queryMsgByKey", "queryMsgById", "queryMsgByUniqueKey", "topicStatus"},
        ),
    ):
        if name in names and not any(flag in p.opts or long in p.opts for p in own):
            example = "127.0.0.1:9876" if flag == "-n" else "DefaultCluster"
            expected.append(([flag, long], True, False, f"{IGNORED_HELP}Example: {flag} {example}"))
    return expected


EAGER = _eager_group()


def _help(group: click.Group, *args: str) -> tuple[int, str]:
    run = CliRunner().invoke(group, list(args), prog_name="rocketstore", terminal_width=200)
    return run.exit_code, run.output


def test_the_same_commands_in_the_same_order() -> None:
    ctx = click.Context(main.cli)
    assert set(main.cli.list_commands(ctx)) == set(EAGER.commands)
    assert _help(main.cli, "--help") == _help(EAGER, "--help")


@pytest.mark.parametrize("name", sorted(EAGER.commands))
def test_a_commands_help_and_options(name: str) -> None:
    command = main.cli.get_command(click.Context(main.cli), name)
    assert command is not None
    assert command.hidden is EAGER.commands[name].hidden
    ignored = [
        (p.opts, getattr(p, "hidden", None), p.expose_value, getattr(p, "help", None))
        for p in command.params
        if _is_added(p)
    ]
    assert ignored == _ignored_options(name, command)
    assert _help(main.cli, name, "--help") == _help(EAGER, name, "--help")


@pytest.mark.parametrize("args", [("nosuch",), ("topiclist",), ("--json", "nosuch", "-t", "T")])
def test_an_unknown_command_is_refused_alike(args: tuple[str, ...]) -> None:
    assert _help(main.cli, *args) == _help(EAGER, *args)


def test_the_root_help_imports_no_command() -> None:
    """``rocketstore --help`` lists the commands from main's table (a fresh interpreter:
    this one has imported them all)."""
    script = (
        "import sys\n"
        "from rocketstore.cli.main import main\n"
        "assert main(['--help']) == 0\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('rocketstore.cli'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = done.stdout.splitlines()[-1].split()
    assert loaded == ["rocketstore.cli", "rocketstore.cli.main", "rocketstore.cli.params"]
