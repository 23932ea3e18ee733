import subprocess
from pathlib import Path

from schedlab import commitlint


def _commit(repo: Path, subject: str) -> str:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost",
                    "commit", "-q", "--allow-empty", "-m", subject], check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def _repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def test_a_subject_needs_an_area_and_at_most_72_characters():
    assert commitlint.subject_problems("series-check: MAINTAINERS titles") == []
    bad = ["not 'area: summary' (one lowercase area of [a-z0-9_./-], one space after "
           "the colon)"]
    assert commitlint.subject_problems("fix the thing") == bad
    assert commitlint.subject_problems("kunit:  two spaces") == bad
    # One area, lowercase, no spaces: the pattern the lab's rule is written in.
    for subject in ("series check: two words", "README: capitals", "tests, lint: two areas"):
        assert commitlint.subject_problems(subject) == bad, subject
    assert commitlint.subject_problems('Revert "kunit: a change"') == []
    assert commitlint.subject_problems("docs/results: a page") == []
    long = "kunit: " + "x" * 66
    assert commitlint.subject_problems(long) == ["73 characters (at most 72)"]
    assert commitlint.subject_problems(long[:-1]) == []


def test_only_the_commits_after_the_base_are_checked(tmp_path):
    repo = _repo(tmp_path)
    _commit(repo, "an old subject without an area, from before the rule")
    base = _commit(repo, "another old one")
    (repo / ".ci").mkdir()
    (repo / ".ci" / "commit-lint-base").write_text(base + "\n")
    assert commitlint.check(repo) == []
    _commit(repo, "lint: a good subject")
    assert commitlint.check(repo) == []
    _commit(repo, "a bad subject")
    problems = commitlint.check(repo)
    assert len(problems) == 1 and "a bad subject: not 'area: summary'" in problems[0]
    assert "git rebase -i" in problems[0]


def test_a_missing_base_is_a_problem_not_a_pass(tmp_path):
    assert "is not a git checkout" in commitlint.check(tmp_path)[0]
    repo = _repo(tmp_path)
    _commit(repo, "lint: first")
    assert "missing or empty" in commitlint.check(repo)[0]
    (repo / ".ci").mkdir()
    (repo / ".ci" / "commit-lint-base").write_text("\n")
    assert "missing or empty" in commitlint.check(repo)[0]
    (repo / ".ci" / "commit-lint-base").write_text("0" * 40 + "\n")
    assert "which this clone does not have" in commitlint.check(repo)[0]
