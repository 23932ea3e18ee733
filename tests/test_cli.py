"""The command line: every command parses, and none takes an option it ignores."""

import pytest

from schedlab import cli, cliargs


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
    ["compare", "a", "b", "--model", "--only", "x"],
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
    assert cliargs.vm_options(args).online == 4 and cliargs.vm_options(args).append == ("quiet",)
    spec = cliargs.build_spec(args)
    assert (spec.variant, spec.config, spec.no_build, spec.name) == ("patched", "lab", True,
                                                                     "patched")
    args = _parse("ab", "--plan", "stress-50", "--runs", "2", "--probe", "swb")
    plan = cliargs.plan_request(args)
    assert plan.names() == ["stress-50"] and plan.runs == 2 and plan.probes == ("swb",)


@pytest.fixture
def no_work(monkeypatch):
    """Any fetch, build or boot fails the test: bad input must stop before them."""
    from schedlab.core import build as buildmod
    from schedlab.core import deps, source, vm
    from schedlab.series import matrix, topics

    def forbidden(what):
        def fail(*a, **k):
            raise AssertionError(f"{what} started on bad input")
        return fail
    monkeypatch.setattr(deps, "setup", forbidden("setup"))
    monkeypatch.setattr(source, "resolve_tree", forbidden("a fetch"))
    monkeypatch.setattr(buildmod, "build", forbidden("a build"))
    monkeypatch.setattr(vm, "boot", forbidden("a boot"))
    monkeypatch.setattr(buildmod, "run_make", forbidden("make"))
    monkeypatch.setattr(matrix, "run", forbidden("the matrix"))
    monkeypatch.setattr(topics, "check_apply", forbidden("git am"))
    monkeypatch.setattr(topics, "mail", forbidden("format-patch"))


BAD_INPUT = [
    # (command line, what the message must name)
    (["series", "matrix", "--cells", "tiny,nope"], "unknown cell 'nope'; known: tiny, "),
    (["series", "matrix", "--cells", ""], "unknown cell ''"),
    (["series", "check", "--full"], "--full and --cells are for 'series matrix'"),
    (["series", "apply", "--cells", "tiny"], "are for 'series matrix'"),
    (["series", "mail", "--topic", "nope", "--out", "/tmp/x"], "unknown topic 'nope'"),
    (["series", "mail", "--topic", "wake"], "needs --topic NAME and --out DIR"),
    (["series", "check", "--topic", "wake"], "--topic, --out and --from are for 'series mail'"),
    (["series", "check", "--from", "Jane Doe <jane.doe@linux.dev>"], "are for 'series mail'"),
    (["series", "mail", "--topic", "swb", "--out", "/tmp/x", "--from", "jane.doe@linux.dev"],
     "not of the form 'Name <local@domain>'"),
    (["series", "mail", "--topic", "swb", "--out", "/tmp/x", "--from",
      "Jane Doe <jane@kernel.example.org>"], "placeholder or no-reply address"),
    (["vm", "-t", "smt9", "--", "nproc"], "smt4-numa"),       # names the presets
    (["vm", "-t", "smt4", "--online", "9", "--", "nproc"], "has 8 CPUs"),
    (["vm", "--arch", "sparc"], "invalid choice"),
    (["build", "--config", "nope"], "invalid choice"),
    (["build", "--variant", "both"], "invalid choice"),
    (["kunit", "-t", "3x3"], "unknown topology"),
    (["kunit", "--online", "0"], "1 or more"),
    (["selftest", "--boots", "0"], "1 or more"),
    (["soak", "-t", "smt9"], "unknown topology"),
    (["soak", "--variant", "tip"], "invalid choice"),
    (["peer-tests", "--variant", "tip"], "invalid choice"),
    (["measure", "--label", "x", "--probe", "swb,nope"], "unknown probe 'nope'"),
    (["measure", "--label", "x", "--plan", "stress-100,nope"], "unknown workload 'nope'"),
    (["measure", "--label", "x", "--knob", "newidle cost=1"], "expected NAME=VALUE"),
    (["measure", "--label", "../x"], "label '../x'"),
    (["measure", "--label", "x", "-t", "smt9"], "unknown topology"),
    (["measure", "--label", "x", "--knob", "nosuch=1"], "not a knob the lab knows"),
    (["measure", "--label", "x", "--arch", "ppc64le"], "invalid choice"),
    (["selftest", "--arch", "ppc64le"], "invalid choice"),
    (["vm", "--arch", "ppc64le", "--", "uname", "-r"], "only checks the topology"),
    (["test", "--online", "12"], "has 8 CPUs"),
    (["measure", "--label", "x", "--vm", "--host"], "not allowed with"),
    (["ab", "-t", "smt9"], "unknown topology"),
    (["ab", "--probe", "nope"], "unknown probe"),
    (["ab", "--plan", "nope"], "unknown workload"),
    (["ab", "--boots", "0"], "1 or more"),
    (["ab", "--arm", "base=tip"], "VARIANT one of base, patched, topic-kunit"),
    (["ab", "--arm", "base=base"], "two arms or more"),
    (["ab", "--topic", "swb", "--arm", "a=base", "--arm", "b=patched"], "give the topic's arm"),
    (["ab", "--topic", "nope"], "unknown topic 'nope'"),
    (["build", "--variant", "base", "--topic", "swb"], "--variant base and --topic swb"),
    (["kunit", "--topic", "nope"], "unknown topic 'nope'"),
    (["kunit", "--scale"], "use --arch ppc64le"),
    (["kunit", "--scale", "--arch", "ppc64le", "--online", "4"], "not with --online"),
    (["kunit", "--scale", "--arch", "ppc64le", "-t", "smt8"], "not with --topology"),
    (["kunit", "--scale", "--arch", "ppc64le", "--config", "probe"], "not with --config probe"),
    (["kunit", "--scale", "--arch", "ppc64le", "--variant", "base"], "not with --variant base"),
    (["ab", "--arm", "base=base", "--arm", "x=patched:nosuch=4"], "not a knob the lab knows"),
    (["ab", "--label", "a b"], "label 'a b'"),
    (["ab", "--arch", "sparc"], "invalid choice"),
    (["compare", "no-such-set-1", "no-such-set-2"], "no result set 'no-such-set-1'"),
    (["reparse", "no-such-set"], "no result set"),
    (["compare", "lines-proof", "lines-proof", "--other-llc"], "give --model too"),
    (["compare", "lines-proof", "lines-proof", "--func", "x"], "give --model too"),
    (["compare", "lines-proof", "lines-proof", "--model", "--each"], "drop --each"),
    (["compare", "lines-proof", "lines-proof", "--model", "--func", " "], "needs a function"),
    (["measure", "--label", "x", "--probe", "insns,swb", "--accel", "icount"], "runs alone"),
    (["measure", "--label", "x", "--probe", "lines"], "needs --accel icount"),
    (["ab", "--probe", "lines,swb", "--accel", "icount"], "runs alone"),
    (["lines-proof", "--rounds", "5"], "at least 10"),
    (["measure", "--label", "x", "--host", "--probe", "lines"], "runs only in the VM"),
    (["ab", "--probe", "lines", "--accel", "icount", "-t", "4x4x8"], "at most 64"),
    (["lines-proof", "-t", "4x4x8"], "at most 64"),
    (["lines-proof", "-t", "smt9"], "unknown topology"),
    (["run", "-t", "smt9"], "unknown topology"),
    (["run", "--arch", "sparc"], "invalid choice"),
    (["test", "-t", "smt9"], "unknown topology"),
    (["test", "--arch", "sparc"], "invalid choice"),
    (["test", "--arch", "ppc64le", "--full"], "POWER stages alone"),
    (["series", "bogus"], "invalid choice"),
    (["series", "export", "-v", "0"], "1 or more"),
    (["hw", "--rehearse", "--fresh"], "always measures afresh"),
    (["hw", "--switch-proof", "--rounds", "2"], "--rounds would be ignored"),
    (["hw", "--switch-proof", "--bench", "stress-50", "--runs", "3"],
     "--bench, --runs would be ignored"),
    (["hw", "--code-only"], "goes with --switch-proof"),
    (["hw", "--switch-proof", "--c2c"], "--c2c would be ignored"),
    (["hw", "--lb-share", "--c2c"], "a pass of its own: without --c2c"),
    (["hw", "--lb-share", "--switch-proof"], "without --switch-proof"),
    (["hw", "--lb-share", "--arm", "nope"], "unknown arm"),
    (["series", "objdiff", "--start", "base"], "--start REV and --end REV together"),
    (["series", "check", "--end", "posted~3"], "--start and --end are for export, objdiff"),
    (["series", "matrix", "--start", "base"], "no --start"),
    (["series", "apply", "--lab"], "--lab is for 'series export'"),
    (["series", "export", "--lab", "--kit"], "one of --lab, --measure, --kit"),
]


