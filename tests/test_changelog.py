"""The changelog rules: prose lines and tables of a patch's changelog."""

from pathlib import Path

import pytest

from schedlab.series import changelog as cl

TEMPLATE = (Path(__file__).parent / "data" / "patch-template.txt").read_text()

TABLE = """\
  fixture              busy 90%       50%
  smt2-x86-2x16x2       330 ->  324    261 ->  230
  smt4-2x12x4           540 ->  531    875 ->  802
"""

BULLETS = """\
 - With SMT inactive, the copy is still made on every call above the
   lowest level, and no CPU is ever dropped from it.
 - In a local group that is one SMT core  the first idle CPU wins
   whatever its core  and its siblings are dropped.
"""

COMMAND = """\
  ./schedlab ab --arm base=base --arm p4=topic-swb@2 \\
      --arm p5=topic-swb@3 --arm p6=topic-swb -t smt8 --accel icount \\
      --probe swb-cost --plan stress-100,stress-50 --runs 1 --seconds 5
"""


def _prose(n):
    return "".join(f"Line {i} of the changelog, which says what and why.\n" for i in range(n))


@pytest.mark.parametrize("n,problems", [
    (45, []),
    (46, ["changelog: 46 prose lines (at most 45)"]),
])
def test_at_most_45_prose_lines(n, problems):
    text = _prose(n)
    assert cl.shape(text) == cl.Shape(prose=n, tables=0)
    patch = TEMPLATE.format(author="A <a@b.dev>", trailers="").replace(
        "The comment above the scan names the CPU it stops at, not the reason it\n"
        "stops there. Say that it stops at the first idle CPU of the group.\n", text)
    assert cl.length_problems(patch) == problems


def test_blank_lines_trailers_and_the_subject_are_not_prose():
    patch = TEMPLATE.format(author="A <a@b.dev>", trailers=(
        "\n\n\nLink: https://lore.kernel.org/r/x@y\nAssisted-by: LLM\n"))
    assert cl.changelog(patch) == (
        "The comment above the scan names the CPU it stops at, not the reason it\n"
        "stops there. Say that it stops at the first idle CPU of the group.")
    assert cl.shape(cl.changelog(patch)) == cl.Shape(prose=2, tables=0)


def test_a_table_is_not_prose_and_two_are_too_many():
    one = "Counts:\n\n" + TABLE + "\nFewer.\n"
    assert cl.shape(one) == cl.Shape(prose=2, tables=1)
    two = one + "\n" + TABLE.replace("fixture", "level  ")
    assert cl.shape(two) == cl.Shape(prose=2, tables=2)
    patch = TEMPLATE.format(author="A <a@b.dev>", trailers="\n" + two)
    assert cl.length_problems(patch) == ["changelog: 2 tables (at most 1)"]


def test_a_label_line_between_rows_is_part_of_the_table():
    labelled = ("  workload        v7.3   100\n"
                "  hackbench, 2 groups per CPU\n"
                "    newidle runs  153    239\n"
                "    time, s       3.66   3.52\n"
                "  '*': significant against 100, the note\n"
                "  below the table.\n")
    assert cl.shape(labelled) == cl.Shape(prose=2, tables=1)


def test_one_row_is_not_a_table():
    assert cl.shape("  a  b\n") == cl.Shape(prose=1, tables=0)
    assert cl.shape("a  b\nc  d\n") == cl.Shape(prose=2, tables=0)   # not indented


def test_a_bullet_list_is_prose_even_with_wide_gaps():
    assert cl.shape(BULLETS) == cl.Shape(prose=4, tables=0)
    assert cl.shape(BULLETS.replace(" - ", " * ")) == cl.Shape(prose=4, tables=0)


def test_a_command_block_is_neither_prose_nor_a_table():
    assert cl.shape("Run:\n\n" + COMMAND) == cl.Shape(prose=1, tables=0)
    # Its continuation lines count even when not indented.
    assert cl.shape("  $ make -C tools/testing/selftests \\\nTARGETS=sched run_tests\n") == \
        cl.Shape(prose=0, tables=0)
    assert cl.shape("  tools/testing/kunit/kunit.py run --kunitconfig=kernel/sched\n"
                    "  git  log  --oneline\n") == cl.Shape(prose=0, tables=0)
    # Indented prose that names a tool further on is prose.
    assert cl.shape("  The factor is set with\n  echo 400 > newidle_cost_pct\n") == \
        cl.Shape(prose=2, tables=0)


def _version_patch(subject_prefix="[PATCH 1/1]", body_extra="", added="+ * New comment."):
    patch = TEMPLATE.format(author="A <a@b.dev>", trailers=body_extra)
    patch = patch.replace("[PATCH 1/1]", subject_prefix)
    return patch.replace("+ * Scan the group for its first idle CPU.", added)


def test_no_version_number_is_no_problem_and_v7_3_is_the_kernel():
    assert cl.version_problems(_version_patch()) == []
    assert cl.version_problems(_version_patch(
        body_extra="\nMeasured on v7.3 and v7.3.4.\n", added="+ * Since v7.3.")) == []


@pytest.mark.parametrize("prefix", ["[PATCH v16 01/10]", "[PATCH v2]", "[RFC PATCH v9 2/3]"])
def test_a_version_in_the_subject_prefix_is_a_problem(prefix):
    assert cl.version_problems(_version_patch(subject_prefix=prefix)) == [
        f"version number: {prefix} in the subject"]


def test_a_version_in_the_changelog_or_an_added_line_is_a_problem():
    assert cl.version_problems(_version_patch(body_extra="\nAs v8 of this series did.\n")) == [
        "version number: v8 in the changelog: As v8 of this series did."]
    assert cl.version_problems(_version_patch(added="+ * v19 drops this.")) == [
        "version number: v19 added to kernel/sched/fair.c: * v19 drops this."]
    # Below the '---' line (what changed since the last version) is its place;
    # a trailer (a link to the last version) is not the changelog.
    below = _version_patch().replace("---\n", "---\nv16: shorter.\n", 1)
    assert cl.version_problems(below) == []
    link = _version_patch(body_extra="\nLink: https://lore.kernel.org/r/v16-0-x@y\n")
    assert cl.version_problems(link) == []


def test_a_version_problem_names_three_places_and_counts_the_rest():
    many = _version_patch(subject_prefix="[PATCH v10 1/2]",
                          body_extra="\nv10, v11, v12 and v13 each differ.\n")
    assert cl.version_problems(many) == [
        "version number: [PATCH v10 1/2] in the subject; "
        "v10 in the changelog: v10, v11, v12 and v13 each differ.; "
        "v11 in the changelog: v10, v11, v12 and v13 each differ. (and 2 more)"]
