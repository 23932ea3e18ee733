"""The command line: every command parses, and none takes an option it ignores."""

import pytest

from schedlab import cli


def _parse(*argv):
    return cli.make_parser().parse_args(list(argv))


def test_every_command_has_help(capsys):
    parser = cli.make_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    assert list(sub.choices)[:2] == ["ab", "test"]        # the two main commands first
    for name in sub.choices:
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([name, "--help"])
        assert exc.value.code == 0
    assert "./schedlab ab" in cli.__doc__ and "./schedlab test" in cli.__doc__


@pytest.mark.parametrize("argv", [
    ["kunit", "--memory", "4096"],          # the KUnit boot has its own memory
    ["kunit", "--rwdir", "/tmp"],
    ["measure", "--label", "x", "--append", "quiet"],
    ["ab", "--no-check"],
    ["compare", "a", "b", "--kernel", "/k"],
    ["compare", "a", "b", "--headline", "--only", "x"],   # one would silently win
    ["selftest", "--verbose"],
    ["presets", "--variant", "base"],
])
def test_options_a_command_would_ignore_are_refused(argv):
    with pytest.raises(SystemExit) as exc:
        _parse(*argv)
    assert exc.value.code == 2


def test_typed_requests_from_options():
    args = _parse("vm", "-t", "smt8", "--online", "4", "--append", "quiet", "--no-build",
                  "--", "nproc")
    assert cli.vm_options(args).online == 4 and cli.vm_options(args).append == ("quiet",)
    spec = cli.build_spec(args)
    assert (spec.variant, spec.config, spec.no_build, spec.name) == ("patched", "lab", True,
                                                                     "patched")
    args = _parse("ab", "--plan", "stress-50", "--runs", "2", "--probe", "swb")
    plan = cli.plan_request(args)
    assert plan.names() == ["stress-50"] and plan.runs == 2 and plan.probes == ("swb",)