@pytest.mark.parametrize("argv,named", BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_refused_before_any_work(no_work, capsys, argv, named):
    try:
        status = cli.main(argv)
    except SystemExit as exc:
        status = exc.code
    assert status == 2
    assert named in capsys.readouterr().err


def test_series_mail_without_a_sender_is_refused_before_any_work(no_work, capsys, tmp_path,
                                                                 monkeypatch):
    """No --from and no git user in the checkout: exit 2, naming both ways."""
    import subprocess
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "0001-a.patch").write_text("x\n")
    (tmp_path / "patches" / "series").write_text("0001-a.patch\n")
    (tmp_path / "patches" / "topics").write_text("kunit 1 Core\n")
    monkeypatch.setenv("SCHEDLAB_REPO", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    status = cli.main(["series", "mail", "--topic", "kunit", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2
    assert "needs a sender" in err and "--from" in err
    assert "git config user.name/user.email" in err
    assert not (tmp_path / "out").exists()


def test_every_command_family_has_a_bad_input_case():
    parser = cli.make_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    tried = {argv[0] for argv, _ in BAD_INPUT}
    assert set(sub.choices) - tried <= {"setup", "fetch", "presets"}   # take no names


def test_every_command_help_ends_with_examples(capsys):
    parser = cli.make_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    for name in sub.choices:
        with pytest.raises(SystemExit):
            parser.parse_args([name, "--help"])
        out = capsys.readouterr().out
        assert "examples:\n  ./schedlab " + name in out, name


def test_a_host_kernel_carries_the_measurement_series_but_the_stock_one(tmp_path,
                                                                         monkeypatch):
    from schedlab import cli
    from schedlab.core import hostbuild
    from schedlab.core.spec import TreeSpec
    from schedlab.series import patchset
    applied = []
    monkeypatch.setattr(TreeSpec, "resolve", lambda self: "tree")
    monkeypatch.setattr(patchset, "ensure_variant",
                        lambda tree, variant, measure, series, kit:
                        applied.append((variant, measure, kit)) or "c0ffee")
    monkeypatch.setattr(hostbuild, "host_config_source", lambda path: tmp_path / "config")
    monkeypatch.setattr(hostbuild, "build_host", lambda *a, **k: tmp_path)
    for variant in ("patched", "base"):
        assert cli.main(["build", "--host-config", "--variant", variant]) == 0
    assert applied[1] == ("base", False, False)
    assert applied[0][:2] == ("patched", True)
